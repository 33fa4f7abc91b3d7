"""pass@k, maj@k and bootstrap confidence intervals over problems (METHODS §6).

pass@k is the unbiased estimator of Chen et al. (2021) from n samples with c correct:

  pass@k = 1 - C(n-c, k) / C(n, k) = 1 - prod_{j=n-c+1}^{n} (1 - k/j),   n >= k,

the product form avoiding huge binomials. pass@1 = c/n (avg@n). Arrays are ``[P, N]``:
P problems, N samples each.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np


def _check(n: int, k: int, c: int | None = None) -> None:
  if k < 1 or n < k:
    raise ValueError(f"pass@k needs 1 <= k <= n; got n={n}, k={k}")
  if c is not None and not 0 <= c <= n:
    raise ValueError(f"pass@k needs 0 <= c <= n; got n={n}, c={c}")


def pass_at_k(n: int, c: int, k: int) -> float:
  """Unbiased pass@k from ``n`` samples of which ``c`` are correct (ValueError if n < k)."""
  _check(n, k, c)
  if n - c < k:  # every k-subset holds a correct sample
    return 1.0
  return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def pass_at_k_array(correct_PxN: np.ndarray, k: int) -> np.ndarray:
  """Per-problem pass@k, float64 ``[P]``, from a boolean/0-1 ``correct_PxN``.

  Vectorised through a table over c: prod over the top c factors (1 - k/j), j = n, n-1, ..., is
  the running product; once j reaches k a factor is exactly 0, which gives pass@k = 1 for
  n - c < k without a special case.
  """
  correct_PxN = np.asarray(correct_PxN)
  if correct_PxN.ndim != 2:
    raise ValueError(f"correct_PxN must be 2-D [P, N]; got shape {correct_PxN.shape}")
  n = correct_PxN.shape[1]
  _check(n, k)
  factors = 1.0 - k / np.arange(n, 0, -1, dtype=np.float64)  # j = n, n-1, ..., 1
  table_C = 1.0 - np.concatenate([[1.0], np.cumprod(factors)])  # index c = 0..n
  return table_C[(correct_PxN > 0).sum(axis=1)]


def _vote(answers: Sequence, correct: Sequence) -> float:
  """Correctness of the most frequent non-empty answer; ties go to the one seen first."""
  counts = Counter(a for a in answers if a not in (None, ""))
  if not counts:
    return 0.0
  best = max(counts.values())
  for a, ok in zip(answers, correct):
    if counts.get(a) == best:
      return float(bool(ok))
  return 0.0  # unreachable


def maj_at_k(
  answers_PxN, correct_PxN: np.ndarray, k: int, num_subsets: int = 0, seed: int = 0
) -> np.ndarray:
  """Per-problem majority-vote accuracy over k samples, float64 ``[P]``.

  The vote is over answer strings (``None``/``''`` abstain; all abstaining scores 0; ties go to
  the answer that appears first) and scores the correctness of the winning answer (that of its
  first occurrence). With ``num_subsets = 0`` (default) the vote uses the FIRST k samples of each
  problem -- deterministic and, samples being i.i.d., unbiased for maj@k, but noisier than
  averaging; ``num_subsets > 0`` averages over that many random k-subsets per problem instead.
  """
  correct_PxN = np.asarray(correct_PxN)
  num_problems, n = correct_PxN.shape
  _check(n, k)
  rng = np.random.default_rng(seed)
  out_P = np.zeros(num_problems)
  for i in range(num_problems):
    answers, correct = list(answers_PxN[i]), correct_PxN[i]
    if num_subsets == 0:
      out_P[i] = _vote(answers[:k], correct[:k])
      continue
    subsets = [np.sort(rng.choice(n, size=k, replace=False)) for _ in range(num_subsets)]
    out_P[i] = np.mean([_vote([answers[j] for j in s], correct[s]) for s in subsets])
  return out_P


def bootstrap_ci(
  values_P, num_resamples: int = 1000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float]:
  """Percentile bootstrap (1 - alpha) interval for the mean over problems (resampled with
  replacement, ``num_resamples`` times, from ``np.random.default_rng(seed)``)."""
  values_P = np.asarray(values_P, dtype=np.float64).reshape(-1)
  if values_P.size == 0:
    raise ValueError("bootstrap_ci needs at least one value")
  rng = np.random.default_rng(seed)
  idx_RxP = rng.integers(0, values_P.size, size=(num_resamples, values_P.size))
  means_R = values_P[idx_RxP].mean(axis=1)
  lo, hi = np.quantile(means_R, [alpha / 2, 1 - alpha / 2])
  return float(lo), float(hi)


def summarize(
  correct_PxN,
  ks: Sequence[int],
  answers_PxN=None,
  lengths_PxN=None,
  truncated_PxN=None,
  num_resamples: int = 1000,
  seed: int = 0,
) -> dict:
  """JSON-ready summary: ``pass@k`` and ``pass@k_ci`` ([lo, hi], 95% bootstrap over problems)
  for each k in ``ks`` (each k <= N, else ValueError), ``maj@k`` for each k when answers are
  given (first-k-samples vote, :func:`maj_at_k`), ``len_mean``, ``truncated_frac``,
  ``num_problems``, ``num_samples``."""
  correct_PxN = np.asarray(correct_PxN)
  num_problems, n = correct_PxN.shape
  out: dict = {}
  for k in ks:
    per_problem_P = pass_at_k_array(correct_PxN, int(k))
    out[f"pass@{k}"] = float(per_problem_P.mean())
    out[f"pass@{k}_ci"] = list(bootstrap_ci(per_problem_P, num_resamples, seed=seed))
  if answers_PxN is not None:
    for k in ks:
      out[f"maj@{k}"] = float(maj_at_k(answers_PxN, correct_PxN, int(k)).mean())
  if lengths_PxN is not None:
    out["len_mean"] = float(np.mean(lengths_PxN))
  if truncated_PxN is not None:
    out["truncated_frac"] = float(np.mean(truncated_PxN))
  out["num_problems"] = int(num_problems)
  out["num_samples"] = int(n)
  return out


__all__ = ["bootstrap_ci", "maj_at_k", "pass_at_k", "pass_at_k_array", "summarize"]
