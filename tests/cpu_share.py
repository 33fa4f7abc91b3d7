"""Each xdist worker on its own share of the machine's cores.

Unpinned, the two workers of ``pytest -n 2`` on 2 cores and the processes they start wander
between the cores, and each XLA:CPU client sizes its thread pool to both: every program's threads
contend with the other worker's. Pinned, each worker, and every launcher run, multi-host worker
and benchmark script it starts (children inherit the affinity), runs on its own cores, and XLA
sizes its pool to them. The same tests took 6.5% less CPU time and 7.5% less wall time
(docs/results/2026-12-06_worker_pinning.md). ``GRPO_SUITE_PIN=0`` leaves the workers unpinned.
"""

from __future__ import annotations

import os
import sys

EVERY = "GRPO_SUITE_CORES"  # the cores a pinned worker started with


def share(cpus: list[int], index: int, count: int) -> list[int]:
  """Worker ``index`` of ``count``'s contiguous slice of ``cpus``, the slices as even as they
  divide; all of ``cpus`` when there are more workers than cores (oversubscribed by choice)."""
  n = len(cpus)
  if count > n:
    return list(cpus)
  return cpus[index * n // count : (index + 1) * n // count]


def pin_worker(environ=os.environ) -> list[int] | None:
  """Pins this process to its worker's share (before jax makes its CPU client); returns the
  cores, or None outside an xdist worker, off Linux or with ``GRPO_SUITE_PIN=0``."""
  worker = environ.get("PYTEST_XDIST_WORKER", "")
  off = environ.get("GRPO_SUITE_PIN", "1") == "0"
  if not worker or off or not hasattr(os, "sched_setaffinity"):
    return None
  count = int(environ["PYTEST_XDIST_WORKER_COUNT"])
  every = sorted(os.sched_getaffinity(0))
  cpus = share(every, int(worker.removeprefix("gw")), count)
  environ[EVERY] = ",".join(map(str, every))  # for unpinned(), here and in children
  os.sched_setaffinity(0, cpus)
  return cpus


def unpinned(argv: list[str]) -> list[str]:
  """``argv`` run with every core its worker started with, for processes that mostly wait, as a
  Ray cluster's, whose waits would otherwise leave their core idle while the other worker's
  processes queue on theirs (docs/results/2026-12-06_worker_pinning.md). A Python prefix sets the
  affinity and execs ``argv``: a ``preexec_fn`` would fork the multithreaded test process."""
  cores = os.environ.get(EVERY)
  if not cores or not hasattr(os, "sched_setaffinity"):
    return list(argv)
  code = "import os, sys; os.sched_setaffinity(0, {%s}); os.execv(sys.argv[1], sys.argv[1:])"
  return [sys.executable, "-c", code % cores, *argv]
