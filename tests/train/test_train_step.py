"""The jitted GRPO update: on-policy ratio exactly 1, mesh independence, non-finite guard."""

import pathlib

import jax
import numpy as np
import pytest

from grpo_jax import data, models
from grpo_jax import sharding as shard_lib
from grpo_jax.config import files as config_file
from grpo_jax.rollout.one_stage import OneStageRollout, Policy, SampleSettings
from grpo_jax.train.metrics import check_finite, to_host
from grpo_jax.train.optimizer import make_optimizer
from grpo_jax.train.state import init_state
from grpo_jax.train.update import make_update_step

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _setup(devices, overrides=()):
  cfg = config_file.load(str(ROOT / "configs/tiny_test.py"), list(overrides))
  mesh = shard_lib.make_mesh(cfg.mesh, devices)
  task = data.build_task(cfg)
  model_cfg = models.ModelConfig.from_config(cfg.model, vocab_size=len(task.tokenizer))
  graphdef, params = models.init_params(model_cfg, cfg.seed)
  optimizer = make_optimizer(cfg.optimizer)
  state = init_state(params, optimizer, cfg)
  shardings = jax.tree.map(lambda _: shard_lib.replicated(mesh), state)
  state = jax.device_put(state, shardings)
  update = make_update_step(graphdef, optimizer, cfg, mesh, shardings, task.prompt_len)
  return cfg, mesh, task, graphdef, state, update


def _batch(cfg, task, graphdef, state, mesh):
  problems = task.train_problems(0, cfg.sampling.prompts_per_step)
  settings = SampleSettings.from_config(cfg.sampling)
  policy = Policy(graphdef, state.params, mesh, settings)
  batch = OneStageRollout(cfg, task)(policy, problems, jax.random.PRNGKey(3))
  # Make sure the batch has signal: alternate rewards inside each group.
  return batch.replace(rewards_N=(np.arange(batch.num_rows) % 2).astype(np.float32))


def test_on_policy_ratio_is_exactly_one():
  cfg, mesh, task, graphdef, state, update = _setup(jax.devices()[:1])
  batch = _batch(cfg, task, graphdef, state, mesh)
  _, metrics = update(state, batch.to_device(mesh))
  metrics = to_host(metrics)
  assert metrics["ratio/mean"] == 1.0
  assert metrics["clip/low_frac"] == 0.0 and metrics["clip/high_frac"] == 0.0
  assert metrics["ppo_kl"] == 0.0
  assert metrics["grad/norm"] > 0.0
  assert metrics["rollout/logp_gap_mean"] < 1e-4


def test_one_device_and_eight_devices_agree():
  results, batch = [], None
  for devices in (jax.devices()[:1], jax.devices()[:8]):
    cfg, mesh, task, graphdef, state, update = _setup(devices)
    batch = _batch(cfg, task, graphdef, state, mesh) if batch is None else batch
    new_state, metrics = update(state, batch.to_device(mesh))
    results.append((to_host(metrics), jax.device_get(new_state.params)))
  (m1, p1), (m8, p8) = results
  assert len(jax.devices()) == 8
  np.testing.assert_allclose(m8["loss/total"], m1["loss/total"], rtol=1e-5, atol=1e-7)
  for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(p8)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_non_finite_metric_stops_with_step_name():
  with pytest.raises(FloatingPointError, match="step 7"):
    check_finite(7, {"loss/total": float("nan"), "grad/norm": 1.0})
  check_finite(7, {"loss/total": 0.5, "grad/norm": 1.0})
