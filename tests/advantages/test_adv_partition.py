"""The partition diagnostics and the shrunk offsets (METHODS §7, statements 17-19) against a
NumPy reference written from the formulas: hand-built groups (a partition carrying all the
signal, one carrying none, unequal subgroup sizes, singletons, padded rows) and random batches;
the null (K − 1)/(n − 1) against the exact permutation distribution."""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import advantages as adv_lib
from grpo_jax.advantages import segments as seg
from grpo_jax.config import base_config, experiment
from tests.advantages.test_adv_reference import random_batch, reference
from tests.support.metrics_doc import undocumented


# ----------------------------------------------------------------------------- reference
def ref_partition(rewards, gids, sids, scope="batch"):
  """(between_share, null, reliability, {g: λ_g}) by METHODS §7 statements 17-18, in float64."""
  groups = {}
  for r, g, s in zip(rewards, gids, sids, strict=True):
    if g >= 0 and s >= 0:
      groups.setdefault(int(g), {}).setdefault(int(s), []).append(float(r))
  rows = {}
  for g, subs in groups.items():
    values = [r for rs in subs.values() for r in rs]
    n, k, mu = len(values), len(subs), float(np.mean(values))
    sst = sum((r - mu) ** 2 for r in values)
    ssb = sum(len(rs) * (np.mean(rs) - mu) ** 2 for rs in subs.values())
    spread = n - sum(len(rs) ** 2 for rs in subs.values()) / n
    rows[g] = dict(n=n, k=k, sst=sst, ssb=ssb, ssw=sst - ssb, spread=spread)
  inf = {g: v for g, v in rows.items() if max_min_differ(groups[g]) and v["k"] >= 2}
  df_w = sum(v["n"] - v["k"] for v in inf.values())
  var_w = sum(v["ssw"] for v in inf.values()) / df_w if df_w else 0.0

  def tau_sq(vs):
    den = sum(v["spread"] for v in vs)
    if not df_w or den <= 0:
      return 0.0
    return max(0.0, sum(v["ssb"] - (v["k"] - 1) * var_w for v in vs) / den)

  pooled = tau_sq(inf.values())
  lam = {}
  for g, v in rows.items():
    t = pooled if scope == "batch" else tau_sq([v])
    lam[g] = 0.0 if t == 0 else t / (t + var_w * v["k"] / v["n"])
  if not inf:
    return 0.0, 0.0, 0.0, lam
  share = np.mean([v["ssb"] / v["sst"] for v in inf.values()])
  null = np.mean([(v["k"] - 1) / (v["n"] - 1) for v in inf.values()])
  batch_lam = {g: 0.0 if pooled == 0 else pooled / (pooled + var_w * v["k"] / v["n"])
               for g, v in inf.items()}  # fmt: skip
  return share, null, float(np.mean(list(batch_lam.values()))), lam


def max_min_differ(subs):
  values = [r for rs in subs.values() for r in rs]
  return max(values) != min(values)


def cfg_of(strength="fixed", scope="batch", coef=-0.5, control="none", scale="none", hadw=False):
  cfg = base_config()
  a = cfg.advantage
  a.baseline, a.offset_coef, a.offset_control, a.scale = "subgroup_offset", coef, control, scale
  a.offset_strength, a.offset_strength_scope = strength, scope
  cfg.hadw.enabled = hadw
  return experiment.of(cfg)


def run(e, r, g, s, key=0):
  anchor = adv_lib.init_anchor(e.hadw)
  adv, _, aux = adv_lib.compute(r, g, s, e.advantage, e.hadw, anchor, jax.random.key(key))
  return np.asarray(adv), {k: float(v) for k, v in aux.items()}


# Hand-built steps. ALL: every subgroup constant (η² = 1). NONE: equal subgroup means (η² = 0).
# UNEQUAL: sizes 3/1/2 and 2/2, a padded row. SINGLETONS: singleton subgroups beside larger
# ones, a singleton group and a degenerate group, padded rows.
ALL = (
  np.array([1, 1, 1, 0, 0, 0, 1, 0, 0], np.float32),
  np.array([0, 0, 0, 0, 0, 0, 6, 6, 6], np.int32),
  np.array([2, 2, 2, 4, 4, 4, 6, 7, 7], np.int32),
)
NONE = (
  np.array([1, 0, 0, 1, 1, 0, 0.5, 0.5, 1, 0], np.float32),
  np.array([3, 3, 3, 3, 3, 3, 0, 0, 0, 0], np.int32),
  np.array([1, 1, 5, 5, 8, 8, 2, 2, 9, 9], np.int32),
)
UNEQUAL = (
  np.array([1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 0.5], np.float32),
  np.array([0, 0, 0, 0, 0, 0, 6, 6, 6, 6, -1], np.int32),
  np.array([1, 1, 1, 2, 3, 3, 7, 7, 8, 8, -1], np.int32),
)
SINGLETONS = (
  np.array([1, 0.25, 0, 1, 1, 0, 0.5, 1, 1, 0.3, 0.7, 0.75, 0, 1], np.float32),
  np.array([4, 4, 4, 4, 4, 9, 9, 9, 12, 12, -1, 2, 11, -1], np.int32),
  np.array([0, 0, 1, 3, 3, 5, 6, 7, 12, 12, -1, 2, 11, -1], np.int32),
)
CASES = {"all": ALL, "none": NONE, "unequal": UNEQUAL, "singletons": SINGLETONS}


# ----------------------------------------------------------------------------- diagnostics
@pytest.mark.parametrize("name", sorted(CASES))
def test_diagnostics_match_reference(name):
  r, g, s = CASES[name]
  _, aux = run(cfg_of(), r, g, s)
  share, null, rel, _ = ref_partition(r.astype(np.float64), g, s)
  np.testing.assert_allclose(aux["strategy/between_share"], share, rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(aux["strategy/between_share_null"], null, rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(aux["strategy/offset_reliability"], rel, rtol=1e-5, atol=1e-7)


def test_the_ends_are_exact():
  """All the signal: η² = 1 and λ = 1 (σ̂²_w = 0); none: η² = 0 and λ = 0, bit for bit."""
  _, aux = run(cfg_of(), *ALL)
  assert aux["strategy/between_share"] == 1.0
  assert aux["strategy/offset_reliability"] == 1.0
  assert aux["strategy/between_share_null"] == np.float32((1 / 5 + 1 / 2) / 2)
  _, aux = run(cfg_of(), *NONE)
  assert aux["strategy/between_share"] == 0.0
  assert aux["strategy/offset_reliability"] == 0.0


def test_null_is_the_permutation_expectation():
  """E[η²] over every assignment of a group's rewards to subgroups of the given sizes equals
  (K − 1)/(n − 1), whatever the rewards (exact enumeration of the n! orders)."""
  for values, sizes in (
    ([1, 0, 0, 1, 1, 0], (3, 2, 1)),
    ([0.9, 0.1, 0.4, 0.4, 0.0, 0.7], (2, 2, 2)),
    ([1, 0, 0, 0, 0, 0, 1], (4, 3)),
    ([0.2, 1, 0, 0.5, 0.5], (1, 1, 3)),
  ):
    n, k = len(values), len(sizes)
    labels = np.repeat(np.arange(k), sizes)
    shares = []
    for order in itertools.permutations(values):
      x = np.asarray(order, np.float64)
      mu = x.mean()
      ssb = sum(m * (x[labels == j].mean() - mu) ** 2 for j, m in enumerate(sizes))
      shares.append(ssb / np.sum((x - mu) ** 2))
    assert math.isclose(np.mean(shares), (k - 1) / (n - 1), rel_tol=1e-12)
    gid = np.zeros(n, np.int32)
    _, aux = run(cfg_of(), np.asarray(values, np.float32), gid, labels.astype(np.int32))
    np.testing.assert_allclose(aux["strategy/between_share_null"], (k - 1) / (n - 1), rtol=1e-6)


def test_keys_only_with_subgroups_and_documented():
  e = cfg_of()
  r, g, s = UNEQUAL
  _, with_ids = run(e, r, g, s)
  _, without = run(experiment.of(base_config()), r, g, None)
  assert set(adv_lib.PARTITION_KEYS) <= set(with_ids)
  assert not set(adv_lib.PARTITION_KEYS) & set(without)
  assert sorted(with_ids) == sorted(adv_lib.aux_keys(e.advantage, e.hadw, subgroups=True))
  assert undocumented(adv_lib.AUX_KEYS) == []


# ----------------------------------------------------------------------------- shrunk offsets
def ref_advantages(e, r, g, s, key=0):
  """test_adv_reference's reference with λ_g from :func:`ref_partition` (real partition)."""
  a = e.advantage
  _, _, _, lam = ref_partition(r.astype(np.float64), g, s, a.offset_strength_scope)
  stats = adv_lib.group_stats(jnp.asarray(r), jnp.asarray(g), jnp.asarray(s), jnp.asarray(g >= 0))
  src = np.asarray(
    adv_lib.offset_permutation(
      jax.random.key(key), stats.subgroup_group_S, stats.subgroup_valid_S, a.offset_shuffle_scope
    )
  )
  shuffle = (a.offset_control == "shuffle", a.offset_shuffle_scope, a.offset_shuffle_recenter)
  o = dict(baseline=a.baseline, scale=a.scale, scale_of=a.scale_of, shuffle=shuffle,
           coef=a.offset_coef, eps=a.eps, lam=1.3, shrink=lam)  # fmt: skip
  return reference(r.astype(np.float64), g, s, o, src, None)


@pytest.mark.parametrize("scope", ["batch", "group"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_shrunk_matches_reference(name, scope):
  r, g, s = CASES[name]
  settings = ((-0.5, "none", "none"), (1.0, "group", "none"), (-1.0, "batch", "shuffle"))
  for coef, scale, control in settings:
    e = cfg_of("shrunk", scope, coef, control, scale)
    adv, _ = run(e, r, g, s)
    np.testing.assert_allclose(adv, ref_advantages(e, r, g, s), rtol=2e-5, atol=2e-6)


def test_shrunk_matches_reference_on_random_batches():
  rng = np.random.default_rng(3)
  for i in range(30):
    r, g, s = random_batch(rng)
    control = ("none", "shuffle")[i % 2]
    e = cfg_of("shrunk", ("batch", "group")[i % 3 == 0], (-1.0, -0.5, 1.0)[i % 3], control, "group")
    adv, aux = run(e, r, g, s, key=i)
    np.testing.assert_allclose(adv, ref_advantages(e, r, g, s, key=i), rtol=2e-5, atol=2e-5)
    share, null, rel, _ = ref_partition(r.astype(np.float64), g, s)
    got = [aux[k] for k in adv_lib.PARTITION_KEYS]
    np.testing.assert_allclose(got, [share, null, rel], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scope", ["batch", "group"])
def test_uninformative_partition_gives_the_anchor_exactly(scope):
  """τ̂² = 0 → λ = 0 → the α = 0 (Strategy-GRPO) advantages bit for bit, HA-DW on."""
  r, g, s = NONE
  anchor, _ = run(cfg_of("fixed", coef=0.0, scale="group", hadw=True), r, g, s)
  for coef in (-1.0, -0.5, 1.0):
    shrunk, _ = run(cfg_of("shrunk", scope, coef, scale="group", hadw=True), r, g, s)
    np.testing.assert_array_equal(shrunk, anchor)


def test_shrunk_at_alpha_one_is_the_empirical_bayes_mean_and_zero_sum():
  """α = +1: b_i = (1 − λ_g)·μ_g + λ_g·μ_s; advantages sum to 0 per prompt under every control
  whose offsets do (the shuffle without re-centring does not, shrunk or fixed)."""
  r, g, s = SINGLETONS
  e = cfg_of("shrunk", "group", 1.0)
  adv, _ = run(e, r, g, s)
  _, _, _, lam = ref_partition(r.astype(np.float64), g, s, "group")
  for i in np.flatnonzero(g >= 0):
    rows_g, rows_s = (g == g[i]), (s == s[i]) & (g >= 0)
    if r[rows_g].max() == r[rows_g].min():
      continue
    b = (1 - lam[g[i]]) * r[rows_g].mean() + lam[g[i]] * r[rows_s].mean()
    np.testing.assert_allclose(adv[i], r[i] - b, atol=1e-6)
  for control in ("none", "noise", "magnitude_scramble"):
    adv, _ = run(cfg_of("shrunk", "batch", -1.0, control), r, g, s, key=5)
    sums = seg.seg_sum(jnp.asarray(adv), jnp.asarray(g), jnp.asarray(g >= 0))
    np.testing.assert_allclose(np.asarray(sums), 0.0, atol=1e-5, err_msg=control)


def test_shrunk_under_jit_equals_eager():
  import functools  # noqa: PLC0415

  e = cfg_of("shrunk", "group", -0.5, "magnitude_scramble", "group", hadw=True)
  r, g, s = SINGLETONS
  anchor = adv_lib.init_anchor(e.hadw)
  f = jax.jit(functools.partial(adv_lib.compute, adv=e.advantage, hadw=e.hadw))
  jitted, _, aux_j = f(r, g, s, anchor=anchor, rng=jax.random.key(2))
  eager, _, aux_e = adv_lib.compute(r, g, s, e.advantage, e.hadw, anchor, jax.random.key(2))
  np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), rtol=1e-6, atol=1e-7)
  for k in adv_lib.PARTITION_KEYS:
    np.testing.assert_allclose(float(aux_j[k]), float(aux_e[k]), rtol=1e-6, atol=1e-7)
