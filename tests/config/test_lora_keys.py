"""The nested group ``model.lora``: its keys are in the base config, set from a file's overrides
(``--config.model.lora.rank=8``), typed at load, and a bad value fails there naming the key and
its choices or range; its spec reaches the adapters' scale."""

import pytest
from ml_collections import ConfigDict

from grpo_jax.config import base_config, defaults, experiment
from grpo_jax.config import files as config_file
from grpo_jax.config.groups_run import Lora
from grpo_jax.models import lora
from tests.config.test_config import ROOT

TINY = str(ROOT / "configs/tiny_test.py")


def test_the_group_nests_under_model_with_its_defaults():
  cfg = base_config()
  defaults_ = {"rank": 0, "alpha": 32.0, "targets": ("all_linear",), "sampler": "merged"}
  assert dict(cfg.model.lora) == defaults_
  e = defaults()
  assert isinstance(e.model.lora, Lora) and e.model.lora.rank == 0
  assert lora.LoraSpec.from_config(e.model.lora) is None  # rank 0: off
  assert experiment.CHOICES["model.lora.targets"] == tuple(sorted(lora.TARGETS))


def test_overrides_reach_the_spec():
  e = config_file.load(
    TINY, ["model.lora.rank=8", "model.lora.alpha=16", "model.lora.targets=q,v,down"]
  )
  assert e.model.lora == Lora(rank=8, alpha=16.0, targets=("q", "v", "down"))
  spec = lora.LoraSpec.from_config(e.model.lora)
  assert spec.scale == 2.0 and spec.modules == ("q_proj", "v_proj", "down_proj")
  e2 = e.with_overrides({"model.lora.alpha": 32.0})
  assert lora.LoraSpec.from_config(e2.model.lora).scale == 4.0
  assert e2.to_dict()["model"]["lora"]["alpha"] == 32.0


@pytest.mark.parametrize(
  "overrides,needle",
  [
    (["model.lora.rank=-1"], r"model.lora.rank = -1 must be >= 0"),
    (["model.lora.alpha=0"], r"model.lora.alpha = 0.0 must be > 0"),
    (["model.lora.alpha=-2"], r"model.lora.alpha = -2.0 must be > 0"),
    (
      ["model.lora.targets=q,qkv"],
      r"model.lora.targets = \('q', 'qkv'\): 'qkv' is not one of \['all_linear', 'down', 'gate', "
      r"'k', 'o', 'q', 'up', 'v'\]",
    ),
    (["model.lora.rank=4", "model.lora.targets=()"], r"model.lora.targets = \(\) names no"),
    (["model.lora.rnk=4"], r"unknown config key 'model.lora.rnk'; did you mean 'model.lora.rank'"),
  ],
)
def test_bad_values_fail_at_load(overrides, needle):
  with pytest.raises((ValueError, KeyError), match=needle):
    config_file.load(TINY, overrides)


def test_the_group_is_not_a_value():
  cfg = base_config()
  with pytest.raises(TypeError, match="lora"):
    cfg.model.lora = 8  # the ConfigDict refuses it
  raw = cfg.to_dict()
  raw["model"]["lora"] = 8  # a hand-edited config.json
  with pytest.raises(ValueError, match="model.lora is a group of keys"):
    experiment.build(ConfigDict(raw))
