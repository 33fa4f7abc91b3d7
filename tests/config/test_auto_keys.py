"""The ``int | str`` keys (``config.fields.auto_spec``): loss.micro_batch_size and
model.logps_vocab_chunk take an int or "auto", from a file or the command line; any other value
fails at load naming the key and what it accepts."""

import pathlib

import pytest
from ml_collections import ConfigDict

from grpo_jax.config import base_config, experiment, finalize
from grpo_jax.config import files as config_file

TINY = pathlib.Path(__file__).resolve().parents[2] / "configs/tiny_test.py"
KEYS = ("loss.micro_batch_size", "model.logps_vocab_chunk")


def _set(cfg: ConfigDict, key: str, value) -> ConfigDict:
  group, name = key.split(".")
  cfg[group][name] = value
  return cfg


@pytest.mark.parametrize("key", KEYS)
def test_an_auto_key_takes_an_int_or_auto_in_a_file(key):
  group, name = key.split(".")
  for value in (8, "auto", 0):  # a file may switch the type either way
    cfg = _set(base_config(), key, value)
    assert experiment.build(cfg)[group][name] == value


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("value", ["big", 1.5, True, -2])
def test_a_bad_value_fails_at_load_naming_the_key(key, value):
  with pytest.raises(ValueError, match=rf"config key {key} = .*(an int or 'auto'|>= 0 or 'auto')"):
    finalize(_set(base_config(), key, value))


@pytest.mark.parametrize("key", KEYS)
def test_an_auto_key_on_the_command_line(key, tmp_path):
  path = str(TINY)
  group, name = key.split(".")
  assert config_file.load(path, [f"{key}=auto"])[group][name] == "auto"
  assert config_file.load(path, [f"{key}=auto", f"{key}=16"])[group][name] == 16
  with pytest.raises(ValueError, match=rf"config key {key}: expected an integer or 'auto'"):
    config_file.load(path, [f"{key}=big"])


def test_other_int_keys_refuse_auto():
  with pytest.raises(ValueError, match="config key loss.num_minibatches"):
    config_file.load(str(TINY), ["loss.num_minibatches=auto"])
