"""Multi-host through the real launcher: 2 local processes × 4 CPU devices (gloo collectives on
127.0.0.1) give the same run as 1 process × 8 devices; killing one process makes the other fail
(no hang) and rerunning both resumes from the checkpoint to the same parameters."""

import json
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from tests.e2e.multihost_launch import (
  assert_same_run,
  final,
  port,
  run_pair,
  run_single,
  start_pair,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_two_processes_match_one_and_resume_after_a_kill(tmp_path, launcher_env):
  extra = ["--config.steps=6", "--config.checkpoint.every=2"]
  single = tmp_path / "single"
  run_single(launcher_env, single, extra)

  # 1. Two processes × four devices, process 1 killed mid-run: process 0 must exit with an
  # error, not hang.
  killed = tmp_path / "killed"
  procs = start_pair(launcher_env, killed, extra)
  deadline = time.time() + 600
  while time.time() < deadline and procs[1].poll() is None:
    metrics = killed / "metrics.jsonl"
    if metrics.exists() and len(metrics.read_text().splitlines()) >= 3:
      procs[1].send_signal(signal.SIGKILL)
      break
    time.sleep(0.05)
  procs[1].wait()
  assert procs[1].returncode == -signal.SIGKILL, "the run ended before it could be killed"
  t_kill = time.time()
  procs[0].communicate(timeout=300)
  assert procs[0].returncode != 0
  assert time.time() - t_kill < 240
  _, last = final(killed)
  assert last < 6

  # 2. Rerun both: they resume from the checkpoint and give the one-process run at every step,
  # as an uninterrupted pair does (the pair's own equality is also checked on its steps before
  # the kill: the metrics of steps 1-2 are the first run's, kept by the resume).
  outs = run_pair(launcher_env, killed, extra)
  assert "resumed from checkpoint" in outs[0]
  assert_same_run(single, killed)
  assert not (killed / "metrics.jsonl.1").exists()  # one writer


@pytest.mark.slow
def test_two_processes_reduce_micro_batch_gradients_once(tmp_path, launcher_env):
  """Replicated parameters (fsdp = 1: every device on data) and 16-row micro-batches: each
  device accumulates its own parts under ``microbatch.reduce_once``, whose one all-reduce spans
  both processes; the run equals one process × eight devices."""
  extra = ["--config.steps=2", "--config.mesh.fsdp=1", "--config.loss.micro_batch_size=16"]
  single, pair = tmp_path / "single", tmp_path / "pair"
  run_single(launcher_env, single, extra)
  run_pair(launcher_env, pair, extra)
  assert_same_run(single, pair)
  config = json.loads((pair / "config.json").read_text())
  assert (
    config["config"]["mesh"]["fsdp"] == 1 and config["config"]["loss"]["micro_batch_size"] == 16
  )


# Each process's rows end at slot 3 (process 0) or 9 (process 1) of T = 16.
WIDTH_WORKER = """
import sys
import numpy as np
from grpo_jax.sharding import distributed
from grpo_jax.rollout.batch import RolloutBatch
from grpo_jax.train.length_buckets import LengthAwareUpdate

pid, address = int(sys.argv[1]), sys.argv[2]
distributed.initialize(address, 2, pid, heartbeat_timeout_seconds=10)
N, P, T = 4, 2, 16
mask_NxT = (np.arange(T)[None] < (3 if pid == 0 else 9)).repeat(N, 0).astype(np.int32)
zeros = np.zeros(N, np.int32)
batch = RolloutBatch(
  np.zeros((N, P + T), np.int32), np.ones((N, P + T), np.int32), mask_NxT,
  np.zeros((N, T), np.float32), np.zeros(N, np.float32), zeros, zeros, zeros, mask_NxT.sum(1),
)
print("width", *LengthAwareUpdate(None, None, 4).width(batch))
"""


def test_processes_agree_on_the_update_width(launcher_env):
  """Process 0's own rows fit width 4 of (2, 4, 8, 16), process 1's need 16: both cut to 16
  (the longest completion over every process), so both run the same compiled update."""
  address = f"127.0.0.1:{port()}"
  procs = [
    subprocess.Popen(
      [sys.executable, "-c", WIDTH_WORKER, str(i), address],
      env=launcher_env(1),
      cwd=ROOT,
      stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT,
      text=True,
    )
    for i in range(2)
  ]
  outs = [p.communicate(timeout=300)[0] for p in procs]
  assert [p.returncode for p in procs] == [0, 0], outs[0][-2000:] + outs[1][-2000:]
  for out in outs:
    assert "width 16 16" in out.splitlines(), out[-2000:]
