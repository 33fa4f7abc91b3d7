"""Weights & Biases tracking (logging.wandb): what reaches the run, through a stand-in module
(calls recorded) and through the real package in offline mode (files read back)."""

import json
import pathlib
import sys
import types

import pytest

from grpo_jax.config import files as config_file
from grpo_jax.rundir import names
from grpo_jax.train.metrics import MetricsWriter
from grpo_jax.train.wandb_tracker import WandbTracker

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY = str(ROOT / "configs/tiny_test.py")
RECORD = {
  "prompt": "Use 3, 5 to make 8",
  "completion": "3 + 5 = 8",
  "answer": "3 + 5",
  "reward": 1.0,
  "accuracy": 1.0,
  "group": 0,
  "subgroup": 0,
  "truncated": False,
}


class FakeWandb(types.ModuleType):
  """Records init's arguments and every logged row."""

  def __init__(self):
    super().__init__("wandb")
    self.inits, self.rows, self.finished = [], [], 0
    fake = self

    class Run:
      def log(self, row, step):
        fake.rows.append((step, row))

      def finish(self):
        fake.finished += 1

    class Table:
      def __init__(self, columns, data):
        self.columns, self.data = columns, data

    self.Table = Table
    self._run = Run

  def init(self, **kwargs):
    self.inits.append(kwargs)
    return self._run()


def _cfg(*overrides):
  return config_file.load(TINY, ["logging.wandb=true", "logging.wandb_mode=offline", *overrides])


def test_metrics_eval_config_and_samples_reach_the_run(tmp_path):
  fake = FakeWandb()
  cfg = _cfg("logging.wandb_project=proj", "logging.wandb_entity=team")
  tracker = WandbTracker(cfg, tmp_path, module=fake)
  writer = MetricsWriter(tmp_path, tensorboard=False, tracker=tracker)
  writer.write(1, {"loss/total": 0.25, "reward/mean": 0.5})
  writer.write_samples(1, [RECORD])
  writer.write_eval(2, {"countdown": {"pass@1": 0.5, "pass@4": 0.75, "pass@1_ci": [0.1, 0.9]}})
  writer.close()
  tracker.close()

  (init,) = fake.inits
  assert init["project"] == "proj" and init["entity"] == "team" and init["mode"] == "offline"
  assert init["config"] == cfg.to_dict() and init["config"]["logging"]["wandb"] is True
  assert init["dir"] == str(tmp_path) and init["resume"] == "allow"
  (s1, metrics), (s2, samples), (s3, evals) = fake.rows
  assert (s1, metrics) == (1, {"loss/total": 0.25, "reward/mean": 0.5})
  assert s2 == 1 and samples["samples"].data[0][:2] == [RECORD["prompt"], RECORD["completion"]]
  assert (s3, evals) == (2, {"eval/countdown/pass@1": 0.5, "eval/countdown/pass@4": 0.75})
  assert fake.finished == 1


def test_a_resumed_run_continues_the_same_wandb_run(tmp_path):
  fake = FakeWandb()
  WandbTracker(_cfg(), tmp_path, module=fake)
  WandbTracker(_cfg(), tmp_path, module=fake)
  assert (
    fake.inits[0]["id"] == fake.inits[1]["id"] == (tmp_path / names.WANDB_ID).read_text().strip()
  )


def test_invalid_mode_fails_at_load_naming_the_choices():
  with pytest.raises(ValueError, match="logging.wandb_mode") as e:
    _cfg("logging.wandb_mode=cloud")
  assert "offline" in str(e.value) and "online" in str(e.value) and "disabled" in str(e.value)


def test_real_wandb_offline_writes_the_sampled_completions(tmp_path, monkeypatch):
  pytest.importorskip("wandb")
  monkeypatch.setenv("WANDB_MODE", "offline")
  monkeypatch.setenv("WANDB_DIR", str(tmp_path))
  monkeypatch.setenv("WANDB_SILENT", "true")
  tracker = WandbTracker(_cfg(), tmp_path)
  tracker.log(1, {"loss/total": 0.25})
  tracker.log_samples(1, [RECORD])
  tracker.close()
  (run_dir,) = (tmp_path / "wandb").glob("offline-run-*")
  assert run_dir.name.endswith((tmp_path / names.WANDB_ID).read_text().strip())
  (table,) = (run_dir / "files/media/table").glob("samples_1_*.table.json")
  got = json.loads(table.read_text())
  assert got["columns"][:2] == ["prompt", "completion"]
  assert got["data"][0][:2] == [RECORD["prompt"], RECORD["completion"]]


@pytest.mark.slow
def test_training_logs_steps_eval_and_samples(tmp_path, monkeypatch):
  from grpo_jax.train import modes

  fake = FakeWandb()
  monkeypatch.setitem(sys.modules, "wandb", fake)
  modes.train(_cfg("logging.plot=false"), tmp_path, log=lambda *_: None)
  steps = {}
  for step, row in fake.rows:
    steps.setdefault(step, set()).update(row)
  assert sorted(steps) == [0, 1, 2]
  assert {"eval/countdown/pass@1", "eval/countdown/pass@4"} <= steps[0] & steps[2]
  assert {"loss/total", "reward/mean", "samples"} <= steps[1] & steps[2]
  assert fake.finished == 1
