"""The SIGTERM flag of one process (no jax.distributed): set by the signal, seen at the next
step boundary, and the previous handler restored on close."""

import os
import signal

from grpo_jax.train.preemption import PreemptionWatch


class NoSyncPoint:
  def reached_preemption(self, step):
    return False


def test_sigterm_is_seen_at_the_next_step_and_the_old_handler_comes_back():
  before = signal.getsignal(signal.SIGTERM)
  watch = PreemptionWatch()
  try:
    assert not watch.reached(1, NoSyncPoint())
    os.kill(os.getpid(), signal.SIGTERM)  # the process lives on: the handler only sets a flag
    assert watch.reached(2, NoSyncPoint())
  finally:
    watch.close()
  assert signal.getsignal(signal.SIGTERM) is before
