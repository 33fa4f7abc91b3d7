"""Closed-form answers against exact golds: evaluated exactly in the worker, never 0 by fiat.

Every correct case here scored 0 before the closed-form route (the fast path decided each
integer gold itself and failed any answer that was not a plain number).
"""

import time

import numpy as np
import pytest
import sympy

from grpo_jax.rewards import math as rm
from grpo_jax.rewards.math import closed_form as cf


def B(x: str) -> str:
  return f"Putting it together, the answer is $\\boxed{{{x}}}$."


CORRECT = [
  ("2^{10}", "1024"),
  ("5!", "120"),
  (r"\binom{10}{3}", "120"),
  ("10^{6}", "1,000,000"),
  ("-(-3)", "3"),
  (r"\sqrt{144}", "12"),
  (r"\log_2 1024", "10"),
  (r"1.5 \times 2", "3"),
  (r"\frac{10!}{3!\,7!}", "120"),
  ("x = 2^{10}", "1024"),
  (r"2^{10} \text{ ways}", "1024"),
  (r"\frac{1}{2^{2}}", r"\frac14"),
  (r"\frac{1}{2}+\frac{1}{3}", r"\frac56"),
]
WRONG = [
  ("2^{11}", "1024"),
  ("5!+1", "120"),
  (r"\binom{10}{4}", "120"),
  ("10^{7}", "1,000,000"),
  ("-(+3)", "3"),
  (r"\sqrt{2}", "1"),
  (r"\frac{\sqrt{2}}{2}", r"\frac12"),
  ("1023.99999999999999999999+0", "1024"),  # a float comparison would round this to 1024
  (r"5 \text{ or } 6", "5"),
  (r"\{5, 6\}", "5"),
  (r"5 \pm 1", "5"),
  ("x", "5"),
  (r"\infty", "1"),
  (r"\text{the answer}", "5"),
]


@pytest.fixture(scope="module")
def graded():
  cases = CORRECT + WRONG
  rewards_N, counts = rm.score_batch([B(p) for p, _ in cases], [g for _, g in cases], timeout_s=4)
  yield rewards_N, counts
  rm.shutdown()


def test_correct_closed_forms_score_1(graded):
  rewards_N, _ = graded
  got = dict(zip(CORRECT, rewards_N[: len(CORRECT)]))
  assert all(v == 1.0 for v in got.values()), got


def test_wrong_closed_forms_and_junk_score_0(graded):
  rewards_N, _ = graded
  got = dict(zip(WRONG, rewards_N[len(CORRECT) :]))
  assert all(v == 0.0 for v in got.values()), got


def test_closed_form_counter(graded):
  _, counts = graded
  assert counts["reward/closed_form"] == len(CORRECT + WRONG)
  assert counts["reward/fastpath"] == 0
  assert counts["reward/timeouts"] == 0 and counts["reward/worker_errors"] == 0


def test_plain_numbers_stay_on_the_fast_path():
  rewards_N, counts = rm.score_batch([B("1024"), B("1,024"), B("1025")], ["1024"] * 3)
  np.testing.assert_array_equal(rewards_N, [1, 1, 0])
  assert counts["reward/fastpath"] == 3 and counts["reward/closed_form"] == 0
  assert counts["reward/verifier_calls"] == 0


def test_routing():
  assert rm.fast_compare("2^{10}", "1024") is None
  assert rm.closed_form_target("2^{10}", "1024") == (1024, True)
  assert rm.closed_form_target(r"\frac{1}{2^2}", r"\frac14") == (sympy.Rational(1, 4), False)
  assert rm.closed_form_target("1024", "1024") is None  # plain number: fast path
  assert rm.closed_form_target("2^{10}", "3.5") is None  # decimal gold: math-verify
  assert rm.closed_form_target("2^{10}", r"50\%") is None
  assert rm.closed_form_target("2^{10}", r"\sqrt2") is None


@pytest.mark.parametrize(
  "pred", ["9^{9^{9^{9}}}", "9^{9^{9}}", "(10^{100})!", "100000!", r"\binom{3000000}{1500000}"]
)
def test_pathological_answers_are_guarded_before_the_worker(pred):
  t0 = time.monotonic()
  rewards_N, counts = rm.score_batch([B(pred)], ["1"], timeout_s=2)
  assert rewards_N[0] == 0 and counts["reward/guarded"] == 1
  assert counts["reward/verifier_calls"] == 0 and time.monotonic() - t0 < 1.0


@pytest.mark.parametrize("pred", [r"(5000!)^{10000}", "(2^{10000})^{10000}", "(3^{10000})^{1000}"])
def test_blowups_past_the_host_guards_are_refused_in_the_worker(pred):
  assert rm.guard_reason(pred) is None  # the regex guards let these through
  t0 = time.monotonic()
  rewards_N, counts = rm.score_batch([B(pred)], ["1"], timeout_s=4)
  assert rewards_N[0] == 0 and counts["reward/guarded"] == 1
  assert counts["reward/timeouts"] == 0 and time.monotonic() - t0 < 4.0


def test_timeouts_still_bound_the_closed_form_route(monkeypatch):
  # latex2sympy evaluates \binom while parsing (minutes for this one): only the worker's
  # timeouts stop it. A power tower is refused by the exact evaluator's size limits.
  monkeypatch.setattr(rm.guards, "guard_reason", lambda answer: None)
  preds = [r"\binom{3000000}{1500000}", "9^{9^{9^{9}}}", "2^{3}"]
  t0 = time.monotonic()
  rewards_N, counts = rm.score_batch([B(p) for p in preds], ["1", "1", "8"], timeout_s=1.5)
  np.testing.assert_array_equal(rewards_N, [0, 0, 1])
  assert counts["reward/timeouts"] == 1 and counts["reward/guarded"] == 1
  assert time.monotonic() - t0 < 10.0


def test_evaluate_is_exact_and_bounded():
  x = sympy.Symbol("x")
  ue = sympy.UnevaluatedExpr
  assert cf.evaluate(sympy.Pow(2, 10, evaluate=False)) == 1024
  assert cf.evaluate(sympy.factorial(ue(5))) == 120
  assert cf.exact_value(sympy.Eq(x, sympy.Pow(3, 2, evaluate=False))) == 9
  assert cf.exact_value(sympy.sqrt(2)) is None  # a number, not rational
  with pytest.raises(cf.NotClosedForm):
    cf.evaluate(x + 1)
  with pytest.raises(cf.NotClosedForm):
    cf.exact_value(sympy.FiniteSet(5, 6))
  with pytest.raises(cf.TooBig):
    cf.evaluate(sympy.Pow(3, cf.MAX_BITS, evaluate=False))
  with pytest.raises(cf.TooBig):
    cf.evaluate(sympy.factorial(ue(cf.MAX_FUNCTION_ARG + 1)))
  assert cf.decimals_to_fractions("2.50^{2}+.5") == r"(\frac{250}{100})^{2}+(\frac{5}{10})"
