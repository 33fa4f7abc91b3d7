"""``cpu_share``: each xdist worker's slice of the cores, and the pin the suite's workers run
under."""

import os
import subprocess
import sys

import cpu_share
import pytest


@pytest.mark.parametrize(
  ("cpus", "count", "shares"),
  [
    ([0, 1], 2, [[0], [1]]),
    ([0, 1, 2], 2, [[0], [1, 2]]),
    ([2, 3, 6, 7], 2, [[2, 3], [6, 7]]),
    ([0, 1, 2, 3, 4, 5, 6, 7], 3, [[0, 1], [2, 3, 4], [5, 6, 7]]),
    ([0, 1], 3, [[0, 1], [0, 1], [0, 1]]),  # more workers than cores: each keeps all
  ],
)
def test_shares_are_contiguous_even_and_cover_every_core(cpus, count, shares):
  assert [cpu_share.share(cpus, i, count) for i in range(count)] == shares


def test_no_pin_outside_a_worker_or_when_switched_off():
  assert cpu_share.pin_worker({}) is None
  worker = {"PYTEST_XDIST_WORKER": "gw0", "PYTEST_XDIST_WORKER_COUNT": "1"}
  assert cpu_share.pin_worker({**worker, "GRPO_SUITE_PIN": "0"}) is None


@pytest.mark.skipif(
  not os.environ.get("PYTEST_XDIST_WORKER") or not hasattr(os, "sched_getaffinity"),
  reason="an xdist worker on Linux",
)
def test_this_worker_runs_on_its_share_of_the_controller_s_cores():
  """The controller (this worker's parent) keeps every core; this worker holds its slice."""
  if os.environ.get("GRPO_SUITE_PIN") == "0":
    pytest.skip("GRPO_SUITE_PIN=0")
  every = sorted(os.sched_getaffinity(os.getppid()))
  index = int(os.environ["PYTEST_XDIST_WORKER"].removeprefix("gw"))
  count = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
  assert sorted(os.sched_getaffinity(0)) == cpu_share.share(every, index, count)


@pytest.mark.skipif(
  not os.environ.get(cpu_share.EVERY) or not hasattr(os, "sched_getaffinity"),
  reason="a pinned xdist worker on Linux",
)
def test_children_inherit_the_pin_and_unpinned_gives_back_every_core():
  argv = [
    sys.executable,
    "-c",
    "import os, sys; print(sorted(os.sched_getaffinity(0)), sys.argv[1])",
  ]
  pinned = subprocess.run([*argv, "x"], capture_output=True, text=True, check=True)
  unpinned = subprocess.run(
    cpu_share.unpinned([*argv, "y"]), capture_output=True, text=True, check=True
  )
  assert pinned.stdout.strip() == f"{sorted(os.sched_getaffinity(0))} x"
  every = sorted(int(c) for c in os.environ[cpu_share.EVERY].split(","))
  assert every == sorted(os.sched_getaffinity(os.getppid()))
  assert unpinned.stdout.strip() == f"{every} y"  # the argv runs as given
