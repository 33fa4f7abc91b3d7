"""pass@k, maj@k, bootstrap CIs and the summary (METHODS §6)."""

import itertools
import math

import numpy as np
import pytest

from grpo_jax.eval import bootstrap_ci, maj_at_k, pass_at_k, pass_at_k_array, summarize


def _brute_force(n, c, k):
  """Fraction of k-subsets of n samples (the first c correct) holding a correct one."""
  subsets = list(itertools.combinations(range(n), k))
  return sum(any(i < c for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_pass_at_k_closed_form_and_brute_force(n):
  for c in range(n + 1):
    for k in range(1, n + 1):
      expected = 1 - math.comb(n - c, k) / math.comb(n, k)
      assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)
      assert pass_at_k(n, c, k) == pytest.approx(_brute_force(n, c, k), abs=1e-12)


def test_pass_at_k_hand_values():
  assert pass_at_k(8, 1, 1) == pytest.approx(1 / 8)
  assert pass_at_k(8, 1, 8) == 1.0
  assert pass_at_k(4, 2, 2) == pytest.approx(1 - 1 / 6)  # 1 - C(2,2)/C(4,2)
  assert pass_at_k(100, 0, 10) == 0.0
  assert pass_at_k(100, 100, 1) == 1.0
  # Large n stays finite and accurate (no huge binomials).
  assert pass_at_k(1000, 10, 100) == pytest.approx(1 - math.comb(990, 100) / math.comb(1000, 100))


def test_pass_at_k_monotone_in_k():
  for n, c in [(16, 1), (16, 5), (10, 9), (7, 0)]:
    values = [pass_at_k(n, c, k) for k in range(1, n + 1)]
    assert all(b >= a - 1e-15 for a, b in zip(values, values[1:]))
    assert values[0] == pytest.approx(c / n)


@pytest.mark.parametrize("n, c, k", [(4, 1, 5), (4, 5, 1), (4, -1, 1), (4, 1, 0)])
def test_pass_at_k_rejects_bad_arguments(n, c, k):
  with pytest.raises(ValueError):
    pass_at_k(n, c, k)


def test_pass_at_k_array_matches_scalar():
  rng = np.random.default_rng(0)
  correct_PxN = rng.random((50, 8)) < rng.random((50, 1))
  for k in range(1, 9):
    per_P = pass_at_k_array(correct_PxN, k)
    expected = [pass_at_k(8, int(c), k) for c in correct_PxN.sum(1)]
    np.testing.assert_allclose(per_P, expected, atol=1e-12)
  np.testing.assert_allclose(pass_at_k_array(correct_PxN, 1), correct_PxN.mean(1))  # avg@n
  np.testing.assert_array_equal(
    pass_at_k_array(correct_PxN.astype(np.float32), 3), pass_at_k_array(correct_PxN, 3)
  )
  with pytest.raises(ValueError):
    pass_at_k_array(correct_PxN, 9)


def test_maj_at_k_hand_cases():
  answers_PxN = [
    ["7", "7", "3", "3"],  # tie 7:3 -> 7 (first seen) is right
    ["1", "2", "2", "1"],  # first 3: 2 wins (wrong); all 4: tie, 1 first (right)
    ["", "", "", "5"],  # abstentions do not vote
    [None, "", None, ""],  # nothing to vote for
  ]
  correct_PxN = np.array([[1, 1, 0, 0], [1, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 0]], dtype=bool)
  np.testing.assert_array_equal(maj_at_k(answers_PxN, correct_PxN, 4), [1, 1, 1, 0])
  np.testing.assert_array_equal(maj_at_k(answers_PxN, correct_PxN, 3), [1, 0, 0, 0])
  np.testing.assert_array_equal(maj_at_k(answers_PxN, correct_PxN, 1), [1, 1, 0, 0])
  # With all k-subsets averaged, k = n is the plain vote.
  np.testing.assert_array_equal(maj_at_k(answers_PxN, correct_PxN, 4, num_subsets=5), [1, 1, 1, 0])
  # k = 1 over random subsets estimates the per-sample accuracy.
  sub = maj_at_k([["a", "b"] * 50], np.array([[1, 0] * 50]), 1, num_subsets=4000)
  assert sub[0] == pytest.approx(0.5, abs=0.03)


def test_bootstrap_ci_contains_mean_and_shrinks():
  rng = np.random.default_rng(1)
  for seed in range(5):
    values_P = rng.random(200) < 0.3
    lo, hi = bootstrap_ci(values_P, seed=seed)
    assert lo < values_P.mean() < hi
    assert bootstrap_ci(values_P, seed=seed) == (lo, hi)  # seeded
  # Width ~ 2 * 1.96 * sqrt(p(1-p)/P): about 0.127 for p = 0.3, P = 200.
  values_P = np.arange(200) < 60
  lo, hi = bootstrap_ci(values_P, num_resamples=4000)
  assert hi - lo == pytest.approx(2 * 1.96 * np.sqrt(0.3 * 0.7 / 200), rel=0.15)
  lo4, hi4 = bootstrap_ci(np.tile(values_P, 4), num_resamples=4000)
  assert hi4 - lo4 < 0.6 * (hi - lo)
  assert bootstrap_ci(np.full(10, 0.5)) == (0.5, 0.5)
  with pytest.raises(ValueError):
    bootstrap_ci([])


def test_summarize():
  rng = np.random.default_rng(2)
  correct_PxN = rng.random((30, 8)) < 0.4
  answers_PxN = np.where(correct_PxN, "ok", "bad").tolist()
  lengths_PxN = rng.integers(1, 10, size=(30, 8))
  truncated_PxN = lengths_PxN == 9
  out = summarize(correct_PxN, (1, 2, 8), answers_PxN, lengths_PxN, truncated_PxN)
  assert out["pass@1"] == pytest.approx(correct_PxN.mean())
  assert out["pass@8"] == pytest.approx(correct_PxN.any(1).mean())
  assert out["pass@1"] <= out["pass@2"] <= out["pass@8"]
  for k in (1, 2, 8):
    lo, hi = out[f"pass@{k}_ci"]
    assert lo <= out[f"pass@{k}"] <= hi
  assert out["maj@1"] == pytest.approx(correct_PxN[:, 0].mean())
  wins_P = correct_PxN.sum(1) > 4
  ties_P = (correct_PxN.sum(1) == 4) & correct_PxN[:, 0]  # a 4:4 tie goes to the first answer
  assert out["maj@8"] == pytest.approx((wins_P | ties_P).mean())
  assert out["len_mean"] == pytest.approx(lengths_PxN.mean())
  assert out["truncated_frac"] == pytest.approx(truncated_PxN.mean())
  assert (out["num_problems"], out["num_samples"]) == (30, 8)
  minimal = summarize(correct_PxN, (1,))
  assert set(minimal) == {"pass@1", "pass@1_ci", "num_problems", "num_samples"}
  with pytest.raises(ValueError):
    summarize(correct_PxN, (16,))
