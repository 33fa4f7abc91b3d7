"""``advantage.offset_control``: each name reaches its control's offsets (b = μ_g + α·δ'), and a
control without the subgroup-offset baseline fails at load naming both keys."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import advantages as adv_lib
from grpo_jax.config import base_config, defaults, experiment
from grpo_jax.config import files as config_file

# Two prompts: subgroups of 3/1/2 rows (means 2/3, 0, 1/2) and 2/2 (1/2, 0); one padded row.
R = np.array([1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 0.5], np.float32)
GID = np.array([0, 0, 0, 0, 0, 0, 6, 6, 6, 6, -1], np.int32)
SID = np.array([1, 1, 1, 2, 3, 3, 7, 7, 8, 8, -1], np.int32)
ALPHA = -0.5


def _stats():
  return adv_lib.group_stats(*map(jnp.asarray, (R, GID, SID, GID >= 0)))


def _offsets_S(control: str, key, scope: str, rebalance: bool) -> np.ndarray:
  """δ' per subgroup slot from each control's own function (not through ``compute``)."""
  s = _stats()
  slots = (s.subgroup_group_S, s.subgroup_valid_S)
  if control == "shuffle":
    return np.asarray(s.offset_S[adv_lib.offset_permutation(key, *slots, scope)])
  if control == "noise":
    return np.asarray(adv_lib.matched_noise(key, s.offset_S, s.subgroup_count_S, *slots))
  if control == "magnitude_scramble":
    args = (key, s.offset_S, s.subgroup_count_S, *slots)
    return np.asarray(adv_lib.magnitude_scramble(*args, rebalance=rebalance))
  return np.asarray(s.offset_S)


def _cfg(control: str, scope: str = "prompt", rebalance: bool = True):
  cfg = base_config()
  a = cfg.advantage
  a.baseline, a.offset_coef, a.scale, a.offset_control = "subgroup_offset", ALPHA, "none", control
  a.offset_shuffle_scope, a.offset_magnitude_scramble_rebalance = scope, rebalance
  return experiment.of(cfg)  # typed; the run-level cross-group rules are not the math's


@pytest.mark.parametrize(
  "control, scope, rebalance",
  [
    ("none", "prompt", True),
    ("shuffle", "prompt", True),
    ("shuffle", "batch", True),
    ("noise", "prompt", True),
    ("magnitude_scramble", "prompt", True),
    ("magnitude_scramble", "prompt", False),
  ],
)
def test_each_control_is_the_baseline_of_its_own_offsets(control, scope, rebalance):
  """A_i = r_i − (μ_g + α·δ'_{s(i)}) with δ' from the control's function and the same key."""
  cfg = _cfg(control, scope, rebalance)
  mean_N = np.array([0.5] * 6 + [0.25] * 4 + [0.0], np.float32)
  for seed in range(4):
    key = jax.random.key(seed)
    adv, _, _ = adv_lib.compute(
      R, GID, SID, cfg.advantage, cfg.hadw, adv_lib.init_anchor(cfg.hadw), key
    )
    offset_N = _offsets_S(control, key, scope, rebalance)[np.maximum(SID, 0)]
    want = np.where(GID >= 0, R - (mean_N + ALPHA * offset_N), 0.0)
    np.testing.assert_allclose(np.asarray(adv), want, atol=1e-6)


def test_the_registry_dispatches_by_name_and_names_the_valid_ones():
  assert set(adv_lib.OFFSET_CONTROLS) == {"none", "shuffle", "noise", "magnitude_scramble"}
  assert adv_lib.get_offset_control("noise") is adv_lib.OFFSET_CONTROLS["noise"]
  with pytest.raises(ValueError, match="offset_control must be one of .*'shuffle'.*got 'shufle'"):
    adv_lib.get_offset_control("shufle")


def test_jit_compiles_one_graph_per_control():
  anchor, key = adv_lib.init_anchor(defaults().hadw), jax.random.key(1)
  args = (jnp.asarray(R), jnp.asarray(GID), jnp.asarray(SID))
  for control in adv_lib.OFFSET_CONTROLS:
    cfg = _cfg(control)
    eager, _, _ = adv_lib.compute(*args, cfg.advantage, cfg.hadw, anchor, key)
    jitted, _, _ = jax.jit(
      lambda r, g, s, k, cfg=cfg: adv_lib.compute(r, g, s, cfg.advantage, cfg.hadw, anchor, k)
    )(*args, key)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), atol=1e-6)


STRATEGY = ["strategy.enabled=true", "strategy.num_previews=2"]


@pytest.mark.parametrize("control", ["shuffle", "noise", "magnitude_scramble"])
@pytest.mark.parametrize("baseline", ["group", "rloo"])
def test_a_control_without_the_offset_baseline_fails_naming_both_keys(control, baseline):
  flags = [*STRATEGY, f"advantage.offset_control={control}", f"advantage.baseline={baseline}"]
  match = (
    f"advantage.offset_control = '{control}' has no effect with advantage.baseline = '{baseline}'"
  )
  with pytest.raises(ValueError, match=match):
    config_file.load("configs/tiny_test.py", flags)


def test_every_control_loads_with_the_offset_baseline():
  for control in adv_lib.OFFSET_CONTROLS:
    flags = [*STRATEGY, "advantage.baseline=subgroup_offset", f"advantage.offset_control={control}"]
    assert config_file.load("configs/tiny_test.py", flags).advantage.offset_control == control
  plain = config_file.load("configs/tiny_test.py", ["advantage.offset_control=none"])
  assert plain.advantage.baseline == "group"  # 'none' needs no offsets
  with pytest.raises(ValueError, match="advantage.offset_control.*'magnitude_scramble', 'noise'"):
    config_file.load("configs/tiny_test.py", ["advantage.offset_control=scramble"])
