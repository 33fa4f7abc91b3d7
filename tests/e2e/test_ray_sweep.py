"""``--sweep --launcher=ray`` on a Ray cluster of this machine (a head node on 127.0.0.1 with 2
CPUs, started and stopped by the test): three members of two gang-scheduled processes each, two
members at a time, one process killed mid-member and the member retried from its checkpoint,
equal to the plain sequential sweep of one process per member."""

import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time

import jax
import numpy as np
import pytest

from grpo_jax.runs import ray_sweep
from tests.e2e.multihost_launch import final as _final

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKER = str(ROOT / "tests/e2e/multihost_worker.py")  # the launcher, with a reward that has signal
SWEEP_FILE = textwrap.dedent(f"""
  from grpo_jax.config.files import load_module

  _TINY = load_module({str(ROOT / "configs/tiny_test.py")!r})
  ARGS = _TINY.ARGS

  def get_config(arg=None):
    cfg = _TINY.get_config(arg)
    cfg.steps = 4
    cfg.checkpoint.every = 1
    cfg.eval.before = cfg.eval.after = False
    cfg.logging.tensorboard = cfg.logging.plot = False
    cfg.optimizer.warmup_steps = 0
    cfg.optimizer.learning_rate = 1e-3
    cfg.mesh.fsdp = 2
    return cfg

  def sweep(add):
    for seed, hadw in ((0, False), (0, True), (1, False)):
      add(seed=seed, **{{"hadw.enabled": hadw}})
""")
KILLED = "seed=1,hadw.enabled=false"
RAY = [sys.executable, "-m", "ray.scripts.scripts"]  # the `ray` command of this environment


def test_process_argv_wires_the_coordinator_only_for_gangs():
  base = ["python", "launch.py", "--workdir", "w"]
  assert ray_sweep.process_argv(base, 0, 1, "h:1") == base
  assert ray_sweep.process_argv(base, 1, 2, "10.0.0.1:8476")[-3:] == [
    "--coordinator_address=10.0.0.1:8476",
    "--num_processes=2",
    "--process_id=1",
  ]


def test_ray_launcher_needs_a_sweep(tmp_path):
  cmd = [sys.executable, str(ROOT / "experiments/launch.py"), "--config", "configs/tiny_test.py"]
  proc = subprocess.run(cmd + ["--launcher=ray"], capture_output=True, text=True, cwd=ROOT)
  assert proc.returncode == 2 and "add --sweep" in proc.stderr


def _pids(run_dir: pathlib.Path, rank: int) -> list[int]:
  """Launcher processes of ``run_dir`` with ``--process_id=rank`` (from /proc)."""
  out = []
  for entry in pathlib.Path("/proc").iterdir():
    try:
      argv = (entry / "cmdline").read_bytes().split(b"\0")
    except OSError:
      continue
    args = [a.decode(errors="replace") for a in argv]
    if str(run_dir) in args and f"--process_id={rank}" in args and WORKER in args:
      out.append(int(entry.name))
  return out


def _kill_mid_member(run_dir: pathlib.Path, proc, timeout_s: float = 600) -> None:
  """SIGKILLs process 1 of the member in ``run_dir`` once it has logged two steps."""
  metrics = run_dir / "metrics.jsonl"
  deadline = time.time() + timeout_s
  while time.time() < deadline and proc.poll() is None:
    if metrics.exists() and len(metrics.read_text().splitlines()) >= 2:
      pids = _pids(run_dir, 1)
      if pids:
        for pid in pids:
          os.kill(pid, signal.SIGKILL)
        return
    time.sleep(0.1)
  out = proc.communicate()[0][-4000:] if proc.poll() is not None else ""
  raise AssertionError(f"the member ended before process 1 could be killed\n{out}")


def _overlap(spans) -> int:
  """The most spans open at one instant."""
  events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
  best = now = 0
  for _, d in events:
    now += d
    best = max(best, now)
  return best


# The test's own cluster on 127.0.0.1 needs no token: a stale ~/.ray/auth_token (from a local
# ray.init() on this machine) otherwise fails its clients' connection.
NO_TOKEN = {"RAY_AUTH_MODE": "disabled"}


@pytest.fixture
def ray_cluster(tmp_path, launcher_env):
  """The address of a one-node Ray cluster on 127.0.0.1 (2 CPUs); its workers see 4 CPU
  devices each, as the hosts of a slice see their own chips."""
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  temp = pathlib.Path("/tmp") / f"ray_{port}"  # short: Ray's socket paths have a length limit
  start = [*RAY, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}"]
  start += ["--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats"]
  # The members pass nothing through Ray's object store: keep its shared memory small (its
  # default, 30% of RAM, crowds the suite's other worker).
  start += [f"--object-store-memory={200 * 2**20}"]
  start += [f"--temp-dir={temp}"]
  env = dict(launcher_env(4), RAY_USAGE_STATS_ENABLED="0", **NO_TOKEN)
  subprocess.run(start, env=env, check=True, capture_output=True, timeout=120)
  try:
    yield f"127.0.0.1:{port}"
  finally:
    subprocess.run([*RAY, "stop", "--force"], capture_output=True, timeout=120)
    shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.slow
def test_ray_sweep_two_at_a_time_with_a_killed_process_equals_the_sequential_sweep(
  tmp_path, launcher_env, ray_cluster
):
  spec = tmp_path / "sweep.py"
  spec.write_text(SWEEP_FILE)
  root = tmp_path / "ray"
  cmd = [sys.executable, WORKER, "--config", str(spec), "--sweep", "--workdir", str(root)]
  cmd += ["--launcher=ray", f"--ray_address={ray_cluster}", "--ray_processes=2"]
  cmd += ['--ray_bundle={"CPU": 0.5}']
  cmd += ["--ray_strategy=PACK", f"--ray_script={WORKER}", "--ray_retries=1"]
  # 2 CPUs, bundles of half a CPU, two processes a member: two members fit at once; each
  # process sees 4 devices, a member's 8 like the sequential run's.
  env = dict(launcher_env(4), **NO_TOKEN)
  pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
  proc = subprocess.Popen(cmd, env=env, **pipes)
  _kill_mid_member(root / KILLED, proc)
  out, _ = proc.communicate(timeout=1200)
  assert proc.returncode == 0, out[-4000:]

  summary = json.loads((root / "sweep.json").read_text())
  entries = {e["name"]: e for e in summary["runs"]}
  assert summary["launcher"] == "ray" and len(entries) == 3
  assert all(e["status"] == "done" for e in entries.values())
  assert entries[KILLED]["attempts"] == 2
  assert all(e["attempts"] == 1 for n, e in entries.items() if n != KILLED)
  spans = [s for e in entries.values() for s in e["attempt_spans"]]
  assert _overlap(spans) == 2  # two members ran at once, never more
  logs = root / KILLED / "logs"
  assert "resumed from checkpoint at step" in (logs / "attempt1.process0.log").read_text()
  assert sorted(p.name for p in logs.iterdir()) == [
    f"attempt{a}.process{i}.log" for a in (0, 1) for i in (0, 1)
  ]

  sequential = tmp_path / "sequential"
  seq = [sys.executable, WORKER, "--config", str(spec), "--sweep", "--workdir", str(sequential)]
  done = subprocess.run(seq, env=launcher_env(8), capture_output=True, text=True, timeout=1200)
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
  for name in entries:
    (a, na), (b, nb) = _final(root / name), _final(sequential / name)
    assert na == nb == 4
    for x, y in zip(jax.tree.leaves(a["params"]), jax.tree.leaves(b["params"])):
      np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6)
