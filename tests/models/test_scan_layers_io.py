"""model.scan_layers outside the forward pass: the config key reaches the model, HF export of
stacked params and import into the stacked layout are exact, and stacked params get the
``layers`` axis (never split) in front of their unrolled sharding on an 8-device mesh."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from grpo_jax import config as config_lib
from grpo_jax import models
from grpo_jax import sharding as shard_lib
from grpo_jax.models import hf_io, safetensors_io
from grpo_jax.models.layer_stack import is_stacked, stack_layers
from grpo_jax.sharding import rules
from tests.support.models import small_config

CFG = small_config(vocab=64, tie_embeddings=False, scan_layers=True)


def _exact(a, b):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))


def test_scan_layers_key_reaches_the_model_config():
  assert config_lib.defaults().model.scan_layers is False
  cfg = config_lib.defaults({"model.scan_layers": True})
  assert models.ModelConfig.from_config(cfg.model, vocab_size=20).scan_layers
  cfg = cfg.with_overrides({"model.preset": "tiny"})
  graphdef, params = models.build_policy(cfg, vocab_size=20)
  assert is_stacked(params)
  assert params["layers"]["mlp"]["down_proj"]["kernel"].shape[0] == 4


def test_hf_export_and_import_with_scan_layers(tmp_path):
  graphdef, params = models.init_params(CFG, 3)
  out = models.save_hf(models.HFModel(graphdef, params, CFG), tmp_path / "hf")
  # The checkpoint holds HF's per-layer tensors, transposed.
  reader = safetensors_io.CheckpointReader(out)
  q2 = reader.read("model.layers.2.self_attn.q_proj.weight")
  q_kernel = params["layers"]["self_attn"]["q_proj"]["kernel"]
  np.testing.assert_array_equal(q2, np.asarray(q_kernel[2]).T)
  names = dict(hf_io.hf_arrays(params))
  assert "model.layers.1.mlp.up_proj.weight" in names and "lm_head.weight" in names
  # Loaded unrolled (what config.json says), stacked on request: the same params.
  back = models.load_hf(str(out), tokenizer=False)
  assert not is_stacked(back.params)
  _exact(params, stack_layers(back.params))
  g2, stacked = hf_io.load_params(CFG, reader, str(out))
  _exact(params, stacked)
  # Into stacked shardings on a 2×2×2 mesh: each layer read into its slice's layout, then stacked.
  mesh = Mesh(np.array(jax.devices()).reshape(2, 2, 2), shard_lib.AXES)
  shardings = rules.tree_shardings(models.abstract_params(CFG)[1], rules.TRAIN, mesh)
  _, sharded = hf_io.load_params(CFG, reader, str(out), mesh, shardings)
  _exact(params, sharded)
  up = sharded["layers"]["mlp"]["up_proj"]["kernel"]
  assert up.sharding.is_equivalent_to(NamedSharding(mesh, P(None, "fsdp", "tensor")), 3)
  tokens = jnp.arange(12, dtype=jnp.int32).reshape(2, 6) % 64
  logits = models.forward(g2, stacked, tokens, jnp.ones_like(tokens))
  np.testing.assert_allclose(back(tokens), logits, atol=1e-5, rtol=1e-5)


def test_build_policy_stacks_a_checkpoint(tmp_path):
  flat_cfg = dataclasses.replace(CFG, scan_layers=False)
  graphdef, params = models.init_params(flat_cfg, 4)
  out = models.save_hf(models.HFModel(graphdef, params, flat_cfg), tmp_path / "hf")
  keys = {"model.hf_path": str(out), "model.scan_layers": True, "model.remat": "full"}
  g1, p1 = models.build_policy(config_lib.defaults(keys))
  _exact(stack_layers(params), p1)
  tokens = jnp.arange(12, dtype=jnp.int32).reshape(2, 6) % 64
  mask = jnp.ones_like(tokens)
  np.testing.assert_allclose(
    models.forward(g1, p1, tokens, mask), models.forward(graphdef, params, tokens, mask), atol=1e-5
  )


def test_stacked_params_get_the_layer_axis_in_front_of_their_spec():
  mesh = Mesh(np.array(jax.devices()).reshape(2, 2, 2), shard_lib.AXES)
  _, params = models.abstract_params(CFG)
  state = {"params": params, "opt_state": jax.eval_shape(optax.adamw(1e-3).init, params)}
  specs = rules.tree_specs(state, rules.TRAIN, mesh)
  layer = specs["params"]["layers"]
  assert layer["self_attn"]["q_proj"]["kernel"] == P(None, "fsdp", "tensor")
  assert layer["self_attn"]["o_proj"]["kernel"] == P(None, "tensor", "fsdp")
  assert layer["self_attn"]["k_proj"]["kernel"] == P(None, "fsdp", "tensor")
  assert layer["mlp"]["down_proj"]["kernel"] == P(None, "tensor", "fsdp")
  assert layer["input_layernorm"]["weight"] == P()
  assert specs["params"]["lm_head"]["kernel"] == P("fsdp", "tensor")
  assert specs["opt_state"][0].mu["layers"]["mlp"]["up_proj"]["kernel"] == P(None, "fsdp", "tensor")
  sample = rules.tree_specs(params, rules.SAMPLE, mesh)
  assert sample["layers"]["mlp"]["gate_proj"]["kernel"] == P(None, None, "tensor")
  assert rules.logical_axes("layers.self_attn.q_proj.kernel", 3) == ("layers", "embed", "heads")
  assert rules.logical_axes("layers.0.self_attn.q_proj.kernel", 2) == ("embed", "heads")
  for preset in rules.PRESETS.values():
    assert preset.mesh_axes("layers") is None
  # The sharded stacked params run, and give the unsharded logits.
  graphdef, real = models.init_params(CFG, 0)
  sharded = jax.device_put(real, rules.tree_shardings(real, rules.TRAIN, mesh))
  q = sharded["layers"]["self_attn"]["q_proj"]["kernel"]
  assert q.sharding.is_equivalent_to(NamedSharding(mesh, P(None, "fsdp", "tensor")), 3)
  tokens = jnp.arange(16, dtype=jnp.int32).reshape(4, 4)
  fwd = jax.jit(models.forward, static_argnums=0)
  logits = shard_lib.under_mesh(fwd, mesh)(graphdef, sharded, tokens, jnp.ones_like(tokens))
  want = fwd(graphdef, real, tokens, jnp.ones_like(tokens))
  np.testing.assert_allclose(np.asarray(logits), np.asarray(want), atol=1e-5, rtol=1e-5)
