"""The bias of group-relative advantages and what HA-DW's weight does to it
(METHODS §3 statements 11-12).

For R ~ Bin(G, p) conditioned on S = {1 ≤ R ≤ G−1} (arXiv 2601.08521, Lemma 2 / Eq. 34-35):

  β(p, G) = E[p̂ | S] − p = p(1−p)[(1−p)^{G−1} − p^{G−1}] / (1 − (1−p)^G − p^G)

and E[Â_i − A_i | S] = −β with Â_i = r_i − p̂, A_i = r_i − p (same r_i). ``run``

1. checks β against Monte-Carlo for G ∈ {2, 4, 8, 16, 32, 128}  -> beta.csv, beta.png
2. reproduces the paper's Tables 4-6 (mean over p of P(p̂ > p | S)) to 3 decimals -> tables.csv
3. measures, exactly (enumerating R) and by Monte-Carlo, the gap E[Φ·Â | S, r_i] − E[A | S, r_i]
   for correct and incorrect rows with Φ = λ·exp(D·|p̂ − C|) (un-normalised advantage, as in the
   paper's theory), against GRPO's gap (Φ ≡ 1); since the gap is linear in λ, the λ range that
   shrinks it is an interval, written per p -> hadw_gap.csv, hadw_lambda_ranges.csv, hadw_gap.png

Run: python experiments/bias_simulation.py --out /tmp/bias   (about 10 s on one CPU core)
"""

from __future__ import annotations

import csv
import math
import os

import numpy as np

GS = (2, 4, 8, 16, 32, 128)
# Paper values, verbatim (Tables 4, 5: G -> mean over p ∈ (0, ¼) / (0, ½); Table 6: (0, 2/G)).
PAPER_TABLE4 = {2: 0.999997, 4: 0.999996, 6: 0.827762, 8: 0.781130}
PAPER_TABLE5 = {2: 0.999995, 4: 0.776966, 6: 0.689722, 8: 0.640945}
PAPER_TABLE6 = {2: 0.49999, 3: 0.74999, 4: 0.77697, 5: 0.78079, 6: 0.78115}


def binom_pmf(p, G: int) -> np.ndarray:
  """P(R = k), k = 0..G, for each p. Shapes: P -> PxG+1."""
  p = np.atleast_1d(np.asarray(p, np.float64))[:, None]
  k = np.arange(G + 1)[None, :]
  comb = np.array([math.comb(G, int(j)) for j in range(G + 1)], np.float64)[None, :]
  return comb * p**k * (1.0 - p) ** (G - k)


def beta_closed(p, G: int) -> np.ndarray:
  """β(p, G) = p(1−p)[(1−p)^{G−1} − p^{G−1}] / (1 − (1−p)^G − p^G) (Lemma 2)."""
  p = np.asarray(p, np.float64)
  z = 1.0 - (1.0 - p) ** G - p**G
  return p * (1 - p) * ((1 - p) ** (G - 1) - p ** (G - 1)) / z


def beta_mc(p: float, G: int, samples: int, rng: np.random.Generator) -> tuple[float, float]:
  """Monte-Carlo E[p̂ − p | S] and its standard error."""
  r = rng.binomial(G, p, size=samples)
  r = r[(r >= 1) & (r <= G - 1)]
  x = r / G - p
  return float(x.mean()), float(x.std() / math.sqrt(max(len(x), 1)))


def prob_overestimate(p, G: int) -> np.ndarray:
  """P(p̂ > p | S): the probability that the advantage is under-estimated (Theorem 2, ε → 0)."""
  pmf = binom_pmf(p, G)[:, 1:G]
  k = np.arange(1, G)[None, :]
  above = (k / G) > np.atleast_1d(p)[:, None]
  return (pmf * above).sum(1) / pmf.sum(1)


def table_average(G: int, lo: float, hi: float, grid: int = 200_000) -> float:
  """Mean of P(p̂ > p | S) over p ~ U(lo, hi) (midpoint rule)."""
  p = lo + (hi - lo) * (np.arange(grid) + 0.5) / grid
  return float(prob_overestimate(p, G).mean())


def _phi(phat, correct: bool, lam: float, anchor: float):
  d = phat - anchor
  sign_adv = 1.0 if correct else -1.0
  return lam * np.exp(-sign_adv * np.sign(d) * np.abs(d))


def hadw_gap(p: float, G: int, lam: float, anchor: float, correct: bool) -> tuple[float, float]:
  """Exact (E[Φ·Â | S, r_i] − (r_i − p), E[Â | S, r_i] − (r_i − p)) for r_i = ``correct``.

  Enumerates R = k ∈ [1, G−1] with P(R = k | S, r_i = 1) ∝ pmf(k)·k/G (resp. (1 − k/G)).
  """
  k = np.arange(1, G)
  phat = k / G
  w = binom_pmf(p, G)[0, 1:G] * (phat if correct else 1 - phat)
  w = w / w.sum()
  adv = (1.0 if correct else 0.0) - phat
  true = (1.0 if correct else 0.0) - p
  with_phi = float((w * _phi(phat, correct, lam, anchor) * adv).sum()) - true
  plain = float((w * adv).sum()) - true
  return with_phi, plain


def hadw_gap_mc(p, G, lam, anchor, correct, samples, rng) -> float:
  """Monte-Carlo version of :func:`hadw_gap`'s first value (row 0 of each group is r_i)."""
  r_NxG = (rng.random((samples, G)) < p).astype(np.float64)
  s = r_NxG.sum(1)
  keep = (s >= 1) & (s <= G - 1) & (r_NxG[:, 0] == (1.0 if correct else 0.0))
  phat = s[keep] / G
  adv = r_NxG[keep, 0] - phat
  return float((_phi(phat, correct, lam, anchor) * adv).mean() - (r_NxG[keep, 0] - p).mean())


def lambda_range(p, G, anchor, correct) -> tuple[float, float, float]:
  """λ interval where |gap(λ)| < |gap(Φ ≡ 1)|, and the λ* that zeroes it (gap linear in λ)."""
  g1, plain = hadw_gap(p, G, 1.0, anchor, correct)
  true = (1.0 if correct else 0.0) - p
  a = g1 + true  # E[e^{DM}·Â | S, r_i]: gap(λ) = λ·a − true
  if abs(a) < 1e-15:
    return float("nan"), float("nan"), float("nan")
  ends = sorted(((true - abs(plain)) / a, (true + abs(plain)) / a))
  return ends[0], ends[1], true / a


def _write(path, header, rows):
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(header)
    w.writerows(rows)


def run(out: str, samples: int = 400_000, ps=None, lams=None, anchor: float = 0.5, seed: int = 0):
  """Writes every CSV and figure into ``out``; returns the table rows (for tests)."""
  os.makedirs(out, exist_ok=True)
  rng = np.random.default_rng(seed)
  ps = np.round(np.arange(0.05, 0.96, 0.05), 2) if ps is None else np.asarray(ps)
  lams = np.round(np.arange(0.5, 2.01, 0.1), 2) if lams is None else np.asarray(lams)

  beta_rows = []
  for G in GS:
    for p in ps:
      mc, se = beta_mc(float(p), G, samples, rng)
      beta_rows.append((G, float(p), float(beta_closed(p, G)), mc, se))
  _write(os.path.join(out, "beta.csv"), ("G", "p", "beta_closed", "beta_mc", "mc_se"), beta_rows)

  table_rows = []
  for name, paper, bounds in (
    ("table4", PAPER_TABLE4, lambda G: (0.0, 0.25)),
    ("table5", PAPER_TABLE5, lambda G: (0.0, 0.5)),
    ("table6", PAPER_TABLE6, lambda G: (0.0, min(2.0 / G, 1.0))),
  ):
    for G, want in paper.items():
      got = table_average(G, *bounds(G))
      table_rows.append((name, G, round(got, 6), want, abs(round(got, 3) - round(want, 3)) < 1e-9))
  _write(os.path.join(out, "tables.csv"), ("table", "G", "ours", "paper", "match_3dp"), table_rows)

  gap_rows, range_rows = [], []
  G = 8
  for p in ps:
    for correct in (True, False):
      for lam in lams:
        g, plain = hadw_gap(float(p), G, float(lam), anchor, correct)
        gap_rows.append((G, float(p), float(lam), int(correct), g, plain, abs(g) < abs(plain)))
      lo, hi, star = lambda_range(float(p), G, anchor, correct)
      kind = "hard" if p < anchor else ("easy" if p > anchor else "at_anchor")
      range_rows.append((G, float(p), kind, int(correct), lo, hi, star))
  _write(
    os.path.join(out, "hadw_gap.csv"),
    ("G", "p", "lambda", "correct", "gap_hadw", "gap_grpo", "reduces"),
    gap_rows,
  )
  _write(
    os.path.join(out, "hadw_lambda_ranges.csv"),
    ("G", "p", "difficulty", "correct", "lambda_low", "lambda_high", "lambda_star"),
    range_rows,
  )
  _plot(out, beta_rows, gap_rows, range_rows, anchor)
  return {"beta": beta_rows, "tables": table_rows, "gap": gap_rows, "ranges": range_rows}


def _plot(out, beta_rows, gap_rows, range_rows, anchor):
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, ax = plt.subplots(figsize=(6, 4))
  pf = np.linspace(0.005, 0.995, 400)
  for G in GS:
    (line,) = ax.plot(pf, beta_closed(pf, G), label=f"G={G}")
    rows = [r for r in beta_rows if r[0] == G]
    ax.plot([r[1] for r in rows], [r[3] for r in rows], "o", ms=3, color=line.get_color())
  ax.axhline(0, color="k", lw=0.5)
  ax.set(xlabel="p", ylabel="β(p, G) = E[p̂|S] − p", title="closed form (lines) vs Monte-Carlo")
  ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(os.path.join(out, "beta.png"), dpi=120)
  plt.close(fig)

  fig, axes = plt.subplots(1, 3, figsize=(14, 4))
  for ax, correct in zip(axes[:2], (1, 0)):
    rows = [r for r in gap_rows if r[3] == correct]
    for lam in sorted({r[2] for r in rows})[::3]:
      sel = [r for r in rows if r[2] == lam]
      ax.plot([r[1] for r in sel], [r[4] for r in sel], label=f"λ={lam:.1f}")
    sel = [r for r in rows if r[2] == rows[0][2]]
    ax.plot([r[1] for r in sel], [r[5] for r in sel], "k--", label="GRPO (Φ≡1)")
    ax.axhline(0, color="k", lw=0.5)
    ax.axvline(anchor, color="gray", ls=":")
    who = "correct" if correct else "incorrect"
    ax.set(xlabel="p", ylabel="E[ΦÂ|S,r] − (r − p)", title=f"{who} rows, G=8, C={anchor}")
    ax.legend(fontsize=7)
  ax = axes[2]
  for correct, style in ((1, "-"), (0, "--")):
    rows = [r for r in range_rows if r[3] == correct]
    x = [r[1] for r in rows]
    ax.fill_between(x, [r[4] for r in rows], [r[5] for r in rows], alpha=0.25)
    ax.plot(x, [r[6] for r in rows], style, label=f"λ* ({'correct' if correct else 'incorrect'})")
  ax.set(xlabel="p", ylabel="λ", ylim=(0, 4), title="λ ranges that shrink the gap (shaded)")
  ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(os.path.join(out, "hadw_gap.png"), dpi=120)
  plt.close(fig)
