"""How fast the machine runs now, printed beside the suite's time (``conftest.py``): a virtual
machine's speed varies by up to 2× from one hour to the next, and the suite's time with it."""

import pathlib
import time

import numpy as np


def matmul_gflops(n: int = 1024, repeats: int = 7) -> float:
  """GFLOP/s of the fastest of ``repeats`` float32 n × n matmuls in numpy (every core), after
  one untimed."""
  a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
  a @ a  # the BLAS threads start
  return 2 * n**3 / _fastest(lambda: a @ a, repeats) / 1e9


def python_rate(n: int = 1_000_000, repeats: int = 3) -> float:
  """Millions of pure-Python loop iterations a second, the fastest of ``repeats`` loops of ``n``
  (one core): the speed of tracing, dispatch and the other single-threaded work, which a slow
  host can slow more than the matmul."""

  def loop():
    total = 0
    for i in range(n):
      total += i

  return n / _fastest(loop, repeats) / 1e6


def _fastest(fn, repeats: int) -> float:
  """Seconds of the fastest of ``repeats`` calls of ``fn``."""
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    best = min(best, time.perf_counter() - start)
  return best


def cpu_times(stat: str | None = None) -> tuple[int, int]:
  """(steal, total) clock ticks since boot from the ``cpu`` line of ``/proc/stat`` (or the text
  ``stat``); (0, 0) where there is none. Steal is the time a virtual machine's CPUs were ready
  to run while the host ran something else."""
  try:
    stat = pathlib.Path("/proc/stat").read_text() if stat is None else stat
    ticks = [int(x) for x in stat.splitlines()[0].split()[1:9]]
  except (OSError, ValueError, IndexError):
    return 0, 0
  return (ticks[7] if len(ticks) > 7 else 0), sum(ticks)
