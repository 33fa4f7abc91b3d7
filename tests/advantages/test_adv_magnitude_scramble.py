"""The sign-keeping magnitude scramble (``advantage.offset_control = 'magnitude_scramble'``): per
prompt the non-zero offsets trade magnitudes, each keeps its sign; ``rebalance`` scales each
sign's side back to the real offsets' mass, so the advantages stay zero-sum; b = μ + α·δ'."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import advantages as adv_lib
from grpo_jax.config import base_config, experiment

# Prompt 0: 4 subgroups of 2 rows, means 1, 1/2, 0, 0 (μ = 3/8): δ = 5/8, 1/8, −3/8, −3/8.
# Prompt 8: subgroups of 3 / 1 / 2 rows, means 2/3, 0, 1/2 (μ = 1/2): δ = 1/6, −1/2, 0.
# Prompt 14: one subgroup, rewards 1, 0 (δ = 0).
R = np.array([1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0], np.float32)
GID = np.array([0] * 8 + [8] * 6 + [14] * 2, np.int32)
SID = np.array([0, 0, 1, 1, 2, 2, 3, 3, 8, 8, 8, 9, 10, 10, 14, 14], np.int32)
DELTA = {0: 5 / 8, 1: 1 / 8, 2: -3 / 8, 3: -3 / 8, 8: 1 / 6, 9: -1 / 2, 10: 0.0, 14: 0.0}
PROMPTS = {0: [0, 1, 2, 3], 8: [8, 9, 10], 14: [14]}
SIZES = {0: [2, 2, 2, 2], 8: [3, 1, 2], 14: [2]}


def _stats():
  return adv_lib.group_stats(*map(jnp.asarray, (R, GID, SID, GID >= 0)))


def _scramble(seed, rebalance=False):  # the plain scramble unless asked
  s = _stats()
  out = adv_lib.magnitude_scramble(
    jax.random.key(seed),
    s.offset_S,
    s.subgroup_count_S,
    s.subgroup_group_S,
    s.subgroup_valid_S,
    rebalance,
  )
  return np.asarray(out)


def rebalance_ref(plain, slots, sizes):
  """Each sign's side scaled back to the real offsets' mass Σ n_s|δ_s| (numpy, one prompt)."""
  real = np.array([DELTA[s] for s in slots])
  plain, n = np.asarray(plain, np.float64), np.asarray(sizes, np.float64)
  out = plain.copy()
  for side in (real > 0, real < 0):
    if side.any():
      out[side] *= np.sum(n[side] * np.abs(real[side])) / np.sum(n[side] * np.abs(plain[side]))
  return out


def test_hand_computed_offsets():
  offset = np.asarray(_stats().offset_S)
  for s, d in DELTA.items():
    np.testing.assert_allclose(offset[s], d, atol=1e-7)


def test_signs_and_each_prompts_magnitudes_are_kept_and_a_magnitude_moves():
  seen = {s: set() for s in DELTA}
  for seed in range(40):
    out = _scramble(seed)
    for slots in PROMPTS.values():
      real = np.array([DELTA[s] for s in slots])
      np.testing.assert_array_equal(np.sign(out[slots]), np.sign(real))
      np.testing.assert_allclose(np.sort(np.abs(out[slots])), np.sort(np.abs(real)), atol=1e-7)
    empty = [s for s in range(len(R)) if s not in DELTA]
    assert np.all(out[empty] == 0.0)
    for s in DELTA:
      seen[s].add(round(float(abs(out[s])), 6))
  # Prompt 8's two non-zero offsets swap or stay: 1/6 ↔ 1/2; its zero offset never moves.
  assert seen[8] == seen[9] == {round(1 / 6, 6), 0.5} and seen[10] == {0.0}
  # Prompt 0's first subgroup takes each of the four magnitudes over the keys.
  assert seen[0] == {0.625, 0.125, 0.375}
  assert seen[14] == {0.0}


def test_rebalance_by_hand():
  # Prompt 0 drawn as magnitudes 3/8, 5/8 | 1/8, 3/8: the positive side carries 2·(3/8 + 5/8) = 2
  # against the real 2·(5/8 + 1/8) = 3/2, so ×3/4; the negative 2·(1/8 + 3/8) = 1 against 3/2,
  # so ×3/2.
  got = rebalance_ref([3 / 8, 5 / 8, -1 / 8, -3 / 8], PROMPTS[0], SIZES[0])
  np.testing.assert_allclose(got, [9 / 32, 15 / 32, -3 / 16, -9 / 16])
  assert np.sum(2 * got) == 0.0
  # One subgroup on each side (prompt 8): rebalancing gives back the real offsets.
  np.testing.assert_allclose(
    rebalance_ref([1 / 2, -1 / 6, 0], PROMPTS[8], SIZES[8]), [1 / 6, -1 / 2, 0]
  )


def test_rebalanced_scramble_keeps_signs_and_zero_sum():
  moved = False
  for seed in range(12):
    plain, balanced = _scramble(seed), _scramble(seed, rebalance=True)
    for g, slots in PROMPTS.items():
      real = np.array([DELTA[s] for s in slots])
      np.testing.assert_array_equal(np.sign(balanced[slots]), np.sign(real))
      np.testing.assert_allclose(np.dot(SIZES[g], balanced[slots]), 0.0, atol=1e-6)
      want = rebalance_ref(plain[slots], slots, SIZES[g])
      np.testing.assert_allclose(balanced[slots], want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(balanced[[8, 9, 10]], [1 / 6, -1 / 2, 0], atol=1e-7)
    moved |= not np.allclose(balanced[:4], [DELTA[s] for s in range(4)])
  assert moved  # prompt 0's allocation between its two positive subgroups changes


def _cfg(**keys):
  cfg = base_config()
  a = cfg.advantage
  a.baseline, a.offset_coef, a.scale = "subgroup_offset", -0.5, "none"
  a.offset_control = "magnitude_scramble"
  for k, v in keys.items():
    a[k] = v
  return experiment.of(cfg)  # typed; the run-level cross-group rules are not the math's


@pytest.mark.parametrize("rebalance", [False, True])
def test_compute_uses_the_scrambled_offsets(rebalance):
  cfg = _cfg(offset_magnitude_scramble_rebalance=rebalance)
  key = jax.random.key(5)
  adv, _, _ = adv_lib.compute(
    R, GID, SID, cfg.advantage, cfg.hadw, adv_lib.init_anchor(cfg.hadw), key
  )
  offsets = _scramble(5, rebalance)
  mean_N = np.array([3 / 8] * 8 + [0.5] * 6 + [0.5] * 2, np.float32)
  want = R - (mean_N - 0.5 * offsets[SID])
  np.testing.assert_allclose(np.asarray(adv), want, atol=1e-6)
  sums = [float(np.sum(np.asarray(adv)[GID == g])) for g in PROMPTS]
  if rebalance:  # Σ_{i∈g} b_i = Σ_{i∈g} r_i
    np.testing.assert_allclose(sums, 0.0, atol=1e-6)


def test_jit_matches_eager():
  cfg = _cfg(offset_magnitude_scramble_rebalance=True)
  anchor, key = adv_lib.init_anchor(cfg.hadw), jax.random.key(2)
  eager, _, _ = adv_lib.compute(R, GID, SID, cfg.advantage, cfg.hadw, anchor, key)
  jitted = jax.jit(functools.partial(adv_lib.compute, adv=cfg.advantage, hadw=cfg.hadw))
  got, _, _ = jitted(jnp.asarray(R), jnp.asarray(GID), jnp.asarray(SID), anchor=anchor, rng=key)
  np.testing.assert_allclose(np.asarray(got), np.asarray(eager), atol=1e-6)
  s = _stats()
  fn = jax.jit(adv_lib.magnitude_scramble, static_argnames="rebalance")
  out = fn(
    key, s.offset_S, s.subgroup_count_S, s.subgroup_group_S, s.subgroup_valid_S, rebalance=True
  )
  np.testing.assert_allclose(np.asarray(out), _scramble(2, rebalance=True), atol=1e-7)


def test_config_keys_change_the_advantages():
  key = jax.random.key(5)

  def adv(cfg):
    return np.asarray(
      adv_lib.compute(R, GID, SID, cfg.advantage, cfg.hadw, adv_lib.init_anchor(cfg.hadw), key)[0]
    )

  plain = adv(_cfg(offset_control="none"))
  scrambled = adv(_cfg(offset_magnitude_scramble_rebalance=False))
  balanced = adv(_cfg())  # rebalanced by default
  assert not np.allclose(plain, scrambled) and not np.allclose(scrambled, balanced)
