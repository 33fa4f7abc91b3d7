"""Replaced config keys (``grpo_jax.config.legacy``): the three offset-control booleans fail at
load naming ``advantage.offset_control`` (file, override, launcher flag), and a run recorded
under them reads and resumes as ``advantage.offset_control``. ``train`` stops right after it
writes config.json (``run_lib.setup`` replaced), so nothing trains."""

import json
import pathlib

import pytest

from grpo_jax.config import files as config_file
from grpo_jax.config import legacy, resume
from grpo_jax.train import modes
from grpo_jax.train import run as run_lib

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY = str(ROOT / "configs/tiny_test.py")
STRATEGY = str(ROOT / "configs/tiny_sweep.py")  # subgroup_offset with strategy sampling
OLD = {
  "advantage.offset_shuffle": "shuffle",
  "advantage.offset_noise": "noise",
  "advantage.offset_magnitude_scramble": "magnitude_scramble",
}


@pytest.mark.parametrize("key", sorted(OLD))
def test_an_old_override_fails_naming_the_new_key(key):
  want = f"config key {key} was replaced by advantage.offset_control = '{OLD[key]}'"
  with pytest.raises(KeyError, match=want):
    config_file.load(STRATEGY, [f"{key}=true"])
  with pytest.raises(KeyError, match="advantage.offset_control = 'none'"):
    config_file.load(STRATEGY, [f"{key}=false"])  # False names the value it was, too


def test_an_old_key_in_a_config_file_fails_naming_the_new_key(tmp_path):
  path = tmp_path / "old.py"
  path.write_text(
    "from grpo_jax.config import base_config\n"
    "def get_config(arg=None):\n"
    "  c = base_config()\n"
    "  c.advantage.offset_noise = True\n"
    "  return c\n"
  )
  with pytest.raises(KeyError, match="advantage.offset_noise was replaced by .*'noise'"):
    config_file.load(str(path))


def test_the_launcher_reports_an_old_flag_naming_the_new_key(capsys):
  launch = config_file.load_module(str(ROOT / "experiments/launch.py"))
  argv = ["--config", STRATEGY, "--config.advantage.offset_shuffle=true", "--print_config"]
  assert launch.main(argv) == 2
  err = capsys.readouterr().err
  assert "advantage.offset_shuffle was replaced by advantage.offset_control = 'shuffle'" in err
  assert launch.main(["--config", STRATEGY, "--sweep", "--dry_run", *argv[2:3]]) == 2
  assert "advantage.offset_control = 'shuffle'" in capsys.readouterr().err


def test_upgrade_maps_each_old_key_and_keeps_the_rest():
  for key, value in OLD.items():
    flat = {"seed": 0, **dict.fromkeys(OLD, False), key: True, "hadw.enabled": False}
    assert legacy.upgrade_flat(flat) == {
      "seed": 0,
      "advantage.offset_control": value,
      "hadw.enabled": False,
    }
  # All False, or only some of them recorded (a key a sweep gained later): 'none'.
  assert legacy.upgrade_flat({"advantage.offset_shuffle": False}) == {
    "advantage.offset_control": "none"
  }
  # As a CSV holds them (text), and nested as config.json does.
  assert legacy.upgrade_flat({"advantage.offset_shuffle": "True"}) == {
    "advantage.offset_control": "shuffle"
  }
  nested = {"steps": 3, "advantage": {"offset_coef": -0.5, "offset_noise": True, "eps": 1e-6}}
  assert legacy.upgrade(nested) == {
    "steps": 3,
    "advantage": {"offset_coef": -0.5, "offset_control": "noise", "eps": 1e-6},
  }
  today = {"advantage": {"offset_control": "shuffle"}, "seed": 1}
  assert legacy.upgrade(today) == today
  assert legacy.replaced("advantage.offset_coef") is None


def test_upgrade_refuses_two_controls_or_a_contradiction():
  two = {"advantage.offset_shuffle": True, "advantage.offset_noise": True}
  with pytest.raises(ValueError, match="run/x sets advantage.offset_shuffle and .*offset_noise"):
    legacy.upgrade_flat(two, "run/x")
  with pytest.raises(ValueError, match="offset_control = 'noise' beside advantage.offset_shuffle"):
    legacy.upgrade_flat({"advantage.offset_control": "noise", "advantage.offset_shuffle": True})
  same = {"advantage.offset_control": "shuffle", "advantage.offset_shuffle": True}
  assert legacy.upgrade_flat(same) == {"advantage.offset_control": "shuffle"}


class _Stop(Exception):
  pass


@pytest.fixture
def stop_after_config(monkeypatch):
  def setup(*a, **k):
    raise _Stop

  monkeypatch.setattr(run_lib, "setup", setup)


def _start(workdir, overrides=()):
  """train() up to config.json; returns it."""
  with pytest.raises(_Stop):
    modes.train(config_file.load(STRATEGY, list(overrides)), workdir, log=lambda *a: None)
  return json.loads((workdir / "config.json").read_text())


def _record_with_old_keys(workdir, **old):
  """Rewrites config.json as a run started before the keys were replaced would hold it."""
  saved = json.loads((workdir / "config.json").read_text())
  adv = saved["config"]["advantage"]
  del adv["offset_control"]
  adv.update({k.split(".")[1]: False for k in OLD}, **old)
  (workdir / "config.json").write_text(json.dumps(saved))
  (workdir / "checkpoints" / "3").mkdir(
    parents=True, exist_ok=True
  )  # a checkpoint: the guard applies


def test_a_run_recorded_under_the_old_keys_resumes(tmp_path, stop_after_config):
  _start(tmp_path, ["advantage.offset_control=shuffle", "advantage.offset_coef=-0.5"])
  _record_with_old_keys(tmp_path, offset_shuffle=True)
  assert resume.read(tmp_path)["config"]["advantage"]["offset_control"] == "shuffle"
  saved = _start(tmp_path, ["advantage.offset_control=shuffle", "advantage.offset_coef=-0.5"])
  adv = saved["config"]["advantage"]
  assert adv["offset_control"] == "shuffle" and not set(adv) & {"offset_shuffle", "offset_noise"}
  assert saved["config_changes"] == [] and len(saved["history"]) == 1
  # Under another control it is a changed key, named in today's terms.
  _record_with_old_keys(tmp_path, offset_shuffle=True)
  with pytest.raises(resume.ConfigChanged, match="advantage.offset_control: 'shuffle' → 'none'"):
    _start(tmp_path, ["advantage.offset_control=none", "advantage.offset_coef=-0.5"])


def test_a_run_recorded_with_two_old_controls_fails_clearly(tmp_path, stop_after_config):
  _start(tmp_path)
  _record_with_old_keys(tmp_path, offset_shuffle=True, offset_magnitude_scramble=True)
  match = (
    r"config.json sets advantage.offset_shuffle and advantage.offset_magnitude_scramble to "
    r"True together; they were replaced by one key, advantage.offset_control"
  )
  with pytest.raises(ValueError, match=match):
    _start(tmp_path)
