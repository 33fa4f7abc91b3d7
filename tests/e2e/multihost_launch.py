"""The launcher as multi-host tests run it: 2 local processes × 4 CPU devices (gloo collectives
on 127.0.0.1) or 1 process × 8 devices through ``multihost_worker.py``, and the checks that two
run directories hold the same run."""

import json
import pathlib
import subprocess
import sys

import jax
import numpy as np
import orbax.checkpoint as ocp

from grpo_jax.sharding import ports

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKER = [
  sys.executable,
  str(ROOT / "tests/e2e/multihost_worker.py"),
  "--config",
  str(ROOT / "configs/tiny_test.py"),
]
OVERRIDES = [
  "--config.eval.before=false",
  "--config.eval.after=false",
  "--config.logging.tensorboard=false",
  "--config.logging.plot=false",
  "--config.optimizer.warmup_steps=0",
  "--config.optimizer.learning_rate=1e-3",
  "--config.loss.kl_coef=0.05",
  "--config.mesh.fsdp=2",
]
SAME_RUN_KEYS = ("loss/total", "reward/mean", "grad/norm", "adv/abs_mean")


def port() -> int:
  """The coordinator's port: free, and below the ephemeral range, where the suite's other
  processes' connections cannot take it before process 0 binds it."""
  return ports.coordinator_port()


def start_pair(env, workdir, extra, heartbeat=10) -> list[subprocess.Popen]:
  """Both processes of a 2-process job on ``workdir``, started (stdout and stderr piped)."""
  address = f"127.0.0.1:{port()}"
  return [
    subprocess.Popen(
      WORKER
      + [
        "--workdir",
        str(workdir),
        f"--coordinator_address={address}",
        "--num_processes=2",
        f"--process_id={i}",
        f"--heartbeat_timeout={heartbeat}",
      ]
      + OVERRIDES
      + extra,
      env=env(4),
      stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT,
      text=True,
    )
    for i in range(2)
  ]


def run_pair(env, workdir, extra, timeout=900) -> list[str]:
  """A 2-process job run to the end; both must succeed. Returns each process's output. A job
  whose processes wait on each other forever (one skipped a collective) is killed after
  ``timeout`` seconds and fails the test."""
  procs = start_pair(env, workdir, extra)
  try:
    outs = [p.communicate(timeout=timeout)[0] for p in procs]
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()  # SIGKILL: a process stuck in a collective ignores the launcher's SIGTERM
  assert [p.returncode for p in procs] == [0, 0], outs[0][-3000:] + outs[1][-3000:]
  return outs


def run_single(env, workdir, extra) -> str:
  """The same job as one process on 8 devices; returns its output."""
  proc = subprocess.run(
    WORKER + ["--workdir", str(workdir)] + OVERRIDES + extra,
    env=env(8),
    capture_output=True,
    text=True,
    timeout=900,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc.stdout + proc.stderr


def final(workdir):
  """(train state, step) of the run directory's last checkpoint, on this process's device."""
  steps = sorted(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())
  path = workdir / "checkpoints" / str(steps[-1]) / "default"
  ckpt = ocp.StandardCheckpointer()
  # Restore onto this process's first device, whatever topology wrote the checkpoint.
  device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
  meta = ckpt.metadata(path).item_metadata
  target = jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device), meta)
  return ckpt.restore(path, target), steps[-1]


def metrics(workdir) -> list[dict]:
  return [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]


def assert_same_run(a, b, keys=SAME_RUN_KEYS, atol=1e-6) -> None:
  """Run directories ``a`` and ``b`` end at the same step with the same parameters (up to
  ``atol``) and log the same ``keys`` at every step; some update was not zero."""
  (sa, na), (sb, nb) = final(a), final(b)
  assert na == nb
  for x, y in zip(jax.tree.leaves(sa["params"]), jax.tree.leaves(sb["params"])):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=atol)
  ma, mb = metrics(a), metrics(b)
  assert [m["step"] for m in ma] == [m["step"] for m in mb]
  for key in keys:
    np.testing.assert_allclose(
      [m[key] for m in ma], [m[key] for m in mb], rtol=1e-5, atol=1e-7, err_msg=key
    )
  assert any(m["grad/norm"] > 0 for m in ma)


def work(workdir) -> dict:
  """Rows handed to the mesh and completions graded (``multihost_worker.py``), summed over the
  processes and launches that ran on ``workdir``."""
  total = {}
  for path in sorted(workdir.glob("work.*.jsonl")):
    for line in path.read_text().splitlines():
      for key, count in json.loads(line).items():
        total[key] = total.get(key, 0) + count
  return total
