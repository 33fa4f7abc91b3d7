"""compute() against a deliberately simple NumPy reference (loops, dicts), every option combo.

Random unequal groups and subgroups with scattered, unsorted ids, singletons and padded rows.
The shuffle's permutation is taken from ``offset_permutation`` (its own properties are tested in
test_adv_shuffle.py) so the rest of the pipeline stays deterministic here. The HA-DW anchor is
driven through a random history of earlier batch accuracies and compared with a sequence-view
reference of the window / kalman / fixed rules.
"""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_jax import advantages as adv_lib
from grpo_jax.config import base_config, experiment

N = 24
H = 4
BASELINES = ("group", "rloo", "subgroup_offset")
SCALES = ("group", "batch", "none")
SCALE_OF = ("rewards", "advantages")
SHUFFLES = (  # (offset_control = 'shuffle', offset_shuffle_scope, offset_shuffle_recenter)
  (False, "prompt", False),
  (True, "prompt", False),
  (True, "batch", False),
  (True, "prompt", True),
  (True, "batch", True),
)
HADWS = ((False, "window", "beliefs", False),) + tuple(  # (enabled, anchor, sigma_of, include)
  (True, kind, sig, inc)
  for kind, sig in (
    ("window", "beliefs"),
    ("kalman", "beliefs"),
    ("kalman", "observations"),
    ("fixed", "beliefs"),
  )
  for inc in (False, True)
)
ADV_COMBOS = [
  (b, sc, so, sh)
  for b, sc, so in itertools.product(BASELINES, SCALES, SCALE_OF)
  for sh in (SHUFFLES if b == "subgroup_offset" else SHUFFLES[:1])
]
ALL_COMBOS = [a + (h,) for a in ADV_COMBOS for h in HADWS]


# ----------------------------------------------------------------------------- reference
def _std(xs, ddof=1):
  n = len(xs)
  if n <= ddof:
    return 0.0
  m = sum(xs) / n
  return math.sqrt(sum((x - m) ** 2 for x in xs) / (n - ddof))


def ref_anchor_sequence(ys, h, kind, sigma_of, eta, include, fixed):
  """C used by Φ at each step t for batch accuracies ys[0..T-1] (METHODS §3)."""
  used, pushed, c = [], [], None
  for t, y in enumerate(ys):
    if kind == "fixed":
      used.append(fixed)
      continue
    if kind == "window":
      prior = y if t == 0 else float(np.mean(ys[max(0, t - h) : t]))
      post = float(np.mean(ys[max(0, t - h + 1) : t + 1]))
    else:
      prior = y if t == 0 else c
      last = pushed[-h:]
      sigma = _std(last, ddof=0) if len(last) >= 2 else 1.0
      e = 0.0 if t == 0 else min(max(eta * sigma, 0.0), 1.0)
      post = (1 - e) * prior + e * y
      pushed.append(post if sigma_of == "beliefs" else y)
      c = post
    used.append(post if include else prior)
  return used


def reference(rewards, gids, sids, o, src, anchor_c):
  """Advantages by the METHODS formulas, one group at a time; ``src[s]`` = shuffle source;
  ``o["shrink"][g]``, when given, λ_g of the shrunk offsets (METHODS §7.19)."""
  n = len(rewards)
  valid = [gids[i] >= 0 and sids[i] >= 0 for i in range(n)]
  g_rows, s_rows = {}, {}
  for i in range(n):
    if valid[i]:
      g_rows.setdefault(int(gids[i]), []).append(i)
      s_rows.setdefault(int(sids[i]), []).append(i)
  mu_g = {g: float(np.mean([rewards[i] for i in rows])) for g, rows in g_rows.items()}
  delta = {s: float(np.mean([rewards[i] for i in rows])) - mu_g[int(gids[rows[0]])]
           for s, rows in s_rows.items()}  # fmt: skip
  shuffle, _, recenter = o["shuffle"]
  use_off = o["baseline"] == "subgroup_offset"
  off = {s: delta[int(src[s])] if (shuffle and use_off) else delta[s] for s in delta}
  row_off = {i: off[int(sids[i])] for i in range(n) if valid[i]}
  if shuffle and recenter and use_off:
    for rows in g_rows.values():
      m = float(np.mean([row_off[i] for i in rows]))
      for i in rows:
        row_off[i] -= m
  raw = np.zeros(n)
  degenerate = {g: max(rewards[i] for i in rows) == min(rewards[i] for i in rows)
                for g, rows in g_rows.items()}  # fmt: skip
  for g, rows in g_rows.items():
    total = sum(rewards[i] for i in rows)
    for i in rows:
      if degenerate[g]:
        continue
      if o["baseline"] == "group":
        b = mu_g[g]
      elif o["baseline"] == "rloo":
        b = (total - rewards[i]) / (len(rows) - 1)
      else:
        b = mu_g[g] + o["coef"] * o.get("shrink", {}).get(g, 1.0) * row_off[i]
      raw[i] = rewards[i] - b
  source = rewards if o["scale_of"] == "rewards" else raw
  batch_sigma = _std([float(source[i]) for i in range(n) if valid[i]])
  out = np.zeros(n)
  for g, rows in g_rows.items():
    sigma = _std([float(source[i]) for i in rows]) if o["scale"] == "group" else batch_sigma
    for i in rows:
      a = raw[i] if o["scale"] == "none" else raw[i] / (sigma + o["eps"])
      if anchor_c is not None and not degenerate[g]:
        d = mu_g[g] - anchor_c
        a *= o["lam"] * math.exp(-np.sign(a) * np.sign(d) * abs(d))
      out[i] = a
  return out


def random_batch(rng: np.random.Generator, n: int = N, max_groups: int = 6, max_subs: int = 3):
  """Unequal groups/subgroups, scattered unsorted global ids < n, singletons, padded rows."""
  num_groups = int(rng.integers(1, max_groups + 1))
  sizes = rng.integers(1, 7, num_groups)
  total = min(int(sizes.sum()), n - int(rng.integers(0, 4)))
  group_local = np.repeat(np.arange(num_groups), sizes)[:total]
  sub_local = rng.integers(0, max_subs, total)
  gid_map = rng.permutation(n)[:num_groups]
  sid_map = rng.permutation(n)[: num_groups * max_subs]
  gids = np.full(n, -1, np.int32)
  sids = np.full(n, -1, np.int32)
  rows = rng.permutation(n)[:total]
  gids[rows] = gid_map[group_local]
  sids[rows] = sid_map[group_local * max_subs + sub_local]
  levels = np.array([0.0, 1.0] if rng.random() < 0.5 else [0.0, 0.25, 0.5, 1.0], np.float32)
  rewards = rng.choice(levels, n).astype(np.float32)
  rewards[gids < 0] = 0.7  # padding carries a value that must be ignored
  return rewards, gids, sids


# ----------------------------------------------------------------------------- harness
def make_cfg(combo, coef, lam, eta):
  baseline, scale, scale_of, (shuffle, scope, recenter), (on, kind, sigma_of, inc) = combo
  cfg = base_config()
  a, h = cfg.advantage, cfg.hadw
  a.baseline, a.scale, a.scale_of, a.offset_coef = baseline, scale, scale_of, coef
  a.offset_control = "shuffle" if shuffle else "none"
  a.offset_shuffle_scope, a.offset_shuffle_recenter = scope, recenter
  h.enabled, h.anchor, h.sigma_of, h.include_current = on, kind, sigma_of, inc
  h.history, h.lambda_scale, h.eta, h.fixed_anchor = H, lam, eta, 0.45
  return experiment.of(cfg)  # typed; the run-level cross-group rules are not the math's


def check_combo(combo, seed, coef=-0.7, lam=1.3, eta=3.0, past=5):
  rng = np.random.default_rng(seed)
  cfg = make_cfg(combo, coef, lam, eta)
  rewards, gids, sids = random_batch(rng)
  key = jax.random.key(seed)
  anchor = adv_lib.init_anchor(cfg.hadw)
  ys = list(rng.uniform(0.2, 0.8, past))
  for y in ys:  # drive the anchor through earlier steps
    _, anchor, _ = adv_lib.update_anchor(anchor, jnp.float32(y), cfg.hadw)
  adv, new_anchor, aux = adv_lib.compute(rewards, gids, sids, cfg.advantage, cfg.hadw, anchor, key)

  stats = adv_lib.group_stats(
    jnp.asarray(rewards), jnp.asarray(gids), jnp.asarray(sids), jnp.asarray(gids >= 0)
  )
  src = np.asarray(
    adv_lib.offset_permutation(key, stats.subgroup_group_S, stats.subgroup_valid_S, combo[3][1])
  )
  o = dict(baseline=combo[0], scale=combo[1], scale_of=combo[2], shuffle=combo[3], coef=coef,
           eps=1e-6, lam=lam)  # fmt: skip
  on, kind, sigma_of, inc = combo[4]
  y_now = float(np.mean(rewards[gids >= 0]))
  c = ref_anchor_sequence([*ys, y_now], H, kind, sigma_of, eta, inc, 0.45)[-1] if on else None
  want = reference(rewards.astype(np.float64), gids, sids, o, src, c)
  np.testing.assert_allclose(np.asarray(adv), want, rtol=2e-5, atol=2e-5, err_msg=str(combo))
  assert sorted(aux) == sorted(adv_lib.aux_keys(cfg.advantage, cfg.hadw, subgroups=True))
  assert ("hadw/anchor" in aux) == on
  assert ("adv/offset_abs_mean" in aux) == (o["baseline"] == "subgroup_offset")
  assert all(np.isfinite(float(v)) for v in aux.values())
  if on:
    np.testing.assert_allclose(float(aux["hadw/anchor"]), c, rtol=1e-5, atol=1e-6)
    assert int(new_anchor["step"]) == past + 1


def test_every_advantage_combo_matches_reference():
  for i, combo in enumerate(ADV_COMBOS):
    check_combo(combo + (HADWS[0],), seed=i)


def test_every_hadw_combo_matches_reference():
  for i, h in enumerate(HADWS):
    check_combo(("subgroup_offset", "group", "rewards", SHUFFLES[0], h), seed=100 + i, past=i)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
  combo=st.sampled_from(ALL_COMBOS),
  seed=st.integers(0, 2**31 - 1),
  coef=st.sampled_from([-1.0, -0.3, 0.0, 0.5, 1.0, 2.0]),
  lam=st.floats(0.5, 2.0),
  eta=st.sampled_from([0.1, 1.0, 10.0]),
  past=st.integers(0, 9),
)
def test_property_all_combos_match_reference(combo, seed, coef, lam, eta, past):
  check_combo(combo, seed, coef=coef, lam=lam, eta=eta, past=past)
