"""The matched-noise control (``advantage.offset_control = 'noise'``): per prompt, zero-sum over
rows and the same row-weighted RMS as the real offsets; exact zeros where the offsets are zero;
b = μ + α·ε."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from grpo_jax import advantages as adv_lib
from grpo_jax.config import base_config, experiment

# Prompt 0: subgroups of 3 / 1 / 2 rows; prompt 6: 2 / 2; prompt 10: one subgroup (offset 0).
R = np.array([1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0], np.float32)
GID = np.array([0, 0, 0, 0, 0, 0, 6, 6, 6, 6, 10, 10], np.int32)
SID = np.array([1, 1, 1, 2, 3, 3, 7, 7, 8, 8, 10, 10], np.int32)


def _stats():
  return adv_lib.group_stats(*map(jnp.asarray, (R, GID, SID, GID >= 0)))


def _noise(seed):
  s = _stats()
  eps_S = adv_lib.matched_noise(
    jax.random.key(seed), s.offset_S, s.subgroup_count_S, s.subgroup_group_S, s.subgroup_valid_S
  )
  return np.asarray(eps_S)


def test_hand_computed_offsets_and_their_noise_moments():
  # Prompt 0: mean 1/2; subgroup means 2/3, 0, 1/2 -> δ = 1/6, −1/2, 0; weighted RMS² =
  # (3·1/36 + 1·1/4 + 0)/6 = 1/18. Prompt 6: mean 1/4, δ = ±1/4, RMS² = 1/16.
  offset = np.asarray(_stats().offset_S)
  np.testing.assert_allclose(offset[[1, 2, 3]], [1 / 6, -1 / 2, 0], atol=1e-7)
  np.testing.assert_allclose(offset[[7, 8]], [0.25, -0.25], atol=1e-7)
  for seed in range(5):
    eps = _noise(seed)
    np.testing.assert_allclose(3 * eps[1] + eps[2] + 2 * eps[3], 0, atol=1e-6)  # zero-sum
    rms2 = (3 * eps[1] ** 2 + eps[2] ** 2 + 2 * eps[3] ** 2) / 6
    np.testing.assert_allclose(rms2, 1 / 18, rtol=1e-6)
    np.testing.assert_allclose(abs(eps[7]), 0.25, rtol=1e-6)  # 2/2: ±RMS, opposite signs
    np.testing.assert_allclose(eps[7], -eps[8], rtol=1e-6)
    assert eps[10] == 0.0  # one subgroup: no offset, no noise
    assert np.all(eps[[0, 4, 5, 6, 9, 11]] == 0.0)  # empty slots


def test_noise_is_not_the_offsets_and_varies_with_the_key():
  offset, a, b = np.asarray(_stats().offset_S), _noise(0), _noise(1)
  assert not np.allclose(a[[1, 2, 3]], offset[[1, 2, 3]])
  assert not np.allclose(a[[1, 2, 3]], b[[1, 2, 3]])
  # Over many keys the noise has no preferred direction: the mean ε of subgroup 2 (δ = −1/2)
  # is near 0, not near −1/2.
  mean = np.mean([_noise(k)[2] for k in range(200)])
  assert abs(mean) < 0.1


def test_compute_uses_the_noise_as_the_offset():
  cfg = base_config()
  a = cfg.advantage
  a.baseline, a.offset_coef, a.scale, a.offset_control = "subgroup_offset", -0.5, "none", "noise"
  cfg = experiment.of(cfg)
  key = jax.random.key(3)
  adv, _, _ = adv_lib.compute(
    R, GID, SID, cfg.advantage, cfg.hadw, adv_lib.init_anchor(cfg.hadw), key
  )
  eps = _noise(3)
  mean_N = np.array([0.5] * 6 + [0.25] * 4 + [0.5] * 2, np.float32)
  want = R - (mean_N - 0.5 * eps[SID])
  np.testing.assert_allclose(np.asarray(adv), want, atol=1e-6)
