"""SIGTERM (a preempted VM) checkpoints the current step and exits with the documented status;
the rerun ends with the same parameters as an uninterrupted run."""

import json
import pathlib
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from grpo_jax.train.preemption import EXIT_CODE

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAUNCH = [
  sys.executable,
  str(ROOT / "experiments/launch.py"),
  "--config",
  str(ROOT / "configs/tiny_test.py"),
]
# No periodic checkpoint before the last step: a checkpoint at the stopped step is the
# preemption's own.
OVERRIDES = [
  "--config.steps=8",
  "--config.checkpoint.every=100",
  "--config.eval.before=false",
  "--config.eval.after=false",
  "--config.logging.plot=false",
]


def _steps(workdir: pathlib.Path) -> list[int]:
  return sorted(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())


def _params(workdir: pathlib.Path, step: int):
  return ocp.StandardCheckpointer().restore(workdir / "checkpoints" / str(step) / "default")[
    "params"
  ]


def _metric_steps(workdir: pathlib.Path) -> list[int]:
  lines = (workdir / "metrics.jsonl").read_text().splitlines()
  return [json.loads(x)["step"] for x in lines if x.strip()]


def _launch(workdir: pathlib.Path, env: dict) -> subprocess.CompletedProcess:
  """The launcher on ``workdir`` to the end, its output captured."""
  cmd = LAUNCH + ["--workdir", str(workdir)] + OVERRIDES
  return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_sigterm_checkpoints_the_current_step_and_resumes_bit_exact(tmp_path, launcher_env):
  run = tmp_path / "preempted"
  proc = subprocess.Popen(
    LAUNCH + ["--workdir", str(run)] + OVERRIDES,
    env=launcher_env(),
    stdout=subprocess.PIPE,
    stderr=subprocess.DEVNULL,
    text=True,
  )
  metrics = run / "metrics.jsonl"
  deadline = time.time() + 300
  while time.time() < deadline and proc.poll() is None:
    if metrics.exists() and metrics.read_text().strip():  # a step has finished
      proc.send_signal(signal.SIGTERM)
      break
    time.sleep(0.01)
  out, _ = proc.communicate(timeout=300)
  assert proc.returncode == EXIT_CODE, out[-3000:]
  assert "preempted" in out
  stopped = _metric_steps(run)[-1]
  assert 1 <= stopped < 8, "the run ended before it could be preempted"
  assert _steps(run) == [0, stopped]  # the checkpoint of the step it stopped at
  assert not (run / "results.json").exists()

  resumed = _launch(run, launcher_env())
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"resumed from checkpoint at step {stopped}" in resumed.stdout
  assert _metric_steps(run) == list(range(1, 9))

  straight = tmp_path / "straight"
  proc = _launch(straight, launcher_env())
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert _steps(run)[-1] == _steps(straight)[-1] == 8
  for a, b in zip(jax.tree.leaves(_params(run, 8)), jax.tree.leaves(_params(straight, 8))):
    np.testing.assert_array_equal(a, b)
