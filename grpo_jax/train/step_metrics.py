"""The host-side metrics of one RL step (``docs/metrics.md``): the learning rate, throughput,
step-phase times and peak memory beside the update's own. Every source logs only the metrics of
the features a run uses, so no logged key is a constant by construction.
"""

from __future__ import annotations

import resource
import sys

import jax
import numpy as np

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


def host(e, task, batch, step: int, times: tuple[float, float, float], rollout_s: float) -> dict:
  """The step's host-side metrics: ``time/update_s`` and ``time/step_s`` from ``times`` = (step
  start, update start, update end), throughput, peak memory, ``optim/lr`` and, with a pass-rate
  band, ``data/band_problems``."""
  t0, t1, t2 = times
  out = {
    "time/update_s": t2 - t1,
    "time/step_s": t2 - t0,
    **throughput(batch, rollout_s, t2 - t1),
    **peak_memory(),
    "optim/lr": learning_rate(e, step),
  }
  if e.data.pass_rate_band:
    out["data/band_problems"] = len(task.train_rows)
  return out


__all__ = ["host", "learning_rate", "peak_memory", "throughput"]
