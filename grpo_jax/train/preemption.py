"""Preemption: SIGTERM (what a preempted TPU VM gets) ends the run at the next step boundary with
a checkpoint of that step on every host; rerunning on the same workdir resumes from it.

Multi-host, ``jax.distributed`` runs a preemption sync manager that owns SIGTERM and names one
step at which every process stops (orbax ``CheckpointManager.reached_preemption``). Without it
(one process, or the service disabled) a Python handler sets a flag, and the processes agree on
it at each step boundary (``distributed.global_max``), so all stop at the same step.
"""

from __future__ import annotations

import contextlib
import signal
import threading

# The launcher's exit status after a preemption (EX_TEMPFAIL: "try again"); a rerun resumes.
EXIT_CODE = 75


class Preempted(Exception):
  """Raised by the loop once the checkpoint of ``step`` is written."""

  def __init__(self, step: int):
    super().__init__(f"preempted: checkpoint written at step {step}; rerun to resume")
    self.step = step


def _sync_manager_running() -> bool:
  """Whether ``jax.distributed.initialize`` started the preemption sync manager (it then owns
  SIGTERM; a Python handler would replace its notifier)."""
  try:
    from jax._src import distributed as jax_distributed  # noqa: PLC0415 (no public accessor)
  except ImportError:
    return False
  state = getattr(jax_distributed, "global_state", None)
  return getattr(state, "preemption_sync_manager", None) is not None


class PreemptionWatch:
  """``reached(step, ckpt)``: True on every process at the same step once any got SIGTERM."""

  def __init__(self, signals=(signal.SIGTERM,)):
    self.flag = False
    self._previous = {}
    self._use_sync_manager = _sync_manager_running()
    # Python handlers can only be set from the main thread (a notebook's or a worker's other
    # threads train without one).
    if not self._use_sync_manager and threading.current_thread() is threading.main_thread():
      for sig in signals:
        self._previous[sig] = signal.signal(sig, self._handle)

  def _handle(self, signum, frame) -> None:
    self.flag = True

  def reached(self, step: int, ckpt) -> bool:
    import jax  # noqa: PLC0415 (the module stays light: the sweep runner imports it)

    from grpo_jax.sharding import distributed  # noqa: PLC0415

    if self._use_sync_manager:
      return ckpt.reached_preemption(step)
    if jax.process_count() == 1:
      return self.flag
    return bool(distributed.global_max(int(self.flag)))

  @contextlib.contextmanager
  def rollout_failure(self, ckpt, log=print, preempted: bool = False):
    """SIGTERM and a rollout that failed inside (its grader killed with the process, say): the
    run stops as preempted at its last checkpoint, which holds what a resume needs. Any other
    failure is raised as it is. ``preempted``: SIGTERM already agreed on (``reached``)."""
    try:
      yield
    except Exception as error:
      if not (preempted or self.flag):
        raise
      ckpt.wait()
      at = ckpt.latest_step()
      log(f"preempted; the rollout failed ({error!r}): the rerun resumes from step {at}")
      raise Preempted(at) from error

  def close(self) -> None:
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)
    self._previous = {}
