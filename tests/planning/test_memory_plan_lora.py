"""``--dry_run``'s memory plan with LoRA (``grpo_jax.planning.memory``): every byte entry equals
the bytes of the arrays the run itself builds (``train.state.init_state``, the merged sampler
copy), on one device and on 8 simulated devices under FSDP × TP."""

import dataclasses

import jax
import numpy as np
import pytest

from grpo_jax import models
from grpo_jax import sharding as shard_lib
from grpo_jax.config.base import defaults
from grpo_jax.models import lora
from grpo_jax.planning import dry_run
from grpo_jax.planning import memory as memory_plan
from grpo_jax.sharding import rules as rules_lib
from grpo_jax.train.optimizer import make_optimizer
from grpo_jax.train.state import init_state

MODEL = dataclasses.replace(models.PRESETS["test"], dtype="bfloat16")
WORK = dict(prompts=2, group_size=2, prompt_tokens=4, response_tokens=4)


def _bytes(tree, shardings=None) -> int:
  """Per-device bytes of ``tree`` (whole arrays when ``shardings`` is None)."""
  leaves = jax.tree.leaves(tree)
  if shardings is None:
    return sum(x.size * np.dtype(x.dtype).itemsize for x in leaves)
  return sum(
    int(np.prod(s.shard_shape(x.shape))) * np.dtype(x.dtype).itemsize
    for x, s in zip(leaves, jax.tree.leaves(shardings))
  )


def _state(rank: int, mesh_shape=(1, 1, 1)):
  """The run's abstract train state (adapters, their Adam moments, the frozen base) and its
  per-device shardings on ``mesh_shape``."""
  e = defaults(
    {
      "model.lora.rank": rank,
      "model.lora.alpha": 8.0,
      "model.dtype": "bfloat16",
      "loss.kl_coef": 0.05,
    }
  )
  _, params = models.init_params(MODEL, 0)
  optimizer = make_optimizer(e.optimizer)
  state = jax.eval_shape(lambda p: init_state(p, optimizer, e), params)
  mesh = shard_lib.abstract_mesh(mesh_shape)
  rules = rules_lib.TRAIN
  return params, state, lambda t: rules_lib.tree_shardings(t, rules, mesh)


@pytest.mark.parametrize("mesh_shape", [(1, 1, 1), (1, 2, 4)])
def test_lora_plan_counts_adapters_base_and_merged_copy(mesh_shape):
  params, state, train = _state(4, mesh_shape)
  spec = lora.LoraSpec(4, 8.0)
  work = memory_plan.Workload(**WORK, reference=True, lora=spec)
  est = memory_plan.plan(MODEL, mesh_shape, work, memory_plan.H100_X8)
  adapters, base = state.params, state.base
  assert est["params"] == _bytes(adapters, train(adapters)) + _bytes(base, train(base))
  # Adam's moments of the adapters; the run's schedule adds int32 step counters (scalars)
  assert 0 <= _bytes(state.opt_state, train(state.opt_state)) - est["optimizer"] <= 8
  assert est["optimizer"] >= 2 * _bytes(adapters, train(adapters))
  assert est["reference"] == 0  # the base with the adapters off is the reference
  merged = jax.eval_shape(lambda b, a: lora.merge(b, a, spec.alpha, spec.rank), base, adapters)
  sample = rules_lib.tree_shardings(merged, rules_lib.SAMPLE, shard_lib.abstract_mesh(mesh_shape))
  assert est["sampler_params"] == _bytes(merged, sample) > 0
  full = memory_plan.plan(
    MODEL, mesh_shape, dataclasses.replace(work, lora=None), memory_plan.H100_X8
  )
  assert est["optimizer"] < full["optimizer"]
  assert est["gradients"] < full["gradients"]
  assert full["reference"] == _bytes(base, train(base)) > 0


def test_dry_run_reads_the_lora_config():
  e = defaults({"model.lora.rank": 2, "model.lora.targets": ("q",)})
  with_lora = dry_run.plan(e, 1, hardware=memory_plan.H100_X8)
  without = dry_run.plan(e.with_overrides({"model.lora.rank": 0}), 1, hardware=memory_plan.H100_X8)
  assert with_lora.workload.lora == lora.LoraSpec(2, e.model.lora.alpha, ("q",))
  assert with_lora.bytes["optimizer"] < without.bytes["optimizer"]


@pytest.mark.parametrize("mesh_shape, moved", [((1, 1, 4), False), ((1, 2, 4), True)])
def test_unmerged_sampler_counts_the_adapters_and_only_a_moved_base(mesh_shape, moved):
  """``model.lora.sampler = 'unmerged'``: the sampler reads the base's own buffers where its
  layout is the train layout (tensor only), a re-laid-out copy where it is not (fsdp splits the
  train layout), and the adapters cast to the compute dtype either way."""
  _, state, _ = _state(4, mesh_shape)
  spec = lora.LoraSpec(4, 8.0)
  work = memory_plan.Workload(**WORK, lora=spec)
  merged = memory_plan.plan(MODEL, mesh_shape, work, memory_plan.H100_X8)
  unmerged_work = dataclasses.replace(work, lora_unmerged=True)
  est = memory_plan.plan(MODEL, mesh_shape, unmerged_work, memory_plan.H100_X8)
  cast = jax.eval_shape(lambda a: models.compute_params(a, "bfloat16"), state.params)
  mesh = shard_lib.abstract_mesh(mesh_shape)
  adapters = _bytes(cast, rules_lib.tree_shardings(cast, rules_lib.SAMPLE, mesh))
  assert est["sampler_params"] == (merged["sampler_params"] if moved else 0) + adapters
  assert 0 < adapters < merged["sampler_params"]
