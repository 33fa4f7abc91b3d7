"""A test process's memory maps, kept well under the kernel's limit.

Every XLA:CPU program a process loads (compiled or read back from the compilation cache) holds
three to six memory maps (its code, read-only data and writable sections) until jax drops it, and
jax keeps the programs of every function still alive. An xdist worker runs about 800 tests that
load thousands of programs: one reached 65,504 maps, at Linux's ``vm.max_map_count`` (65,530 by
default). There the next load's ``mmap`` fails, and jaxlib 0.10's error path segfaults inside
libgcc's unwinder while it throws the error (docs/results/2026-12-06_map_limit.md has the trace
and a reproducer). The suite's fixture in ``conftest.py`` calls :func:`release_if_crowded` after
each test file.
"""

from __future__ import annotations

import gc
import pathlib

MAPS = pathlib.Path("/proc/self/maps")
LIMIT = pathlib.Path("/proc/sys/vm/max_map_count")
SHARE = 0.25  # drop the programs once a process holds a quarter of the limit


def count() -> int:
  """The memory maps this process holds (lines of /proc/self/maps; 0 where /proc is absent)."""
  if not MAPS.exists():
    return 0
  with MAPS.open("rb") as f:
    return sum(1 for _ in f)


def limit() -> int:
  return int(LIMIT.read_text())


def release_if_crowded(share: float = SHARE) -> bool:
  """Drops jax's compiled programs (``jax.clear_caches``) when this process holds ``share`` of
  the kernel's map limit or more; the next call of a dropped program loads it again from the
  persistent compilation cache. Returns whether it dropped them (False where /proc is absent)."""
  if not LIMIT.exists() or count() < share * limit():
    return False
  import jax  # noqa: PLC0415 (cpu_log.py counts maps without it)

  jax.clear_caches()
  gc.collect()
  return True
