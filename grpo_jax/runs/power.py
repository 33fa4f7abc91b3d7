"""Power of the study's paired, seed-replicated comparisons, and Holm's correction.

Runs of one seed share the warm start, the presampled plans, the prompt stream and the
evaluation draws, so a condition c is compared with the anchor a through the paired differences
Δ_s = m(c, s) − m(a, s) over seeds s. The test is a two-sided paired t over seeds; a family of
pre-registered comparisons is corrected with Holm's step-down method, whose first (strictest)
step tests at α / family.

  power(n) = P(|T| > t_{1−α'/2, n−1}),  T ~ noncentral t(n − 1, δ·√n / σ_Δ),  α' = α / family

``seeds_needed`` is the smallest n with power(n) ≥ the target; ``min_detectable`` the smallest
effect δ that n seeds detect with that power.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def holm(p_values) -> np.ndarray:
  """Holm-adjusted p-values (step-down, monotone, capped at 1), in the input order.

  An untestable comparison (p NaN: fewer than 2 seeds, or every paired Δ equal and non-zero)
  keeps its place in the family with p = 1, so the family size stays m = len(p_values): a
  comparison that could not be tested never loosens the others' correction."""
  p = np.asarray(p_values, np.float64)
  p = np.where(np.isfinite(p), p, 1.0)
  m = len(p)
  order = np.argsort(p)
  adjusted = np.empty(m)
  running = 0.0
  for rank, i in enumerate(order):
    running = max(running, (m - rank) * p[i])
    adjusted[i] = min(1.0, running)
  return adjusted


def paired_test(deltas) -> dict:
  """Two-sided one-sample t test of the paired differences against 0: ``n``, ``mean``, ``sd``,
  ``lo`` / ``hi`` (95% t interval) and ``p``."""
  d = np.asarray([x for x in deltas if x is not None and math.isfinite(x)], np.float64)
  n = len(d)
  out = {"n": n, "mean": float(d.mean()) if n else math.nan, "sd": math.nan}
  out.update(lo=math.nan, hi=math.nan, p=math.nan)
  if n < 2:
    return out
  sd = float(d.std(ddof=1))
  se = sd / math.sqrt(n)
  half = float(stats.t.ppf(0.975, n - 1)) * se
  out.update(sd=sd, lo=out["mean"] - half, hi=out["mean"] + half)
  if se <= 1e-12 * max(1.0, abs(out["mean"])):  # every Δ equal: t is 0/0 or ±∞, untestable
    out["p"] = 1.0 if abs(out["mean"]) <= 1e-12 else math.nan
  else:
    out["p"] = float(2 * stats.t.sf(abs(out["mean"]) / se, n - 1))
  return out


def power_paired(n: int, sd: float, effect: float, alpha: float = 0.05) -> float:
  """Power of the two-sided paired t test at level ``alpha`` with ``n`` seeds."""
  if n < 2:
    return 0.0
  df, nc = n - 1, effect * math.sqrt(n) / sd
  crit = float(stats.t.ppf(1 - alpha / 2, df))
  # P(T < −crit; nc) as P(T > crit; −nc): scipy's nct.cdf returns NaN deep in the lower tail.
  return float(stats.nct.sf(crit, df, nc) + stats.nct.sf(crit, df, -nc))


def seeds_needed(
  sd: float, effect: float, alpha: float = 0.05, power: float = 0.8, family: int = 1
) -> int:
  """Smallest number of seeds whose power reaches ``power`` at Holm's first step."""
  n = 2
  while power_paired(n, sd, effect, alpha / family) < power:
    n += 1
    if n > 100_000:
      raise ValueError(f"no n up to 100000 reaches power {power} (sd {sd}, effect {effect})")
  return n


def min_detectable(
  n: int, sd: float, alpha: float = 0.05, power: float = 0.8, family: int = 1
) -> float:
  """Smallest effect that ``n`` seeds detect with ``power`` at Holm's first step (bisection)."""
  lo, hi = 0.0, 1.0
  while power_paired(n, sd, hi * sd, alpha / family) < power:
    hi *= 2
  for _ in range(60):
    mid = (lo + hi) / 2
    lo, hi = (mid, hi) if power_paired(n, sd, mid * sd, alpha / family) < power else (lo, mid)
  return hi * sd


__all__ = ["holm", "min_detectable", "paired_test", "power_paired", "seeds_needed"]
