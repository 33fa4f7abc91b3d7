"""Where the suite's CPU time goes: ``python -m pytest -n 2 --cpu-log=PATH``.

The suite is CPU-bound on 2 cores, so its wall time follows the CPU time its tests use, in the
test process and in the processes it starts. With ``--cpu-log``, each test appends one JSON line
to ``PATH`` (every xdist worker to the same file, which the run truncates first):

  {"test": node id, "cpu_s": user + system CPU of the process that ran it,
   "children_cpu_s": that of the child processes it waited for, "wall_s": its wall time,
   "maps": the memory maps its process holds after it (tests/xla_maps.py; 0 without /proc),
   "worker": the xdist worker that ran it ("" without xdist)}

Children are the launcher runs, multi-host workers and benchmark scripts a test runs through
``subprocess``; processes it does not wait for (a Ray cluster's daemons and the workers they
start) are not counted. The run ends with the CPU time summed per test file.
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import resource
import time

import pytest
import xla_maps

SHOWN_FILES = 25


def pytest_addoption(parser):
  parser.addoption(
    "--cpu-log",
    default="",
    metavar="PATH",
    help="append each test's CPU time (its process and the children it waited for) to PATH",
  )


def _cpu_s() -> tuple[float, float]:
  """(this process's, its waited-for children's) user + system CPU seconds."""
  me = resource.getrusage(resource.RUSAGE_SELF)
  children = resource.getrusage(resource.RUSAGE_CHILDREN)
  return me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime


def pytest_sessionstart(session):
  path = session.config.getoption("cpu_log")
  if path and not hasattr(session.config, "workerinput"):  # xdist's controller, first
    pathlib.Path(path).write_text("")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
  path = item.config.getoption("cpu_log")
  if not path:
    yield
    return
  (own, children), start = _cpu_s(), time.perf_counter()
  yield  # set-up, call and tear-down: a fixture's cost lands on the first test that needs it
  own_end, children_end = _cpu_s()
  row = {
    "test": item.nodeid,
    "cpu_s": round(own_end - own, 3),
    "children_cpu_s": round(children_end - children, 3),
    "wall_s": round(time.perf_counter() - start, 3),
    "maps": xla_maps.count(),
    "worker": os.environ.get("PYTEST_XDIST_WORKER", ""),
  }
  with open(path, "a") as f:  # one short appended line per write: workers do not interleave
    f.write(json.dumps(row) + "\n")


def per_file(rows: list[dict]) -> list[tuple[str, int, float, float]]:
  """(test file, tests, own CPU s, children's CPU s), the most CPU first."""
  sums = collections.defaultdict(lambda: [0, 0.0, 0.0])
  for row in rows:
    entry = sums[row["test"].split("::")[0]]
    entry[0] += 1
    entry[1] += row["cpu_s"]
    entry[2] += row["children_cpu_s"]
  files = [(name, n, own, kids) for name, (n, own, kids) in sums.items()]
  return sorted(files, key=lambda f: -(f[2] + f[3]))


def pytest_terminal_summary(terminalreporter, config):
  path = config.getoption("cpu_log")
  if not path or hasattr(config, "workerinput") or not os.path.exists(path):
    return
  rows = [json.loads(line) for line in pathlib.Path(path).read_text().splitlines() if line]
  own = sum(r["cpu_s"] for r in rows)
  children = sum(r["children_cpu_s"] for r in rows)
  terminalreporter.write_sep("=", f"CPU time per test file ({path})")
  terminalreporter.write_line(
    f"{len(rows)} tests: {own + children:.0f} s of CPU, {own:.0f} s in the test processes and "
    f"{children:.0f} s in the children they waited for"
  )
  for name, n, own_s, children_s in per_file(rows)[:SHOWN_FILES]:
    terminalreporter.write_line(
      f"{own_s + children_s:8.1f} s  ({own_s:6.1f} + {children_s:6.1f})  {n:4d}  {name}"
    )
