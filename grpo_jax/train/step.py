"""One RL step, top to bottom: rollout → :func:`prepare_batch` (cut, pack, shard) → the jitted
update → metrics (written with the step's samples).

The rollout is drawn by :func:`draw_batch` (the sampler's copy of the parameters over this
process's share of prompts, shaped by DAPO: METHODS §4) through the run's ``Prefetcher``
(``grpo_jax.train.overlap``), which with ``rollout.off_policy_steps = 1`` hands out the batch
drawn during the previous update and starts the next one before this update runs.
"""

from __future__ import annotations

import functools
import time

import jax
import numpy as np

from grpo_jax import sharding as shard_lib
from grpo_jax import strategy
from grpo_jax.rollout import dynamic_sampling, multihost
from grpo_jax.rollout.batch import RolloutBatch
from grpo_jax.sampling.weights import sampler_copy
from grpo_jax.train import step_metrics
from grpo_jax.train.length_buckets import Prepared
from grpo_jax.train.metrics import check_finite, to_host
from grpo_jax.train.overlap import Prefetcher
from grpo_jax.train.run import Run
from grpo_jax.train.samples import step_samples
from grpo_jax.train.state import TrainState, step_keys
from grpo_jax.train.update import check_shared_prompts


def draw_batch(run: Run, cursor: int, key, params) -> tuple[RolloutBatch, int]:
  """``(batch, prompts consumed)``: one step's rows from data position ``cursor``, sampled by
  the sampler copy of ``params`` (the policy's weights, ``Setup.weights``). Multi-host, each
  process samples and grades only its own prompts' rows, and the kept groups and DAPO's metrics
  are exchanged job-wide."""
  e, s = run.e, run.s
  policy = run.policy.replace(params=s.to_sampler(params))
  rollout_fn, problems_fn = multihost.process_share(
    functools.partial(s.rollout, policy),
    s.task.train_problems,
    s.mesh,
    e.sampling.group_size,
    strategy.id_units(e),
  )
  rows = shard_lib.batch_size_multiple(s.mesh)
  exchange = multihost.RowExchange(s.mesh)
  return dynamic_sampling.sample_batch(
    rollout_fn, problems_fn, cursor, key, e, row_multiple=rows, exchange=exchange
  )


def rollouts(run: Run) -> Prefetcher:
  """The run's batches, drawn on the step (on-policy) or during the previous update by a copy
  of the parameters before it (``rollout.off_policy_steps = 1``)."""
  e = run.e
  copy_params = sampler_copy(e.model.dtype, run.s.sample_shardings, fresh=True)
  return Prefetcher(
    functools.partial(draw_batch, run),
    copy_params,
    e.rollout.off_policy_steps,
    run.workdir,
    e.rollout.join_timeout_s,
    run.log,
  )


def prepare_batch(run: Run, batch: RolloutBatch) -> Prepared:
  """The batch as the update reads it: cut to its bucket width (``loss.length_buckets``), its
  real tokens packed into rows (``loss.pack``), the rows sharded over the mesh."""
  if run.e.loss.share_prompt:
    check_shared_prompts(batch, run.e.sampling.group_size, run.s.rollout.prompt_len)
  return run.update.prepare(batch)


def rl_step(run: Run, state: TrainState, step: int) -> tuple[TrainState, dict[str, float]]:
  """RL step ``step`` (0-based) from ``state``: ``(the state after it, its metrics)``. The data
  cursor advances by the prompts the rollout consumed."""
  e = run.e
  t0 = time.time()
  cursor = int(state.data_pos)
  key = step_keys(state.rng, step)["sample"]
  weights = run.s.weights(state)  # LoRA: the adapters merged into the base, or beside it
  with run.watch.rollout_failure(run.ckpt, run.log):  # SIGTERM: stops as preempted
    batch, consumed, rollout_m = run.rollouts.take(step, cursor, key, weights)
  if e.rollout.off_policy_steps and step + 1 < e.steps:  # by the params before the update
    next_key = step_keys(state.rng, step + 1)["sample"]
    run.rollouts.start(step + 1, cursor + consumed, next_key, weights)

  t1 = time.time()
  prepared = prepare_batch(run, batch)
  state, update_m = run.update.run(state, prepared)
  data_pos = jax.device_put(np.int32(cursor + consumed), run.s.state_shardings.data_pos)
  state = state.replace(data_pos=data_pos)
  update_m = to_host(update_m)
  check_finite(step + 1, update_m)
  t2 = time.time()

  metrics = {
    **update_m,
    **prepared.metrics,  # update/width, update/compiled_widths; pack/*
    **batch.metrics,  # response/*, strategy/* (two-stage), dapo/*, reward/<fn>/*
    **run.s.task.load_metrics,  # data/*: rows dropped or skipped at load
    **rollout_m,  # time/rollout_s; overlap: its wait and rollout/staleness
    **step_metrics.host(e, run.s.task, batch, step, (t0, t1, t2), rollout_m["time/rollout_s"]),
  }
  run.writer.write(step + 1, metrics)
  run.writer.write_samples(step + 1, step_samples(batch, run.s.task, e.logging.samples_per_step))
  return state, metrics


__all__ = ["draw_batch", "prepare_batch", "rl_step", "rollouts"]
