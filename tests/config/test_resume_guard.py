"""The resume guard (a workdir resumes only under its own config) and config.json's provenance.

``train`` is stopped right after it writes config.json (``run_lib.setup`` replaced), so these run
in a second without training anything."""

import json
import pathlib
import subprocess

import jax
import pytest

from grpo_jax.config import files as config_file
from grpo_jax.config import provenance, resume
from grpo_jax.train import modes
from grpo_jax.train import run as run_lib

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY = str(ROOT / "configs/tiny_test.py")


class _Stop(Exception):
  pass


@pytest.fixture
def stop_after_config(monkeypatch):
  def setup(*a, **k):
    raise _Stop

  monkeypatch.setattr(run_lib, "setup", setup)


def _start(workdir, overrides=(), **kw):
  """train() up to config.json; returns it."""
  with pytest.raises(_Stop):
    modes.train(config_file.load(TINY, list(overrides)), workdir, log=lambda *a: None, **kw)
  return json.loads((workdir / "config.json").read_text())


def _fake_checkpoint(workdir):
  (workdir / "checkpoints" / "3").mkdir(parents=True)


def test_resumable_keys_come_from_the_declarations():
  # Declared on the fields (spec(resumable=True)) and groups (RESUMABLE = True).
  assert set(resume.RESUMABLE) == {
    "steps", "checkpoint.*", "eval.every_steps", "eval.before", "eval.after", "logging.*",
    "data.reward_workers", "rollout.join_timeout_s",
  }  # fmt: skip
  assert resume.resumable("checkpoint.keep") and resume.resumable("logging.wandb_mode")
  assert not resume.resumable("eval.num_samples") and not resume.resumable("seed")


def test_changed_keys_name_old_and_new_and_skip_resumable_ones():
  old = {"steps": 3, "loss": {"kind": "grpo"}, "advantage": {"offset_coef": -0.5}}
  new = {"steps": 9, "loss": {"kind": "gspo"}, "advantage": {"offset_coef": 0.9}}
  changes = resume.changed_keys(old, new)
  assert changes == {"advantage.offset_coef": (-0.5, 0.9), "loss.kind": ("grpo", "gspo")}
  assert "loss.kind: 'grpo' → 'gspo'" in resume.format_changes(changes)
  # A key the old run lacks counts as unchanged only when it takes its default.
  assert resume.changed_keys({}, {"a": 1}, defaults={"a": 1}) == {}
  assert resume.changed_keys({}, {"a": 2}, defaults={"a": 1}) == {"a": ("<absent>", 2)}
  # Tuples (the config) equal lists (the JSON it was saved as).
  assert resume.changed_keys({"eval": {"ks": [1, 8]}}, {"eval": {"ks": (1, 8)}}) == {}
  assert resume.resume_hash(old) != resume.resume_hash(new)
  assert resume.resume_hash({**old, "steps": 100}) == resume.resume_hash(old)


def test_resume_under_another_config_stops_naming_the_keys(tmp_path, stop_after_config):
  first = _start(tmp_path, ["advantage.offset_coef=-0.5"])
  _fake_checkpoint(tmp_path)
  with pytest.raises(resume.ConfigChanged) as e:
    _start(tmp_path, ["advantage.offset_coef=0.9", "loss.kind=gspo"])
  msg = str(e.value)
  assert "advantage.offset_coef: -0.5 → 0.9" in msg and "loss.kind: 'grpo' → 'gspo'" in msg
  assert "--allow_config_change" in msg
  # Nothing was overwritten.
  assert json.loads((tmp_path / "config.json").read_text()) == first


def test_extending_a_run_is_not_a_config_change(tmp_path, stop_after_config):
  _start(tmp_path, ["steps=2"])
  _fake_checkpoint(tmp_path)
  saved = _start(tmp_path, ["steps=5", "checkpoint.every=1", "logging.plot=false"])
  assert saved["config"]["steps"] == 5 and saved["config_changes"] == []
  assert len(saved["history"]) == 1


def test_without_a_checkpoint_the_config_may_change(tmp_path, stop_after_config):
  _start(tmp_path, ["loss.kind=grpo"])
  assert _start(tmp_path, ["loss.kind=dapo"])["config"]["loss"]["kind"] == "dapo"


def test_allow_config_change_resumes_and_records_it(tmp_path, stop_after_config):
  _start(tmp_path)
  _fake_checkpoint(tmp_path)
  saved = _start(tmp_path, ["loss.kind=gspo"], allow_config_change=True)
  assert saved["config"]["loss"]["kind"] == "gspo"
  (change,) = saved["config_changes"]
  assert change["keys"] == {"loss.kind": ["grpo", "gspo"]} and change["command"]
  # The next resume under the same (changed) config passes without the flag.
  assert _start(tmp_path, ["loss.kind=gspo"])["config_changes"] == saved["config_changes"]


def test_config_json_records_provenance(tmp_path, stop_after_config):
  p = _start(tmp_path)["provenance"]
  head = subprocess.run(
    ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
  ).stdout.strip()
  assert p["git_commit"] == (head or None)
  assert isinstance(p["command"], list) and p["command"]
  assert p["packages"]["jax"] == jax.__version__
  assert set(provenance.PACKAGES) <= set(p["packages"])
  assert p["devices"] == {
    "platform": jax.devices()[0].platform,
    "kind": jax.devices()[0].device_kind,
    "count": jax.device_count(),
    "local_count": jax.local_device_count(),
    "process_count": jax.process_count(),
  }


def test_provenance_outside_a_git_checkout(monkeypatch, tmp_path):
  monkeypatch.setattr(provenance, "_ROOT", tmp_path)
  monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
  assert provenance.git_commit() is None and provenance.git_dirty() is None
  assert provenance.package_versions(("no-such-package-xyz",)) == {"no-such-package-xyz": None}


def test_launcher_reports_a_changed_config_and_exits(tmp_path, stop_after_config, capsys):
  launch = config_file.load_module(str(ROOT / "experiments/launch.py"))
  _start(tmp_path)
  _fake_checkpoint(tmp_path)
  argv = ["--config", TINY, "--workdir", str(tmp_path), "--config.loss.kind=dapo"]
  assert launch.main(argv) == 2
  assert "loss.kind: 'grpo' → 'dapo'" in capsys.readouterr().err
  with pytest.raises(_Stop):  # the flag lets it go on (to the stubbed setup)
    launch.main([*argv, "--allow_config_change"])


@pytest.mark.parametrize("path", sorted((ROOT / "configs").glob("*.py")), ids=lambda p: p.stem)
def test_every_config_file_survives_its_json_round_trip(path):
  """A resume under the same config reads it back from config.json: no false change."""
  config = config_file.load(str(path)).to_dict()
  saved = json.loads(json.dumps(config, sort_keys=True, default=str))
  assert resume.check({"config": saved}, config, "w") == {}
  assert resume.resume_hash(saved) == resume.resume_hash(config)
