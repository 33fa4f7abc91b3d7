"""Which profile the band reads, the pool a profile covers, the band applied to a task, and the
warm start's ``supervise`` key reaching its loss."""

import json
import pathlib
import types

import pytest

from grpo_jax.config import files as config_file
from grpo_jax.train import profile

ROOT = pathlib.Path(__file__).resolve().parents[2]
MATH = ["data.task=math", "data.train_set=arithmetic", "warmstart.enabled=False"]


def _cfg(*overrides):
  return config_file.load(str(ROOT / "configs/tiny_test.py"), [*MATH, *overrides])


def _write(path: pathlib.Path, rates: dict) -> None:
  path.parent.mkdir(parents=True, exist_ok=True)
  rows = [{"id": k, "n": 4, "correct": int(4 * p), "pass_rate": p} for k, p in rates.items()]
  path.write_text("".join(json.dumps(r) + "\n" for r in rows))


class _Task:
  def __init__(self, ids):
    self.train_pool = [{"id": i} for i in ids]
    self.train_rows = self.train_pool

  def restrict_train(self, ids):
    self.train_rows = [r for r in self.train_pool if r["id"] in set(ids)]


def test_band_source_follows_pass_rate_file_and_reprofiles(tmp_path):
  band = "data.pass_rate_band=(0.25, 0.75)"
  assert profile.band_source(_cfg(band), tmp_path, 7) == profile.profile_path(tmp_path)
  own = tmp_path / "elsewhere.jsonl"
  assert str(profile.band_source(_cfg(band, f"data.pass_rate_file={own}"), tmp_path, 7)) == str(own)
  curriculum = _cfg(band, "data.reprofile_every=3")
  _write(profile.profile_path(tmp_path, 3), {"a": 0.5})
  assert profile.band_source(curriculum, tmp_path, 2) == profile.profile_path(tmp_path)
  assert profile.band_source(curriculum, tmp_path, 5) == profile.profile_path(tmp_path, 3)
  _write(profile.profile_path(tmp_path, 6), {"a": 0.5})
  assert profile.band_source(curriculum, tmp_path, 8) == profile.profile_path(tmp_path, 6)


def test_apply_band_restricts_the_stream_and_counts(tmp_path):
  source = profile.profile_path(tmp_path)
  _write(source, {"a": 0.0, "b": 0.25, "c": 0.5, "d": 1.0})
  task = _Task("abcde")
  out = profile.apply_band(_cfg("data.pass_rate_band=(0.25, 0.75)"), task, source, log=print)
  assert [r["id"] for r in task.train_rows] == ["b", "c"]
  assert out["counts"]["all"] == {"kept": 2, "below": 1, "above": 1, "dropped": 2}
  wider = profile.apply_band(_cfg("data.pass_rate_band=(0.0, 0.75)"), task, source, log=print)
  assert [r["id"] for r in task.train_rows] == ["a", "b", "c"] and wider["band"] == [0.0, 0.75]
  with pytest.raises(ValueError, match="no profiled problem"):
    profile.apply_band(_cfg("data.pass_rate_band=(0.6, 0.9)"), task, source, log=print)
  with pytest.raises(FileNotFoundError, match="--mode=profile"):
    profile.apply_band(_cfg("data.pass_rate_band=(0.1, 0.9)"), task, tmp_path / "x", log=print)


def test_pool_is_the_first_num_problems():
  task = _Task("abcde")
  assert [r["id"] for r in profile.pool(_cfg("profile.num_problems=3"), task)] == list("abc")
  assert len(profile.pool(_cfg("profile.num_problems=0"), task)) == 5
  with pytest.raises(ValueError, match="no fixed training pool"):
    profile.pool(_cfg(), types.SimpleNamespace())


def test_supervise_format_changes_the_warm_start_loss():
  from grpo_jax.train.run import setup
  from grpo_jax.train.warmstart import warm_start

  losses = {}
  for supervise in ("all", "format"):
    cfg = config_file.load(
      str(ROOT / "configs/tiny_test.py"),
      [
        f"warmstart.supervise={supervise}",
        "warmstart.max_steps=1",
        "warmstart.check_every=1",
        "warmstart.check_problems=2",
        "logging.progress=False",
      ],
    )
    s = setup(cfg, log=lambda *a: None)
    _, history = warm_start(s.graphdef, s.params, s.task, cfg, s.mesh, log=lambda *a: None)
    losses[supervise] = history[0]["loss"]
  # Countdown answers ("*-;8*9-3") have no line break: format keeps the operators, not digits.
  assert losses["all"] != pytest.approx(losses["format"], rel=1e-3), losses
