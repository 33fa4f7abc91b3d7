"""advantage.offset_strength / offset_strength_scope at load: a bad value fails naming the key
and its choices, and 'shrunk' needs the subgroup-offset baseline whose offsets it scales."""

import pytest

from grpo_jax.config import files as config_file
from tests.config.test_config import ROOT

TINY = str(ROOT / "configs/tiny_test.py")
STRATEGY = str(ROOT / "configs/tiny_sweep.py")  # subgroup_offset with strategy sampling


@pytest.mark.parametrize(
  "override,needle",
  [
    ("advantage.offset_strength=shrink", r"advantage.offset_strength.*'fixed', 'shrunk'"),
    ("advantage.offset_strength_scope=prompt", r"offset_strength_scope.*'batch', 'group'"),
  ],
)
def test_bad_value_fails_naming_the_key_and_choices(override, needle):
  with pytest.raises(ValueError, match=needle):
    config_file.load(STRATEGY, [override])


def test_shrunk_needs_the_subgroup_offset_baseline():
  with pytest.raises(ValueError, match=r"advantage.offset_strength = 'shrunk'.*'group'"):
    config_file.load(TINY, ["advantage.offset_strength=shrunk"])


@pytest.mark.parametrize("scope", ["batch", "group"])
def test_shrunk_loads_with_strategy_sampling(scope):
  e = config_file.load(
    STRATEGY, ["advantage.offset_strength=shrunk", f"advantage.offset_strength_scope={scope}"]
  )
  assert (e.advantage.offset_strength, e.advantage.offset_strength_scope) == ("shrunk", scope)
