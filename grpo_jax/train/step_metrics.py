"""The host-side metrics of one RL step (``docs/metrics.md``): the learning rate, throughput,
step-phase times and peak memory beside the update's own, and the metrics of features a run
does not use dropped, so no logged key is a constant by construction.
"""

from __future__ import annotations

import resource
import sys

import jax
import numpy as np

from grpo_jax import strategy
from grpo_jax.losses import correction
from grpo_jax.train.optimizer import learning_rate_schedule

GIB = 2.0**30


def learning_rate(e, step: int) -> float:
  """``optim/lr``: the rate of step ``step``'s (0-based) first optimizer step; each RL step
  takes ``loss.num_iterations × loss.num_minibatches`` of them."""
  per_step = e.loss.num_iterations * e.loss.num_minibatches
  schedule = learning_rate_schedule(e.optimizer.learning_rate, e.optimizer.warmup_steps)
  return float(schedule(step * per_step))


def throughput(batch, rollout_s: float, update_s: float) -> dict[str, float]:
  """Tokens per second of this process's rows: sampled completion tokens over the rollout's
  time (``perf/rollout_tokens_per_s``), and every real prompt and completion token the update
  reads over its time (``perf/update_tokens_per_s``). Padding rows count for neither."""
  real_N = batch.group_ids_N >= 0
  sampled = float(np.sum(batch.lengths_N[real_N]))
  read = float(np.sum(batch.input_mask_NxL[real_N]))
  return {
    "perf/rollout_tokens_per_s": sampled / max(rollout_s, 1e-9),
    "perf/update_tokens_per_s": read / max(update_s, 1e-9),
  }


def peak_memory() -> dict[str, float]:
  """``memory/host_peak_gib``: this process's peak resident memory; ``memory/device_peak_gib``:
  the largest peak over its devices, where the backend reports one (GPU, TPU; not CPU)."""
  rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
  out = {"memory/host_peak_gib": rss / (GIB if sys.platform == "darwin" else GIB / 1024)}
  stats = [d.memory_stats() for d in jax.local_devices()]
  peaks = [s["peak_bytes_in_use"] for s in stats if s and "peak_bytes_in_use" in s]
  if peaks:
    out["memory/device_peak_gib"] = max(peaks) / GIB
  return out


def inactive(e) -> tuple[str, ...]:
  """Key prefixes of the features this run does not use: their metrics would be constants."""
  d = e.dapo
  drop = []
  if not e.hadw.enabled:  # hadw/batch_acc stays: the batch accuracy y_t, HA-DW on or off
    drop += ["hadw/anchor", "hadw/eta", "hadw/phi_"]
  if not (d.dynamic_sampling or d.overlong_filter or d.overlong_penalty):
    drop.append("dapo/")
  if e.loss.kl_coef == 0:
    drop.append("loss/kl")  # no reference model
  if e.sampling.engine == "jax":
    drop.append("time/weight_push_s")  # the jitted sampler reads the trainer's parameters
  if not correction.rejects(e.loss):
    drop.append("mismatch/masked_frac")
  if correction.bounds(e.loss)[2] <= 0:
    drop.append("mismatch/veto_frac")
  if e.loss.dual_clip == 0:
    drop.append("clip/dual_frac")
  if e.loss.kind == "sapo":  # no clip: its gate bounds the update
    drop += ["clip/low_frac", "clip/high_frac"]
  if e.loss.entropy_control == "none":
    drop.append("entropy/controlled_frac")
  if e.advantage.baseline != "subgroup_offset":
    drop.append("adv/offset_abs_mean")
  if not strategy.is_two_stage(e):
    drop += ["adv/subgroups_per_prompt", "strategy/"]
  return tuple(drop)


def active(metrics: dict[str, float], e) -> dict[str, float]:
  """``metrics`` without the keys of :func:`inactive` features."""
  drop = inactive(e)
  return {k: v for k, v in metrics.items() if not k.startswith(drop)}


__all__ = ["active", "inactive", "learning_rate", "peak_memory", "throughput"]
