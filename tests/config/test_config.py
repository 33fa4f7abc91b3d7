"""Configs: locked keys with nearest-key errors, typed overrides, every config file builds."""

import pathlib

import pytest
from ml_collections import ConfigDict

from grpo_jax import config as config_lib
from grpo_jax.config import experiment
from grpo_jax.config import files as config_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIG_FILES = sorted((ROOT / "configs").glob("*.py"))


def test_unknown_override_names_nearest_key():
  with pytest.raises(KeyError, match="hadw.lambda_scale"):
    config_file.load(str(ROOT / "configs/tiny_test.py"), ["hadw.lamda_scale=2.0"])


def test_unknown_group_names_nearest_key():
  with pytest.raises(KeyError, match="'advantage"):
    config_file.load(str(ROOT / "configs/tiny_test.py"), ["advantge.baseline=rloo"])


def test_misspelt_key_in_config_file_is_an_error(tmp_path):
  bad = tmp_path / "bad.py"
  bad.write_text(
    "from grpo_jax.config import base_config\n"
    "def get_config(arg=None):\n"
    "  c = base_config()\n"
    "  c.sampling.group_sise = 4\n"
    "  return c\n"
  )
  with pytest.raises(KeyError, match="sampling.group_size"):
    config_file.load(str(bad))


def test_loaded_config_is_frozen_and_derives_new_experiments():
  e = config_file.load(str(ROOT / "configs/tiny_test.py"))
  with pytest.raises(AttributeError):
    e.loss.new_key = 1
  with pytest.raises(AttributeError):
    e.cfg.loss.new_key = 1  # the ConfigDict it keeps is locked
  e2 = e.with_overrides({"steps": 7, "sampling.group_size": 2})
  assert (e2.steps, e2.sampling.group_size, e.steps) == (7, 2, e.steps)
  assert e2.to_dict() == {
    **e.to_dict(),
    "steps": 7,
    "sampling": {**e.to_dict()["sampling"], "group_size": 2},
  }
  with pytest.raises(KeyError, match="loss.kindd"):
    e.with_overrides({"loss.kindd": "dapo"})
  with pytest.raises(ValueError, match="loss.kind = 'ppo'"):
    e.with_overrides({"loss.kind": "ppo"})


@pytest.mark.parametrize(
  "key,text,expected",
  [
    ("steps", "7", 7),
    ("hadw.enabled", "true", True),
    ("hadw.enabled", "0", False),
    ("hadw.lambda_scale", "1.5", 1.5),
    ("advantage.baseline", "rloo", "rloo"),
    ("eval.ks", "1,2,4", (1, 2, 4)),
    ("eval.ks", "(1, 4)", (1, 4)),
  ],
)
def test_overrides_are_typed(key, text, expected):
  cfg = config_file.load(str(ROOT / "configs/tiny_test.py"), [f"{key}={text}"])
  node = cfg
  for part in key.split("."):
    node = node[part]
  assert node == expected and type(node) is type(expected)


def test_bad_override_value_is_an_error():
  with pytest.raises(ValueError):
    config_file.load(str(ROOT / "configs/tiny_test.py"), ["steps=two"])
  with pytest.raises(ValueError):
    config_file.load(str(ROOT / "configs/tiny_test.py"), ["hadw.enabled=maybe"])


def test_config_arg_reaches_get_config():
  cfg = config_file.load(str(ROOT / "configs/quickstart.py") + ":steps=3")
  assert cfg.steps == 3


def test_nearest_key():
  assert config_lib.nearest_key(config_lib.base_config(), "loss.klcoef") == "loss.kl_coef"


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: p.stem)
def test_every_config_file_builds(path):
  cfg = config_file.load(str(path))
  assert isinstance(cfg, experiment.Experiment) and isinstance(cfg.cfg, ConfigDict)
  assert cfg.sampling.group_size >= 1 and cfg.steps >= 1
  assert len(config_file.content_hash(cfg)) == 16


@pytest.mark.parametrize(
  "arg,key,expected",
  [
    ("anchor=fixed,c=0.4", "hadw.fixed_anchor", 0.4),
    ("anchor=fixed,c=0.6", "hadw.anchor", "fixed"),
    ("enabled=0", "hadw.enabled", False),
    ("lam=2.0", "hadw.lambda_scale", 2.0),
  ],
)
def test_hadw_variants_reach_the_config(arg, key, expected):
  cfg = config_file.load(str(ROOT / "configs/quickstart_hadw.py") + ":" + arg)
  group, leaf = key.split(".")
  assert cfg[group][leaf] == expected


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: p.stem)
def test_every_config_file_rejects_a_misspelt_argument(path):
  module = config_file.load_module(str(path))
  assert isinstance(module.ARGS, tuple)  # every config file declares the arguments it reads
  with pytest.raises(ValueError, match="unknown config argument 'no_such_arg'") as e:
    config_file.load(f"{path}:no_such_arg=1")
  assert f"valid arguments: {sorted(module.ARGS) or 'none'}" in str(e.value)


def test_declared_arguments_are_checked_even_if_get_config_ignores_them(tmp_path):
  path = tmp_path / "lax.py"
  path.write_text(
    "from grpo_jax.config import base_config\n"
    "ARGS = ('steps',)\n"
    "def get_config(arg=None):\n"
    "  return base_config()\n"
  )
  config_file.load(f"{path}:steps=3")
  with pytest.raises(ValueError, match="'stpes'; did you mean 'steps'"):
    config_file.load(f"{path}:stpes=3")
