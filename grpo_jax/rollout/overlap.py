"""One-step off-policy rollouts (``rollout.off_policy_steps``): step k+1's batch is sampled by
the parameters before step k's update, on a host thread, while that update runs.

With θ_k the parameters at the start of step k:

* ``off_policy_steps = 0``: batch_k ~ π_{θ_k}, drawn before update k (today's loop; the
  :class:`Prefetcher` then calls the rollout in place, in the same order, so a run is the same
  bit for bit);
* ``off_policy_steps = 1``: batch_0 ~ π_{θ_0}; batch_{k+1} ~ π_{θ_k}, drawn while update k turns
  θ_k into θ_{k+1}. Update k+1 then trains on rows one update stale: the loss's old policy is
  still the trainer's (π_old = π_θ, ratio 1 at μ = 1), and ``loss.rollout_correction``
  (``grpo_jax.losses.correction``) weighs the tokens by π_old / π_sampler, which now holds the
  staleness as well as the sampler–trainer numerics. ``rollout/staleness`` logs the gap in
  updates (0 on the first step, 1 after).

The sampler reads a copy of θ_k in the sampling layout (the update donates the state, so the
rollout may not alias its buffers): one more copy of the parameters on the devices.

Resume: a checkpoint of step k+1 is written after update k, while batch_{k+1} (~ θ_k) is drawn.
θ_k is gone from the checkpoint, so the drawn batch is saved beside it
(``prefetch/step<k+1>.p<process>.pkl``) and a resumed run trains on it: the same rows, the same
parameters, as an uninterrupted run. A run resumed without that file (an older checkpoint)
draws its first batch on-policy and logs staleness 0 for it.

Multi-host runs keep ``off_policy_steps = 0``: the rollout's collectives (DAPO's row exchange,
the process share of each round) would interleave with the update's in a different order on
each process, so a multi-process run with ``off_policy_steps = 1`` fails at its start.
"""

from __future__ import annotations

import concurrent.futures
import pickle
import time
from collections.abc import Callable

import jax

from grpo_jax.rundir import names, paths


def prefetch_path(workdir, step: int):
  """This process's batch drawn for ``step``, saved beside the checkpoint of ``step``."""
  return paths.absolute(workdir) / names.PREFETCH / f"step{step}.p{jax.process_index()}.pkl"


class Prefetcher:
  """Hands out each step's batch. ``draw(cursor, key, params) -> (batch, consumed)`` samples a
  batch from data position ``cursor`` with the step's sampling ``key`` and ``params``;
  ``copy(params)`` returns the sampler's own copy of them (not aliasing the donated state)."""

  def __init__(self, draw: Callable, copy: Callable, off_policy_steps: int, workdir):
    self._draw, self._copy = draw, copy
    self.off_policy_steps = off_policy_steps
    self._workdir = workdir
    self._pool = concurrent.futures.ThreadPoolExecutor(1) if off_policy_steps else None
    self._pending = None  # (step, future of (batch, consumed, seconds))

  def _timed(self, cursor: int, key, params):
    t0 = time.time()
    batch, consumed = self._draw(cursor, key, params)
    return batch, consumed, time.time() - t0

  def take(self, step: int, cursor: int, key, params) -> tuple:
    """``(batch, consumed, metrics)`` for ``step``: the batch drawn during the last update, the
    one saved beside a resumed checkpoint, or (on-policy, or nothing drawn yet) drawn now.
    ``metrics``: ``time/rollout_s`` (the sampler's own time), ``time/rollout_wait_s`` (the
    part the step waited for) and ``rollout/staleness`` with overlap on."""
    t0 = time.time()
    stale = 0
    if self._pending is not None:
      at, future = self._pending
      self._pending = None
      if at != step:
        raise RuntimeError(f"the prefetched batch is for step {at}, not {step}")
      batch, consumed, seconds = future.result()
      stale = 1
    elif self.off_policy_steps and prefetch_path(self._workdir, step).exists():
      batch, consumed, seconds = pickle.loads(prefetch_path(self._workdir, step).read_bytes())
      stale = 1
    else:
      batch, consumed, seconds = self._timed(cursor, key, params)
    metrics = {"time/rollout_s": seconds}
    if self.off_policy_steps:
      metrics.update({"time/rollout_wait_s": time.time() - t0, "rollout/staleness": stale})
    return batch, consumed, metrics

  def start(self, step: int, cursor: int, key, params) -> None:
    """Off-policy: begins drawing ``step``'s batch from ``cursor`` with (a copy of) ``params``,
    the parameters before the update about to run. On-policy: nothing."""
    if self._pool is None:
      return
    future = self._pool.submit(self._timed, cursor, key, self._copy(params))
    self._pending = (step, future)

  def wait(self) -> None:
    """Until the batch being drawn (if any) is drawn, e.g. before the task's data change."""
    if self._pending is not None:
      self._pending[1].result()

  def save(self, step: int) -> None:
    """Beside the checkpoint of ``step``: the batch being drawn for it (waits for it)."""
    if self._pending is None:
      return
    at, future = self._pending
    if at != step:
      return
    path = prefetch_path(self._workdir, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    paths.write_bytes(path, pickle.dumps(future.result()))
    for old in path.parent.glob(f"step*.p{jax.process_index()}.pkl"):
      if old.name != path.name:
        old.unlink()

  def close(self) -> None:
    if self._pool is not None:
      self._pool.shutdown(wait=True, cancel_futures=True)


__all__ = ["Prefetcher", "prefetch_path"]
