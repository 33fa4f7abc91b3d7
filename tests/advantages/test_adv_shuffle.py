"""The offset-shuffle permutation (METHODS §1 statement 5): in-block, uniform, re-centring."""

from __future__ import annotations

import collections

import jax
import jax.numpy as jnp
import numpy as np

from grpo_jax import advantages as adv_lib
from grpo_jax.config import base_config, experiment

# Slots 0..9: subgroups 1, 4, 7 belong to group 0; 2, 5 to group 3; 9 alone in group 8.
GROUP_OF = np.array([-1, 0, 3, -1, 0, 3, -1, 0, -1, 8], np.int32)
VALID = GROUP_OF >= 0


def perm(key, scope):
  return np.asarray(
    adv_lib.offset_permutation(key, jnp.asarray(GROUP_OF), jnp.asarray(VALID), scope)
  )


def test_prompt_scope_permutes_within_each_prompt_uniformly():
  counts = collections.Counter()
  for i in range(600):
    src = perm(jax.random.key(i), "prompt")
    assert sorted(src) == list(range(10))  # a permutation
    np.testing.assert_array_equal(GROUP_OF[src], GROUP_OF)  # never leaves its prompt
    np.testing.assert_array_equal(src[~VALID], np.flatnonzero(~VALID))  # empty slots fixed
    assert src[9] == 9  # K = 1: no-op
    counts[tuple(src[[1, 4, 7]])] += 1
  assert len(counts) == 6  # all 3! orders of group 0 occur, roughly equally often
  assert min(counts.values()) > 600 / 6 * 0.6


def test_batch_scope_mixes_prompts_and_keeps_the_multiset():
  crossed = 0
  for i in range(50):
    src = perm(jax.random.key(i), "batch")
    assert sorted(src[VALID]) == sorted(np.flatnonzero(VALID))
    crossed += int(np.any(GROUP_OF[src] != GROUP_OF))
  assert crossed > 40


# Slot layout for the re-centring tests: group 0 holds subgroups 1 (n=2), 4 (n=3), 7 (n=1).
COUNT = np.array([0, 2, 1, 0, 3, 1, 0, 1, 0, 4], np.float32)
OFFSET = np.array([0, 0.5, 0.25, 0, -0.25, -0.25, 0, -0.25, 0, 0], np.float32)


def recentring(src, scope):
  return np.asarray(
    adv_lib.recentring_mean(*map(jnp.asarray, (OFFSET, COUNT, src, GROUP_OF, VALID)), scope)
  )


def test_recentring_mean_is_the_row_mean_of_the_shuffled_offsets():
  for scope in ("prompt", "batch"):
    for i in range(20):
      src = perm(jax.random.key(i), scope)
      mean = recentring(src, scope)
      for g in (0, 3, 8):
        slots = np.flatnonzero(GROUP_OF == g)
        want = (COUNT[slots] * OFFSET[src[slots]]).sum() / COUNT[slots].sum()
        np.testing.assert_allclose(mean[g], want, atol=1e-7)


def test_recentring_mean_is_exactly_zero_when_nothing_moved_between_sizes():
  # Rewards (1 | 0.5, 0.5): float32 offsets whose row sum is not 0, the case a plain mean of
  # the row offsets gets wrong.
  mu = np.float32(2) / np.float32(3)
  hi, lo = np.float32(1) - mu, np.float32(0.5) - mu
  offsets = np.array([0, hi, 0, 0, lo, 0, 0, 0, 0, 0], np.float32)
  counts = np.array([0, 1, 0, 0, 2, 0, 0, 0, 0, 0], np.float32)
  gid = np.array([-1, 0, -1, -1, 0, -1, -1, -1, -1, -1], np.int32)
  assert offsets[1] + offsets[4] + offsets[4] != 0
  args = lambda src: (offsets, counts, np.asarray(src, np.int32), gid, gid >= 0)
  identity = np.arange(10)
  for scope in ("prompt", "batch"):
    mean = np.asarray(adv_lib.recentring_mean(*map(jnp.asarray, args(identity)), scope))
    assert mean[0] == 0.0
  swapped = identity.copy()
  swapped[[1, 4]] = [4, 1]  # unequal sizes: the mean is genuinely non-zero
  mean = np.asarray(adv_lib.recentring_mean(*map(jnp.asarray, args(swapped)), "prompt"))
  np.testing.assert_allclose(mean[0], (2 * hi + lo) / 3, rtol=1e-6)


def test_alpha_one_on_constant_subgroups_stays_exactly_zero_under_a_recentred_shuffle():
  """α = 1, scale_of='advantages': Ã ≡ 0 must not become rounding divided by σ(Ã) + ε."""
  cfg = base_config()
  a = cfg.advantage
  a.baseline, a.offset_coef, a.scale, a.scale_of = "subgroup_offset", 1.0, "group", "advantages"
  a.offset_control, a.offset_shuffle_recenter = "shuffle", True
  rewards = np.array([1.0, 0.5, 0.5, 0.0, 0.0, 0.0], np.float32)  # constant subgroups
  gid = np.array([0, 0, 0, 3, 3, 3], np.int32)
  sid = np.array([0, 1, 1, 3, 4, 4], np.int32)
  kept = 0
  for scope in ("prompt", "batch"):
    a.offset_shuffle_scope = scope
    e = experiment.of(cfg)
    for i in range(8):
      anchor = adv_lib.init_anchor(e.hadw)
      adv, _, _ = adv_lib.compute(rewards, gid, sid, e.advantage, e.hadw, anchor, jax.random.key(i))
      src = np.asarray(adv_lib.offset_permutation(
        jax.random.key(i), *_slots(rewards, gid, sid), scope))  # fmt: skip
      if src[0] == 0 and src[1] == 1:  # group 0 kept its own offsets
        assert np.all(np.asarray(adv)[:3] == 0.0), (scope, i, adv)
        kept += 1
  assert kept >= 2


def _slots(rewards, gid, sid):
  stats = adv_lib.group_stats(*map(jnp.asarray, (rewards, gid, sid, gid >= 0)))
  return stats.subgroup_group_S, stats.subgroup_valid_S


def test_whitened_advantages_of_an_exactly_cancelling_group_are_zero():
  """α = −1, re-centred prompt shuffle that swaps a 2-row and a 1-row subgroup of (1, 1 | 0):
  Ã = 0 for every row in exact arithmetic; float32 leaves ~1e-8, which dividing by σ(Ã) + ε
  would blow up to ~0.05. It must stay 0; the other group is untouched."""
  cfg = base_config()
  a = cfg.advantage
  a.baseline, a.offset_coef, a.scale, a.scale_of = "subgroup_offset", -1.0, "group", "advantages"
  a.offset_control, a.offset_shuffle_recenter = "shuffle", True
  cfg = experiment.of(cfg)
  rewards = np.array([1.0, 1.0, 0.0, 1.0, 0.5, 0.0], np.float32)
  gid = np.array([0, 0, 0, 3, 3, 3], np.int32)
  sid = np.array([0, 0, 2, 3, 4, 4], np.int32)
  swapped = 0
  for i in range(12):
    key = jax.random.key(i)
    adv = np.asarray(
      adv_lib.compute(
        rewards, gid, sid, cfg.advantage, cfg.hadw, adv_lib.init_anchor(cfg.hadw), key
      )[0]
    )
    src = np.asarray(adv_lib.offset_permutation(key, *_slots(rewards, gid, sid), "prompt"))
    if src[0] == 2:
      assert np.all(adv[:3] == 0.0), (i, adv)
      swapped += 1
    assert np.abs(adv[3:]).max() > 0.1  # a real signal is not snapped away
  assert swapped >= 2
