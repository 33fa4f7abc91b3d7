"""Answers that change the meaning of a number score 0: a variable glued to it, words that
bound or negate it, several candidates for it. Presentation around it is ``test_math_units.py``.

Every case is (answer, gold, expected reward), graded through ``score_batch`` (the reward's
full path: fast path, closed-form route and math-verify in the worker) in one call. The
rules are stated in ``grpo_jax/rewards/math/units.py`` and ``fastpath.py``.
"""

import pytest

from grpo_jax.rewards import math as rm
from grpo_jax.rewards.math import verify as rv
from tests.rewards import grading_battery as battery
from tests.rewards.grading_battery import F, T

CASES = {
  # A letter glued to the number (or a lone letter after it) is a variable, not a unit.
  "glued_variables": [
    ("5x", "5", F),
    ("2n", "2", F),
    ("3y^2", "3", F),
    (r"\frac{1}{2}x", r"\frac{1}{2}", F),
    (r"\frac{1}{2}x", "0.5", F),
    ("0.5x", "0.5", F),
    ("5 x", "5", F),
    ("7 n", "7", F),
    ("5k", "5", F),
    ("5ab", "5", F),
    ("5m", "5", F),  # single-letter units only apart from the number
    ("5g", "5", F),
    ("5c", "5", F),
    ("5t", "5", F),
    ("5 h", "5", F),
    ("5m/s", "5", F),
    (r"2^{10}c", "1024", F),
    (r"2^{10} t", "1024", F),
    (r"\frac{1}{2} c", r"\frac12", F),
    ("5x", "5x", T),
    ("2 x", "2x", T),
  ],
  "bounding_words": [
    (r"5 \text{ or more}", "5", F),
    (r"3 \text{ is wrong}", "3", F),
    (r"\text{at least } 5", "5", F),
    ("at least 5", "5", F),
    (r"5 \text{ or fewer}", "5", F),
    (r"\text{not } 5", "5", F),
    ("not 5", "5", F),
    (r"5 \text{ at most}", "5", F),
    ("5 more", "5", F),
    ("5 less", "5", F),
    (r"5 \text{ less}", "5", F),
    (r"5 \text{ or above}", "5", F),
    (r"5 \text{ (or more)}", "5", F),
    (r"\text{maybe } 5", "5", F),
    (r"\text{approximately } 5", "5", F),
    (r"5 \text{ is correct}", "5", F),
    (r"5 \text{ million}", "5", F),
    (r"5 \mathrm{ or more}", "5", F),
    (r"5 \mbox{ or more}", "5", F),
    (r"5 \textbf{ or more}", "5", F),
    (r"5~\text{or more}", "5", F),
    (r"5 \text{ cm or more}", "5", F),
    (r"5 \text{ cm} \text{ or more}", "5", F),
    (r"5 \% \text{ or more}", "5", F),
    (r"2.5 \text{ or more}", "2.5", F),
    (r"\frac{1}{2} \text{ or less}", r"\frac{1}{2}", F),
    (r"2^{10} \text{ or more}", "1024", F),
    (r"2^{10} more", "1024", F),
    (r"\sqrt{2} \text{ or more}", r"\sqrt{2}", F),
    (r"\sqrt{2} \mbox{ at least}", r"\sqrt2", F),
  ],
  "several_candidates": [
    ("5, 6", "5", F),
    ("5 or 6", "5", F),
    (r"5 \text{ or } 6", "5", F),
    (r"5 \text{ or }6", "6", F),
    ("5; 6", "5", F),
    (r"\{5,6\}", "5", F),
    (r"5 \quad 6", "5", F),
    (r"6 \quad 5", "5", F),
    ("5 6", "5", F),
    (r"5 \text{ and } 6", "6", F),
    (r"5 \\ 6", "6", F),
    ("5 | 6", "6", F),
    (r"5 \lor 6", "5", F),
    (r"5\text{ cm}, 6\text{ cm}", "5", F),
    (r"5 \text{ cm or } 6 \text{ cm}", "5", F),
    (r"\begin{cases}5\\6\end{cases}", "5", F),
    (r"5 \quad 6", "56", F),
    ("5 6", "56", F),
    ("5,6", "56", F),
    ("2.5, 3", "2.5", F),
    (r"2.5 \text{ or } 3", "2.5", F),
    (r"\frac12, \frac13", r"\frac12", F),
    (r"\frac12 \text{ or } \frac13", r"\frac12", F),
    # Thousands separators and tuple golds are not several candidates.
    ("1,000", "1000", T),
    ("1{,}000", "1000", T),
    (r"1\,000", "1000", T),
    ("1 000", "1000", T),
    ("12,345,678", "12345678", T),
    ("12 345 678", "12345678", T),
    (r"1,000 \text{ dollars}", "1000", T),
    ("1,001", "1000", F),
    ("(1,2)", "(1,2)", T),
    ("(3, 4)", "(3,4)", T),
    ("1, 2", "2, 1", T),
    ("(2,1)", "(1,2)", F),
  ],
}

FLAT = battery.flatten(CASES)


@pytest.fixture(scope="module")
def graded():
  yield battery.grade(FLAT)
  rm.shutdown()


@pytest.mark.parametrize("group,index", [(g, i) for g, i, *_ in FLAT])
def test_case(graded, group, index):
  battery.check_case(graded[0], FLAT, group, index)


def test_battery_sizes_and_no_failures(graded):
  assert all(len(cases) >= 20 for cases in CASES.values())
  battery.check_clean(graded[1])


def test_routing_of_gamed_answers():
  assert rm.fast_compare("5x", "5") is None  # not a plain number: the closed-form route
  assert rm.closed_form_target("5x", "5") == (5, True)
  assert rm.fast_compare("5 6", "56") is False  # two numbers, decided here
  assert rm.fast_compare("1 000", "1000") is True


def test_worker_keeps_the_words_math_verify_would_drop():
  # math-verify's unit normalisation removes any trailing \text{...} and words like "more":
  # the worker parses answers without it, on both of its routes.
  pool = rv.VerifierPool(num_workers=1)
  try:
    out = pool.check(
      [
        (r"\sqrt{2}", r"\sqrt{2} \text{ or more}"),
        ("2.5", "2.5 more"),
        ("5", r"5 \text{ or more}", {"value": "5", "strict": True}),
        (r"\frac12", r"\frac12 \text{ or less}", {"value": "1/2", "strict": False}),
        (r"\sqrt{2} \text{ cm}", r"\sqrt{2}"),  # golds keep math-verify's unit removal
      ],
      timeout_s=4,
    )
    assert out == [("ok", False)] * 4 + [("ok", True)]
  finally:
    pool.close()
