"""The group-relative bias in sampled data (HA-DW, arXiv 2601.08521, Theorem 1 / Lemma 2).

A group of G rollouts estimates a prompt's solve rate p by p̂ = R / G; GRPO only learns from
mixed groups (0 < R < G), and conditioned on that, E[p̂ | mixed] − p = β(p, G) is positive for
p < 1/2 and negative for p > 1/2 (``experiments/bias_simulation.py`` checks β in closed form).

Measured on a policy's own samples: M graded samples per problem (``correct_PxM``), cut into
disjoint groups of G. For each group g, the other groups are split into two halves B and C:
p_B bins the problem by difficulty and p_C estimates p. p̂_g, p_B and p_C are independent given
the true p, so E[p̂_g − p_C | mixed_g, p_B ∈ bin] = E[β(p, G) | mixed_g, p_B ∈ bin] exactly: no
selection effect from binning on the same samples that estimate p. Shapes: P problems, M samples.
"""

from __future__ import annotations

import numpy as np

from grpo_jax.data.pass_rates import informative_prob

EDGES = (0.0, 0.25, 0.5, 0.75, 1.0)  # bins of p_B: [0, ¼), [¼, ½), [½, ¾), [¾, 1]


def beta(p, G: int):
  """β(p, G) = E[p̂ | 0 < R < G] − p for R ~ Bin(G, p) (Lemma 2 of the paper)."""
  p = np.asarray(p, np.float64)
  q = 1.0 - p
  mixed = informative_prob(p, G)  # P(0 < R < G)
  num = p * q * (q ** (G - 1) - p ** (G - 1))
  return np.divide(num, mixed, out=np.zeros_like(p), where=mixed > 0)


def group_estimates(correct_PxM: np.ndarray, G: int) -> dict[str, np.ndarray]:
  """Per (problem, group): ``p_hat`` (the group's mean), ``p_bin`` (p_B) and ``p_ref`` (p_C),
  ``mixed``; arrays of shape P·(M // G). Needs at least 3 groups' worth of samples."""
  correct_PxM = np.asarray(correct_PxM, np.float64)
  P, M = correct_PxM.shape
  num_groups = M // G
  if num_groups < 3:
    raise ValueError(f"{M} samples per problem hold {num_groups} groups of {G}; need >= 3")
  groups_PxKxG = correct_PxM[:, : num_groups * G].reshape(P, num_groups, G)
  out = {"p_hat": [], "p_bin": [], "p_ref": []}
  for g in range(num_groups):
    others = [k for k in range(num_groups) if k != g]
    half = len(others) // 2  # the other groups alternately into B and C, equal sizes
    b, c = others[0::2][:half], others[1::2][:half]
    out["p_hat"].append(groups_PxKxG[:, g].mean(1))
    out["p_bin"].append(groups_PxKxG[:, b].reshape(P, -1).mean(1))
    out["p_ref"].append(groups_PxKxG[:, c].reshape(P, -1).mean(1))
  est = {k: np.concatenate(v) for k, v in out.items()}
  est["mixed"] = (est["p_hat"] > 0) & (est["p_hat"] < 1)
  return est


def bias_by_bin(correct_PxM: np.ndarray, G: int, edges=EDGES) -> list[dict]:
  """Per bin of p_B: the number of mixed groups, the measured ``bias`` = mean(p̂ − p_C) over
  them with its standard error over groups, and the ``predicted`` mean β(p_C, G) (a plug-in
  reference: β at the noisy p_C)."""
  est = group_estimates(correct_PxM, G)
  rows = []
  for i, (lo, hi) in enumerate(zip(edges[:-1], edges[1:], strict=True)):
    last = i == len(edges) - 2
    in_bin = (est["p_bin"] >= lo) & ((est["p_bin"] <= hi) if last else (est["p_bin"] < hi))
    sel = in_bin & est["mixed"]
    d = est["p_hat"][sel] - est["p_ref"][sel]
    n = int(sel.sum())
    se = float(d.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    rows.append(
      {
        "bin": f"[{lo:g}, {hi:g}{']' if last else ')'}",
        "groups": int(in_bin.sum()),
        "mixed": n,
        "bias": float(d.mean()) if n else float("nan"),
        "se": se,
        "predicted": float(beta(est["p_ref"][sel], G).mean()) if n else float("nan"),
      }
    )
  return rows


__all__ = ["EDGES", "beta", "bias_by_bin", "group_estimates"]
