"""Flipping each `advantage` / `hadw` config key changes compute()'s output (one test per key).

Each test starts from a base where the key matters (e.g. the shuffle keys need the
subgroup_offset baseline, α ≠ 0 and ``advantage.offset_control = 'shuffle'``) and checks the
advantages or the new anchor differ.
"""

from __future__ import annotations

import itertools

import jax
import numpy as np
import pytest

from grpo_jax import advantages as adv_lib
from grpo_jax.config import base_config, experiment

# Two prompts with unequal subgroups (sizes 3/1/2 and 2/2), one padded row.
R = np.array([1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 0.5], np.float32)
GID = np.array([0, 0, 0, 0, 0, 0, 6, 6, 6, 6, -1], np.int32)
SID = np.array([1, 1, 1, 2, 3, 3, 7, 7, 8, 8, -1], np.int32)


def base(**kw):
  cfg = base_config()
  cfg.advantage.baseline = "subgroup_offset"
  cfg.advantage.offset_coef = -1.0
  cfg.hadw.enabled = True
  cfg.hadw.history = 3
  for k, v in kw.items():
    group, leaf = k.split(".")
    cfg[group][leaf] = v
  return experiment.of(cfg)  # typed; the run-level cross-group rules are not the math's


# A partition whose offsets are partly reliable (0 < λ_g < 1) and differ between the scopes of
# advantage.offset_strength_scope: prompt 0 carries signal, prompt 6 none.
SIGNAL = (
  np.array([1, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0.5], np.float32),
  GID,
  np.array([1, 1, 1, 2, 2, 2, 7, 7, 8, 8, -1], np.int32),
)


def outputs(cfg, steps=3, batch=(R, GID, SID)):
  """Advantages of the last of ``steps`` calls (anchor threaded), plus the final anchor."""
  anchor = adv_lib.init_anchor(cfg.hadw)
  rng = np.random.default_rng(0)
  last, gid, sid = batch
  for t in range(steps):
    r = last if t == steps - 1 else (rng.random(R.shape) < 0.3 + 0.3 * t).astype(np.float32)
    adv, anchor, _ = adv_lib.compute(
      r, gid, sid, cfg.advantage, cfg.hadw, anchor, jax.random.key(7)
    )
  return np.asarray(adv), np.concatenate([np.ravel(np.asarray(v)) for v in anchor.values()])


CASES = {
  "advantage.baseline": ({}, "rloo"),
  "advantage.offset_coef": ({}, 0.5),
  "advantage.scale": ({}, "batch"),
  "advantage.scale_of": ({}, "advantages"),
  "advantage.eps": ({"advantage.scale": "none", "hadw.enabled": False}, 1e-6),
  # Each of its other values: test_flipping_the_offset_control_changes_output.
  "advantage.offset_control": ({}, "shuffle"),
  "advantage.offset_shuffle_scope": ({"advantage.offset_control": "shuffle"}, "batch"),
  "advantage.offset_shuffle_recenter": ({"advantage.offset_control": "shuffle"}, True),
  "advantage.offset_magnitude_scramble_rebalance": (
    {"advantage.offset_control": "magnitude_scramble"},
    False,
  ),
  # R's partition is uninformative (τ̂² = 0): shrunk gives the anchor, α = 0.
  "advantage.offset_strength": ({}, "shrunk"),
  "advantage.offset_strength_scope": ({"advantage.offset_strength": "shrunk"}, "group"),
  "hadw.enabled": ({}, False),
  "hadw.anchor": ({}, "fixed"),
  "hadw.history": ({}, 1),
  "hadw.include_current": ({}, True),
  "hadw.lambda_scale": ({}, 1.0),
  "hadw.eta": ({"hadw.anchor": "kalman", "hadw.sigma_of": "observations"}, 5.0),
  "hadw.sigma_of": ({"hadw.anchor": "kalman", "hadw.eta": 0.5}, "observations"),
  "hadw.fixed_anchor": ({"hadw.anchor": "fixed"}, 0.2),
}


def test_every_key_of_both_groups_is_covered():
  cfg = base_config()
  keys = {f"advantage.{k}" for k in cfg.advantage} | {f"hadw.{k}" for k in cfg.hadw}
  assert keys == set(CASES)


@pytest.mark.parametrize("key", sorted(CASES))
def test_flipping_key_changes_output(key):
  start, flipped = CASES[key]
  if key == "advantage.eps":
    # ε only shows with a division: compare scale='group' at two ε values instead.
    start = {"advantage.scale": "group", "hadw.enabled": False}
    flipped = 1e-1
  batch = SIGNAL if key == "advantage.offset_strength_scope" else (R, GID, SID)
  cfg_a = base(**start)
  cfg_b = base(**{**start, key: flipped})
  adv_a, anchor_a = outputs(cfg_a, batch=batch)
  adv_b, anchor_b = outputs(cfg_b, batch=batch)
  assert cfg_a[key.split(".")[0]][key.split(".")[1]] != flipped
  changed = adv_a.shape != adv_b.shape or not np.allclose(adv_a, adv_b, atol=1e-6)
  if anchor_a.shape == anchor_b.shape:
    changed = changed or not np.allclose(anchor_a, anchor_b, atol=1e-7)
  assert changed, key


def test_flipping_the_offset_control_changes_output():
  """Every value of ``advantage.offset_control`` on one batch: four different outputs. Rebalanced,
  the scramble gives these prompts back their offsets (one subgroup per sign, or equal
  magnitudes), so the plain scramble shows the key, and the rebalanced one equals ``none``."""
  plain = {"advantage.offset_magnitude_scramble_rebalance": False}
  adv = {
    name: outputs(base(**plain, **{"advantage.offset_control": name}))[0]
    for name in adv_lib.OFFSET_CONTROLS
  }
  assert set(adv) == {"none", "shuffle", "noise", "magnitude_scramble"}
  for a, b in itertools.combinations(sorted(adv), 2):
    assert not np.allclose(adv[a], adv[b], atol=1e-6), (a, b)
  rebalanced = outputs(base(**{"advantage.offset_control": "magnitude_scramble"}))[0]
  np.testing.assert_allclose(rebalanced, adv["none"], atol=1e-6)
