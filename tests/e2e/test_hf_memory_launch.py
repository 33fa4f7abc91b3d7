"""The memory estimate against the real bytes of a tiny model on an 8-device mesh; the presets'
parameter counts; and an HF-format Qwen3 trained for 2 steps through the real launcher."""

import dataclasses
import json
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from grpo_jax import data, models, sampling
from grpo_jax.config import defaults
from grpo_jax.planning import memory as memory_plan
from grpo_jax.train.optimizer import make_optimizer

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _device_bytes(tree) -> int:
  """Bytes that device 0 holds for the arrays of ``tree``."""
  total = 0
  for x in jax.tree.leaves(tree):
    if hasattr(x, "addressable_shards") and jnp.issubdtype(x.dtype, jnp.floating):
      total += sum(s.data.nbytes for s in x.addressable_shards if s.device == jax.devices()[0])
  return total


def test_memory_estimate_matches_actual_bytes():
  cfg = dataclasses.replace(models.PRESETS["test"], param_dtype="bfloat16", dtype="bfloat16")
  mesh = Mesh(np.asarray(jax.devices()).reshape(8, 1, 1), ("data", "fsdp", "tensor"))
  _, params = models.init_params(cfg, 0)
  params = jax.device_put(params, NamedSharding(mesh, P()))
  opt_state = make_optimizer(defaults().optimizer).init(params)
  reference = jax.tree.map(jnp.copy, params)
  N, P_, T = 16, 5, 7
  prompt = jax.device_put(jnp.ones((N, P_), jnp.int32), NamedSharding(mesh, P(("data", "fsdp"))))
  model = jax.tree.map(lambda x: x, params)
  graphdef, _ = models.init_params(cfg, 0)
  _, cache = jax.jit(
    lambda p, t: sampling.prefill(
      __import__("flax").nnx.merge(graphdef, p), t, jnp.ones_like(t), P_ + T
    )
  )(model, prompt)
  work = memory_plan.Workload(prompts=N, group_size=1, prompt_tokens=P_, response_tokens=T)
  est = memory_plan.plan(cfg, (8, 1, 1), work, memory_plan.H100_X8)
  assert est["params"] == _device_bytes(params) == cfg.num_params * 2
  # AdamW's moments; the plan also counts the optimizer's integer step counters (a few bytes).
  assert 0 <= est["optimizer"] - _device_bytes(opt_state) <= 16
  assert est["reference"] == _device_bytes(reference)
  assert est["kv_cache"] == _device_bytes((cache.k_NxSxHkxDh, cache.v_NxSxHkxDh))
  assert est["peak"] > est["params"] + est["optimizer"] + est["kv_cache"]
  sharded = memory_plan.plan(cfg, (2, 4, 1), work, memory_plan.H100_X8)
  assert est["params"] / 4 <= sharded["params"] < est["params"] / 4 * 1.05


def test_presets_have_their_published_sizes():
  billions = {
    name: models.PRESETS[name].num_params / 1e9
    for name in (
      "qwen3-0.6b",
      "qwen3-1.7b",
      "qwen3_4b_base",
      "qwen3_8b_base",
      "olmo3_7b_base",
      "llama3_2_3b_instruct",
    )
  }
  expected = {
    "qwen3-0.6b": 0.596,
    "qwen3-1.7b": 1.72,
    "qwen3_4b_base": 4.02,
    "qwen3_8b_base": 8.19,
    "olmo3_7b_base": 7.30,
    "llama3_2_3b_instruct": 3.21,
  }
  for name, b in billions.items():
    assert abs(b - expected[name]) / expected[name] < 0.01, (name, b)
  o = models.PRESETS["olmo3_7b_base"]
  assert o.layer_types.count("full_attention") == 8 and o.layer_types[3] == "full_attention"
  hf = models.to_hf_config(o)
  assert models.from_hf_config(hf, "bfloat16") == o
  ll = models.PRESETS["llama3_2_3b_instruct"]
  assert models.from_hf_config(models.to_hf_config(ll), "bfloat16") == ll
  est = memory_plan.plan(
    models.PRESETS["qwen3_8b_base"], (1, 8, 1), memory_plan.Workload(), memory_plan.H100_X8
  )
  assert 1.9 < est["params"] / 2**30 < 2.0  # 8.19e9 bf16 params over 8 devices


@pytest.mark.slow
def test_launcher_trains_hf_qwen3_for_two_steps(tmp_path, launcher_env):
  tok = data.build_tokenizer()
  cfg = models.ModelConfig(
    vocab_size=len(tok),
    hidden_dim=32,
    num_layers=2,
    num_heads=2,
    num_kv_heads=1,
    head_dim=16,
    mlp_dim=64,
    rope_theta=1e4,
  )
  graphdef, params = models.init_params(cfg, 3)
  ckpt = tmp_path / "hf_qwen3"
  models.save_hf(models.HFModel(graphdef, params, cfg), ckpt, tokenizer=tok)
  assert json.loads((ckpt / "config.json").read_text())["model_type"] == "qwen3"
  cmd = [
    sys.executable,
    str(ROOT / "experiments/launch.py"),
    "--config",
    str(ROOT / "configs/tiny_test.py"),
    "--workdir",
    str(tmp_path / "run"),
    f"--config.model.hf_path={ckpt}",
    "--config.model.hidden_dim=8",
    "--config.checkpoint.keep=3",
  ]
  proc = subprocess.run(cmd, env=launcher_env(), capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  steps = [json.loads(x)["step"] for x in (tmp_path / "run/metrics.jsonl").read_text().splitlines()]
  assert steps == [1, 2]
  # The run started from the checkpoint (its shape, its values), not from a random init of the
  # config's hidden_dim=8. (A random policy may score 0 everywhere, so no update is asserted.)
  import orbax.checkpoint as ocp

  state = ocp.StandardCheckpointer().restore(tmp_path / "run/checkpoints/0/default")
  for kp, x in jax.tree_util.tree_flatten_with_path(params)[0]:
    got = state["params"]
    for k in kp:
      got = got[str(getattr(k, "key", k))] if str(getattr(k, "key", k)) in got else got[k.key]
    np.testing.assert_array_equal(np.asarray(got), np.asarray(x))
