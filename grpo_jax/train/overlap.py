"""One-step off-policy rollouts (``rollout.off_policy_steps``): step k+1's batch is sampled by
the parameters before step k's update, on a host thread, while that update runs.

With θ_k the parameters at the start of step k:

* ``off_policy_steps = 0``: batch_k ~ π_{θ_k}, drawn before update k (today's loop; the
  :class:`Prefetcher` then calls the rollout in place, in the same order, so a run is the same
  bit for bit);
* ``off_policy_steps = 1``: batch_0 ~ π_{θ_0}; batch_{k+1} ~ π_{θ_k}, drawn while update k turns
  θ_k into θ_{k+1}. Update k+1 then trains on rows one update stale: the loss's old policy is
  still the trainer's (π_old = π_θ, ratio 1 at μ = 1), and ``loss.rollout_correction``
  (``grpo_jax.losses.correction``; ``auto`` resolves to ``token_tis`` here) weighs the tokens
  by π_old / π_sampler, which now holds the staleness as well as the sampler–trainer numerics.
  ``rollout/staleness`` logs the gap in updates (0 on the first step, 1 after).

The sampler reads a copy of θ_k in the sampling layout (the update donates the state, so the
rollout may not alias its buffers): one more copy of the parameters on the devices.

Resume: a checkpoint of step k+1 is written after update k, while batch_{k+1} (~ θ_k) is drawn.
θ_k is gone from the checkpoint, so the drawn batch is saved beside it
(``prefetch/step<k+1>.p<process>.pkl``) and a resumed run trains on it: the same rows, the same
parameters, as an uninterrupted run. The loop waits for that batch before it starts the
checkpoint: a rollout that fails there leaves no checkpoint of step k+1 (the run stops with the
rollout's error; after SIGTERM, with status 75), and the last checkpoint, whose batch file is
kept until a later checkpoint exists, resumes the run. A run resumed without that file (an older
checkpoint) draws its first batch on-policy and logs staleness 0 for it.

Errors: the rollout runs on a daemon thread. After a failed step the loop finishes its pending
checkpoint saves first, then waits at most ``rollout.join_timeout_s`` for a rollout still
drawing (a wedged device never ends it) and stops without it, logged.

Multi-host runs keep ``off_policy_steps = 0``: the rollout's collectives (DAPO's row exchange,
the process share of each round) would interleave with the update's in a different order on
each process, so a multi-process run with ``off_policy_steps = 1`` fails at its start.
"""

from __future__ import annotations

import pickle
import re
import threading
import time
from collections.abc import Callable

import jax

from grpo_jax.rundir import names, paths


def prefetch_path(workdir, step: int):
  """This process's batch drawn for ``step``, saved beside the checkpoint of ``step``."""
  return paths.absolute(workdir) / names.PREFETCH / f"step{step}.p{jax.process_index()}.pkl"


class Drawing:
  """``fn(*args)`` on a daemon thread: the process may exit while it still runs (a wedged
  device), where a thread pool's worker would hold the exit."""

  def __init__(self, fn: Callable, *args):
    self._value, self._error = None, None
    self._thread = threading.Thread(target=self._run, args=(fn, args), name="rollout", daemon=True)
    self._thread.start()

  def _run(self, fn, args) -> None:
    try:
      self._value = fn(*args)
    except BaseException as e:  # noqa: BLE001 (handed to whoever asks for the result)
      self._error = e

  def wait(self, timeout_s: float | None = None) -> bool:
    """Whether it has ended (returned or raised), waiting at most ``timeout_s``."""
    self._thread.join(timeout_s)
    return not self._thread.is_alive()

  def result(self):
    """Its value once it has ended; raises what it raised."""
    self.wait()
    if self._error is not None:
      raise self._error
    return self._value


def _step_of(path) -> int:
  match = re.match(r"step(\d+)\.p\d+\.pkl$", path.name)
  return int(match.group(1)) if match else -1


class Prefetcher:
  """Hands out each step's batch. ``draw(cursor, key, params) -> (batch, consumed)`` samples a
  batch from data position ``cursor`` with the step's sampling ``key`` and ``params``;
  ``copy(params)`` returns the sampler's own copy of them (not aliasing the donated state).
  ``join_timeout_s``: how long :meth:`close` waits for a rollout still drawing."""

  def __init__(
    self,
    draw: Callable,
    copy: Callable,
    off_policy_steps: int,
    workdir,
    join_timeout_s: float = 60.0,
    log=print,
  ):
    self._draw, self._copy = draw, copy
    self.off_policy_steps = off_policy_steps
    self._workdir = workdir
    self.join_timeout_s, self._log = join_timeout_s, log
    self._pending = None  # (step, Drawing of (batch, consumed, seconds))

  def _result(self):
    """The pending batch; a rollout that raised is handed over once (not again at close)."""
    at, drawing = self._pending
    try:
      return drawing.result()
    except BaseException:
      self._pending = None
      raise

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
      at, drawing = self._pending
      self._pending = None
      if at != step:
        raise RuntimeError(f"the prefetched batch is for step {at}, not {step}")
      batch, consumed, seconds = drawing.result()
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
    if not self.off_policy_steps:
      return
    self._pending = (step, Drawing(self._timed, cursor, key, self._copy(params)))

  def wait(self) -> None:
    """Until the batch being drawn (if any) is drawn, e.g. before the task's data change."""
    if self._pending is not None:
      self._result()

  def save(self, step: int, keep_from: int | None = None) -> None:
    """For the checkpoint of ``step``, before it is written: the batch being drawn for it
    (waits for it; raises the rollout's error, and then no checkpoint of ``step`` may be
    written). Removes this process's files of steps before ``keep_from`` (the latest
    checkpoint, whose batch stays until this one's checkpoint exists; None: every other)."""
    if self._pending is None or self._pending[0] != step:
      return
    drawn = self._result()
    path = prefetch_path(self._workdir, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    paths.write_bytes(path, pickle.dumps(drawn))
    keep_from = step if keep_from is None else keep_from
    for old in path.parent.glob(f"step*.p{jax.process_index()}.pkl"):
      if _step_of(old) < keep_from and old.name != path.name:
        old.unlink()

  def close(self) -> None:
    """Waits at most ``join_timeout_s`` for a batch still being drawn (after a failed step;
    nothing is pending after the last), then goes on without it, logged: a rollout that does
    not end (a wedged device) is left to its daemon thread."""
    if self._pending is None:
      return
    at, drawing = self._pending
    self._pending = None
    if not drawing.wait(self.join_timeout_s):
      self._log(
        f"the rollout drawing step {at}'s batch has not ended after {self.join_timeout_s:g} s "
        "(rollout.join_timeout_s); stopping without it"
      )
      return
    try:
      drawing.result()
    except Exception as e:  # noqa: BLE001 (the step's own error is the run's)
      self._log(f"the rollout drawing step {at}'s batch failed too: {type(e).__name__}: {e}")


__all__ = ["Drawing", "Prefetcher", "prefetch_path"]
