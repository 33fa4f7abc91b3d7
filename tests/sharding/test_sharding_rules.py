"""Logical-axis rules: readable specs per parameter, optimizer moments follow their parameter,
indivisible dimensions stay whole, and per-device state bytes shrink with the FSDP size."""

import jax
import jax.numpy as jnp
import optax
from jax.sharding import PartitionSpec as P

from grpo_jax import models
from grpo_jax import sharding as shard_lib
from grpo_jax.sharding import rules as rules


def _shapes(cfg):
  _, params = models.abstract_params(cfg)
  return {
    "params": params,
    "opt_state": jax.eval_shape(optax.adamw(1e-3).init, params),
    "step": jax.ShapeDtypeStruct((), jnp.int32),
  }


def test_train_and_sample_presets_on_an_abstract_mesh():
  state = _shapes(models.PRESETS["qwen3_8b_base"])
  mesh = shard_lib.abstract_mesh((2, 4, 8))
  specs = rules.tree_specs(state, rules.TRAIN, mesh)
  attn = specs["params"]["layers"][0]["self_attn"]
  assert attn["q_proj"]["kernel"] == P("fsdp", "tensor")
  assert attn["o_proj"]["kernel"] == P("tensor", "fsdp")
  assert attn["q_norm"]["weight"] == P()
  assert specs["params"]["embed_tokens"]["embedding"] == P("tensor", "fsdp")
  assert specs["params"]["lm_head"]["kernel"] == P("fsdp", "tensor")
  assert specs["params"]["layers"][3]["mlp"]["down_proj"]["kernel"] == P("tensor", "fsdp")
  # Adam moments get their parameter's spec; counts and the step stay replicated.
  adam = specs["opt_state"][0]
  assert adam.mu["layers"][0]["self_attn"]["q_proj"]["kernel"] == P("fsdp", "tensor")
  assert adam.count == P() and specs["step"] == P()
  sample = rules.tree_specs(state["params"], rules.SAMPLE, mesh)
  assert sample["layers"][0]["self_attn"]["q_proj"]["kernel"] == P(None, "tensor")


def test_indivisible_dimensions_stay_whole():
  mesh = shard_lib.abstract_mesh((1, 2, 8))
  # 2 kv heads · 16 = 32 columns divide by 8, 100278 vocabulary rows do not.
  assert rules.spec_for(("embed", "kv_heads"), (64, 32), rules.TRAIN, mesh) == P("fsdp", "tensor")
  assert rules.spec_for(("vocab", "embed"), (100278, 64), rules.TRAIN, mesh) == P(None, "fsdp")
  assert rules.spec_for(("embed", "kv_heads"), (64, 12), rules.TRAIN, mesh) == P("fsdp")
  # The KV cache: rows over data × fsdp, kv heads over tensor.
  mesh = shard_lib.abstract_mesh((2, 2, 2))
  spec = rules.spec_for(rules.KV_CACHE_KEYS, (4, 8, 16, 10), rules.SAMPLE, mesh)
  assert spec == P(("data", "fsdp"), "tensor")
  spec = rules.spec_for(rules.KV_CACHE_VALUES, (4, 8, 10, 16), rules.SAMPLE, mesh)
  assert spec == P(("data", "fsdp"), "tensor")


def test_state_bytes_per_device_shrink_with_fsdp():
  cfg = models.ModelConfig(
    vocab_size=64,
    hidden_dim=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=16,
    mlp_dim=128,
  )
  _, params = models.init_params(cfg, 0)
  full = shard_lib.shard_bytes(params) * 3  # params + Adam mu, nu
  measured = {}
  for fsdp in (1, 2, 4, 8):
    mesh = shard_lib.make_mesh(
      type("M", (), {"data": 8 // fsdp, "fsdp": fsdp, "tensor": 1})(), jax.devices()[:8]
    )
    shapes = {"params": params, "opt_state": optax.adam(1e-3).init(params)}
    shardings = shard_lib.state_shardings(jax.eval_shape(lambda s: s, shapes), mesh)
    state = jax.device_put(shapes, shardings)
    measured[fsdp] = shard_lib.shard_bytes(state["params"]) + shard_lib.shard_bytes(
      [state["opt_state"][0].mu, state["opt_state"][0].nu]
    )
  print("per-device params+Adam bytes by fsdp:", measured, "unsharded:", full)
  assert measured[1] == full
  for a, b in ((1, 2), (2, 4), (4, 8)):
    assert measured[b] < 0.6 * measured[a]  # ~halves (norm weights stay replicated)
