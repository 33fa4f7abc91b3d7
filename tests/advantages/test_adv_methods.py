"""METHODS §1-3 statements 1-10, one test each, against hand-computed values."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from grpo_jax import advantages as adv_lib
from grpo_jax.config import base_config, experiment

# One prompt (group 0) of 6 rows in 3 unequal subgroups (ids 5, 2, 9), one padded row, and a
# second prompt (group 3) of 3 rows with K = 1.
R = np.array([1, 1, 0, 0, 1, 0, 0.7, 1, 0, 0], np.float32)
GID = np.array([0, 0, 0, 0, 0, 0, -1, 3, 3, 3], np.int32)
SID = np.array([5, 5, 2, 2, 2, 9, -1, 4, 4, 4], np.int32)
KEY = jax.random.key(0)


def cfg_with(**kw):
  cfg = base_config()
  for k, v in kw.items():
    group, leaf = k.split("__")
    cfg[group][leaf] = v
  return experiment.of(cfg)  # typed; the run-level cross-group rules are not the math's


def run(cfg, r=R, g=GID, s=SID, anchor=None, key=KEY):
  anchor = adv_lib.init_anchor(cfg.hadw) if anchor is None else anchor
  adv, new_anchor, aux = adv_lib.compute(r, g, s, cfg.advantage, cfg.hadw, anchor, key)
  return np.asarray(adv), new_anchor, aux


def raw(coef):
  return run(cfg_with(advantage__baseline="subgroup_offset", advantage__offset_coef=coef,
                      advantage__scale="none"))[0]  # fmt: skip


# Group 0: μ_g = 1/2; subgroups: μ_5 = 1 (n 2), μ_2 = 1/3 (n 3), μ_9 = 0 (n 1).
MU_G, MU_S = 0.5, np.array([1, 1, 1 / 3, 1 / 3, 1 / 3, 0])
DELTA = MU_S - MU_G


def test_1_alpha_zero_is_strategy_grpo_exactly():
  for scale in ("group", "batch", "none"):
    a = run(cfg_with(advantage__baseline="subgroup_offset", advantage__offset_coef=0.0,
                     advantage__scale=scale))[0]  # fmt: skip
    b = run(cfg_with(advantage__baseline="group", advantage__scale=scale))[0]
    np.testing.assert_array_equal(a, b)
  np.testing.assert_allclose(raw(0.0)[:6], R[:6] - MU_G, atol=1e-7)


def test_2_alpha_one_baseline_is_subgroup_mean():
  np.testing.assert_allclose(raw(1.0)[:6], R[:6] - MU_S, atol=1e-7)
  assert raw(1.0)[5] == 0.0  # singleton subgroup: standing inside it is 0


def test_3_negative_alpha_tilts_toward_subgroup_quality():
  for alpha in (-1.0, -0.4):
    want = (R[:6] - MU_S) + (1 - alpha) * DELTA
    np.testing.assert_allclose(raw(alpha)[:6], want, atol=1e-6)
  np.testing.assert_allclose(raw(-1.0)[:6], (R[:6] - MU_S) + 2 * DELTA, atol=1e-6)
  # Hand value: the singleton failure (subgroup 9) gets 0 + 2·(0 − 1/2) = −1.
  np.testing.assert_allclose(raw(-1.0)[5], -1.0, atol=1e-7)


def test_4_zero_sum_for_every_alpha_and_alpha_free_when_k1_or_equal_means():
  for alpha in (-2.0, -1.0, 0.3, 1.0, 3.0):
    a = raw(alpha)
    np.testing.assert_allclose(a[:6].sum(), 0.0, atol=1e-6)
    np.testing.assert_allclose(a[7:].sum(), 0.0, atol=1e-6)
    np.testing.assert_allclose(a[7:], R[7:] - 1 / 3, atol=1e-7)  # K = 1: GRPO for any α
  # Equal subgroup means (1/2 each, sizes 2 and 4): α has no effect.
  r = np.array([1, 0, 1, 0, 0, 1], np.float32)
  g, s = np.zeros(6, np.int32), np.array([1, 1, 2, 2, 2, 2], np.int32)
  outs = [run(cfg_with(advantage__baseline="subgroup_offset", advantage__offset_coef=a), r, g, s)[0]
          for a in (-1.0, 0.0, 2.0)]  # fmt: skip
  np.testing.assert_array_equal(outs[0], outs[1])
  np.testing.assert_array_equal(outs[1], outs[2])


def test_5_shuffle_permutes_offsets_within_prompt_and_is_noop_for_k1():
  cfg = cfg_with(advantage__baseline="subgroup_offset", advantage__offset_coef=-1.0,
                 advantage__scale="none", advantage__offset_control="shuffle")  # fmt: skip
  seen = set()
  for i in range(30):
    a = run(cfg, key=jax.random.key(i))[0]
    used = (R[:6] - MU_G) - a[:6]  # = α·δ_π(s) = −δ_π(s)
    per_sub = tuple(np.round(-used[[0, 2, 5]].astype(np.float64), 4).tolist())
    assert sorted(per_sub) == sorted(np.round([1 / 2, -1 / 6, -1 / 2], 4).tolist())
    seen.add(per_sub)
    np.testing.assert_allclose(a[7:], R[7:] - 1 / 3, atol=1e-7)  # K = 1 prompt untouched
  assert len(seen) == 6  # all 3! permutations occur
  # No re-centring by default: the mean advantage is logged and generally non-zero.
  means = [float(run(cfg, key=jax.random.key(i))[2]["adv/mean"]) for i in range(10)]
  assert max(abs(m) for m in means) > 1e-3


def test_6_all_equal_group_is_exactly_zero_under_every_setting():
  r = np.array([0.3, 0.3, 0.3, 1, 0, 1, 0.3], np.float32)
  g = np.array([5, 5, 5, 2, 2, 2, 4], np.int32)  # group 5 constant, group 4 singleton
  s = np.array([6, 6, 1, 2, 3, 3, 4], np.int32)
  for baseline in ("group", "rloo", "subgroup_offset"):
    for scale in ("group", "batch", "none"):
      for scale_of in ("rewards", "advantages"):
        for control in ("none", "shuffle"):
          cfg = cfg_with(advantage__baseline=baseline, advantage__scale=scale,
                         advantage__scale_of=scale_of, advantage__offset_coef=-1.0,
                         advantage__offset_control=control, advantage__offset_shuffle_scope="batch",
                         hadw__enabled=True)  # fmt: skip
          a, _, aux = run(cfg, r, g, s)
          assert np.all(a[[0, 1, 2, 6]] == 0.0) and np.all(np.isfinite(a))
          assert all(np.isfinite(float(v)) for v in aux.values())
  np.testing.assert_allclose(float(aux["adv/zero_std_frac"]), 2 / 3)


def test_7_group_identity_is_the_id_not_the_content():
  # The same prompt twice as two instances: rewards [1, 1] and [0, 0] -> both degenerate.
  r = np.array([1, 1, 0, 0], np.float32)
  two = run(cfg_with(), r, np.array([0, 0, 1, 1]), np.array([0, 0, 1, 1]))[0]
  one = run(cfg_with(), r, np.array([0, 0, 0, 0]), np.array([0, 0, 0, 0]))[0]
  np.testing.assert_array_equal(two, 0.0)
  assert np.all(one != 0.0)


def test_8_and_9_phi_formula_and_it_multiplies_the_normalised_advantage():
  r = np.array([1, 0, 0, 0, 0, 0, 0, 0], np.float32)  # p̂ = 1/8
  g = s = np.zeros(8, np.int32)
  for scale in ("group", "none"):  # applied without std too (the authors' code skips it)
    base = run(cfg_with(advantage__scale=scale), r, g, s)[0]
    cfg = cfg_with(advantage__scale=scale, hadw__enabled=True, hadw__anchor="fixed",
                   hadw__fixed_anchor=0.5, hadw__lambda_scale=1.3)  # fmt: skip
    a, _, aux = run(cfg, r, g, s)
    phi = a / base
    np.testing.assert_allclose(phi[0], 1.3 * math.exp(0.375), rtol=1e-6)
    np.testing.assert_allclose(phi[1:], 1.3 * math.exp(-0.375), rtol=1e-6)
    assert np.all(phi > 0)  # a positive per-row weight: signs (and clip branches) unchanged
  np.testing.assert_allclose(float(aux["hadw/phi_boosted_mean"]), 1.3 * math.exp(0.375), 1e-6)
  np.testing.assert_allclose(float(aux["hadw/phi_damped_mean"]), 1.3 * math.exp(-0.375), 1e-6)


def test_9_hadw_composes_with_subgroup_offset():
  cfg = cfg_with(advantage__baseline="subgroup_offset", advantage__offset_coef=-1.0,
                 advantage__scale="none", hadw__enabled=True, hadw__anchor="fixed",
                 hadw__fixed_anchor=0.8)  # fmt: skip
  a = run(cfg)[0]
  base = raw(-1.0)
  d = MU_G - 0.8  # hard prompt: rows with positive advantage boosted
  want = base[:6] * 1.3 * np.exp(-np.sign(base[:6]) * np.sign(d) * abs(d))
  np.testing.assert_allclose(a[:6], want, rtol=1e-6)


def test_10_hand_values_neutral_anchor_range_and_direction():
  phi, _ = adv_lib.hadw_weights(jnp.array([0.875, -0.125]), jnp.array([0.125, 0.125]), 0.5, 1.3)
  # METHODS quotes 1.891 / 0.894; exactly 1.3·e^{±0.375} = 1.89149 / 0.89348 (0.893 rounded).
  np.testing.assert_allclose(np.asarray(phi), [1.891, 0.894], atol=1e-3)
  np.testing.assert_allclose(np.asarray(phi), [1.891489, 0.893476], rtol=1e-6)
  # p̂ = C⁻ -> Φ = λ for every row.
  phi, _ = adv_lib.hadw_weights(jnp.array([0.5, -0.5]), jnp.array([0.5, 0.5]), 0.5, 1.3)
  np.testing.assert_allclose(np.asarray(phi), 1.3)
  # Φ ∈ [λ/e, λe] for any rewards in [0, 1] and anchor in [0, 1].
  rng = np.random.default_rng(0)
  adv = rng.normal(size=1000)
  phi, _ = adv_lib.hadw_weights(jnp.asarray(adv), jnp.asarray(rng.random(1000)), 0.3, 1.3)
  assert float(phi.min()) >= 1.3 / math.e - 1e-6 and float(phi.max()) <= 1.3 * math.e + 1e-6
  # Easy prompt (p̂ = 7/8 > C⁻ = 0.5): correct rows softened, incorrect rows boosted.
  phi, d = adv_lib.hadw_weights(jnp.array([0.125, -0.875]), jnp.array([0.875, 0.875]), 0.5, 1.3)
  np.testing.assert_allclose(np.asarray(phi), [0.893476, 1.891489], rtol=1e-6)
  np.testing.assert_array_equal(np.asarray(d), [-1.0, 1.0])
