"""A run directory on ``gs://`` (a GCS API server on 127.0.0.1): config, metrics, TensorBoard,
checkpoints, evaluation, plots and presampled previews all in the bucket; a run killed there
resumes from its last checkpoint to the parameters of an uninterrupted local run."""

import json
import pathlib
import signal
import subprocess
import sys
import time

import datasets
import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from etils import epath
from google.cloud import storage

from grpo_jax.train import tb_events
from tests.support.gcs_emulator import BUCKET, patched_environ

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAUNCH = [sys.executable, str(ROOT / "experiments/launch.py")]
LAUNCH += ["--config", str(ROOT / "configs/tiny_test.py")]
STEPS = 6
OVERRIDES = [f"--config.steps={STEPS}", "--config.checkpoint.every=2"]
STRATEGY = [
  "--config.strategy.enabled=true",
  "--config.strategy.num_previews=3",
  "--config.advantage.baseline=subgroup_offset",
  "--config.advantage.offset_coef=-0.5",
  "--config.eval.with_strategy=true",
]
pytestmark = pytest.mark.slow


def _launch(workdir, env, *extra, check=True):
  cmd = [*LAUNCH, "--workdir", str(workdir), *extra]
  proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
  if check:
    assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def _steps(ckpts: str) -> list[int]:
  """The complete checkpoints (on GCS orbax marks each with ``commit_success.txt``), listed
  by google-cloud-storage: no listing cache, so another process's writes show at once."""
  bucket, _, prefix = ckpts.removeprefix("gs://").partition("/")
  names = [b.name for b in storage.Client().list_blobs(bucket, prefix=prefix + "/")]
  parts = [n[len(prefix) + 1 :].split("/") for n in names]
  return sorted(int(p[0]) for p in parts if p[0].isdigit() and p[1:] == ["commit_success.txt"])


def _params(workdir, step: int):
  path = epath.Path(workdir) / "checkpoints" / str(step) / "default"
  return ocp.StandardCheckpointer().restore(path)["params"]


def _metric_steps(workdir) -> list[int]:
  lines = (epath.Path(workdir) / "metrics.jsonl").read_text().splitlines()
  return [json.loads(x)["step"] for x in lines if x.strip()]


def _kill_after_checkpoint(workdir: str, env: dict, step: int) -> None:
  """Starts the run and SIGKILLs it (no clean-up, as a recycled VM) once ``step`` is saved."""
  proc = subprocess.Popen(
    [*LAUNCH, "--workdir", workdir, *OVERRIDES],
    env=env,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
  )
  ckpts = f"{workdir}/checkpoints"
  deadline = time.time() + 300
  try:
    while time.time() < deadline and proc.poll() is None:
      if step in _steps(ckpts):
        break
      time.sleep(0.2)
  finally:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
  assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"


def test_killed_run_on_gcs_resumes_to_the_uninterrupted_parameters(tmp_path, gcs, launcher_env):
  env = dict(launcher_env(), **gcs)
  run = f"gs://{BUCKET}/runs/killed"
  with patched_environ(gcs):
    _kill_after_checkpoint(run, env, 2)
    killed_at = _steps(f"{run}/checkpoints")[-1]
    assert 2 <= killed_at < STEPS
    assert not epath.Path(run, "results.json").exists()

    out = _launch(run, env, *OVERRIDES).stdout
    assert f"resumed from checkpoint at step {killed_at}" in out
    assert _metric_steps(run) == list(range(1, STEPS + 1))  # each step once
    for tag, steps in tb_events.scalars(f"{run}/tb").items():
      assert sorted(steps) == sorted(set(steps)), tag  # events past the checkpoint dropped
    assert tb_events.scalars(f"{run}/tb")["reward/mean"][-1] == STEPS
    names = {p.name for p in epath.Path(run).iterdir()}
    assert {"config.json", "results.json", "samples.jsonl", "eval", "plots"} <= names
    assert json.loads(epath.Path(run, "config.json").read_text())["config"]["steps"] == STEPS
    evals = {p.name for p in epath.Path(run, "eval").iterdir()}
    assert {"countdown_step0.json", f"countdown_step{STEPS}.json", "summary.md"} <= evals
    assert epath.Path(run, "plots/reward_curve.png").read_bytes()[:4] == b"\x89PNG"
    resumed = _params(run, STEPS)
  assert not (pathlib.Path.cwd() / "gs:").exists()  # nothing went to a local 'gs:' folder

  straight = tmp_path / "straight"
  _launch(straight, launcher_env(), *OVERRIDES)
  for a, b in zip(jax.tree.leaves(resumed), jax.tree.leaves(_params(straight, STEPS))):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_presampled_strategy_run_on_gcs(gcs, launcher_env):
  env = dict(launcher_env(), **gcs)
  run = f"gs://{BUCKET}/runs/presampled"
  _launch(run, env, *STRATEGY, "--mode=presample")
  with patched_environ(gcs):
    stored = datasets.load_from_disk(f"{run}/presample/data")
    assert len(stored) == 2 * 8 and all(len(r) == 3 for r in stored["preview_ids"])
    assert not epath.Path(run, "presample/parts").exists()  # merged, parts removed

    out = _launch(run, env, *STRATEGY).stdout
    assert "resumed from checkpoint at step 0" in out
    assert _metric_steps(run) == [1, 2]
    table = json.loads(epath.Path(run, "strategy_previews.json").read_text())
    assert sum(r["rollouts"] for r in table) == 2 * 8 * 4
