"""End to end through the real launcher: run directory contents, resume after a kill, NaN stop."""

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

from grpo_jax import data
from grpo_jax.config import files as config_file
from grpo_jax.train import modes

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAUNCH = [
  sys.executable,
  str(ROOT / "experiments/launch.py"),
  "--config",
  str(ROOT / "configs/tiny_test.py"),
]


def _final_params(workdir: pathlib.Path) -> dict:
  steps = sorted(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())
  state = ocp.StandardCheckpointer().restore(workdir / "checkpoints" / str(steps[-1]) / "default")
  return state["params"], steps[-1]


@pytest.mark.slow
def test_launcher_two_steps_on_eight_devices(tmp_path, launcher_env):
  proc = subprocess.run(
    LAUNCH + ["--workdir", str(tmp_path)],
    env=launcher_env(),
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "| before RL |" in proc.stdout and "| after RL |" in proc.stdout
  results = json.loads((tmp_path / "results.json").read_text())
  for name in ("before", "after"):
    assert 0.0 <= results[name]["pass@1"] <= results[name]["pass@4"] <= 1.0
  lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert [x["step"] for x in lines] == [1, 2]
  assert all("/" in k for k in lines[0] if k not in ("step", "ppo_kl"))
  assert json.loads((tmp_path / "config.json").read_text())["config"]["steps"] == 2
  assert list((tmp_path / "tb").glob("events.*"))
  assert (tmp_path / "plots" / "reward_curve.png").stat().st_size > 1000
  assert _final_params(tmp_path)[1] == 2


def test_launcher_rejects_misspelt_key(tmp_path, launcher_env):
  proc = subprocess.run(
    LAUNCH + ["--workdir", str(tmp_path), "--config.loss.klcoef=0.1"],
    env=launcher_env(),
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert proc.returncode == 2
  assert "loss.klcoef" in proc.stderr and "loss.kl_coef" in proc.stderr


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_parameters(tmp_path, launcher_env):
  # HA-DW on: its anchor history lives in the checkpointed state, so resuming must restore it.
  # The three runs share compiled programs (``launcher_env``'s cache); none evaluates.
  overrides = [
    "--config.steps=8",
    "--config.checkpoint.every=4",
    "--config.eval.before=false",
    "--config.eval.after=false",
    "--config.hadw.enabled=true",
    "--config.hadw.history=3",
  ]
  killed = tmp_path / "killed"
  proc = subprocess.Popen(
    LAUNCH + ["--workdir", str(killed)] + overrides,
    env=launcher_env(),
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
  )
  metrics = killed / "metrics.jsonl"
  deadline = time.time() + 300
  while time.time() < deadline and proc.poll() is None:
    if metrics.exists() and len(metrics.read_text().splitlines()) >= 5:
      proc.send_signal(signal.SIGKILL)
      break
    time.sleep(0.01)
  proc.wait()
  assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
  _, last = _final_params(killed)
  assert last < 8
  resumed = subprocess.run(
    LAUNCH + ["--workdir", str(killed)] + overrides,
    env=launcher_env(),
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert "resumed from checkpoint" in resumed.stdout
  steps = [json.loads(x)["step"] for x in metrics.read_text().splitlines()]
  assert steps == list(range(1, 9))

  straight = tmp_path / "straight"
  proc = subprocess.run(
    LAUNCH + ["--workdir", str(straight)] + overrides,
    env=launcher_env(),
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  (p_killed, s1), (p_straight, s2) = _final_params(killed), _final_params(straight)
  assert s1 == s2 == 8
  for a, b in zip(jax.tree.leaves(p_killed), jax.tree.leaves(p_straight)):
    np.testing.assert_array_equal(a, b)
  anchors = [
    [json.loads(x)["hadw/anchor"] for x in (d / "metrics.jsonl").read_text().splitlines()]
    for d in (killed, straight)
  ]
  assert anchors[0] == anchors[1]


def test_non_finite_loss_stops_run_without_checkpoint(tmp_path, monkeypatch):
  cfg = config_file.load(str(ROOT / "configs/tiny_test.py"), ["steps=4", "eval.before=false"])
  real_rewards = data.CountdownTask.rewards
  calls = []

  def rewards_nan_at_step_3(self, problems, completions):
    calls.append(1)
    out, metrics = real_rewards(self, problems, completions)
    return (out * np.nan if len(calls) == 3 else out), metrics

  monkeypatch.setattr(data.CountdownTask, "rewards", rewards_nan_at_step_3)
  with pytest.raises(FloatingPointError, match="step 3"):
    modes.train(cfg, tmp_path, log=lambda *_: None)
  saved = sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit())
  assert saved[-1] == 2
  steps = [json.loads(x)["step"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert steps == [1, 2]


@pytest.mark.slow
def test_periodic_eval_and_eval_mode(tmp_path, launcher_env):
  overrides = ["--config.steps=4", "--config.eval.every_steps=2", "--config.checkpoint.every=2"]
  proc = subprocess.run(
    LAUNCH + ["--workdir", str(tmp_path)] + overrides,
    env=launcher_env(),
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  names = sorted(p.name for p in (tmp_path / "eval").glob("countdown_step*.json"))
  assert names == ["countdown_step0.json", "countdown_step2.json", "countdown_step4.json"]
  after = json.loads((tmp_path / "eval" / "countdown_step4.json").read_text())
  assert json.loads((tmp_path / "results.json").read_text())["after"]["pass@1"] == after["pass@1"]
  # --mode=eval on the step-2 checkpoint with other sampling settings: a new file and summary row.
  proc = subprocess.run(
    LAUNCH
    + ["--workdir", str(tmp_path), "--mode=eval", "--step=2", "--config.eval.temperature=0.5"]
    + overrides,
    env=launcher_env(),
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  kept = json.loads((tmp_path / "eval" / "countdown_step2.json").read_text())
  cooler = json.loads((tmp_path / "eval" / "countdown_T0.5_step2.json").read_text())
  assert kept["sampling"]["temperature"] == 1.0 and cooler["sampling"]["temperature"] == 0.5
  summary = (tmp_path / "eval" / "summary.md").read_text()
  assert summary.count("| countdown |") == 3 and summary.count("| countdown_T0.5 | 2 |") == 1
