"""The math reward's verification battery and the units behind it.

Every case is (completion, gold, expected reward). The whole battery is graded in one
``score_batch`` call (one worker pool for the module), then asserted case by case. Cases are
grouped by what they exercise; the known failure modes of raw math-verify each have a case
(see the ``raw_failure`` group and the unit tests at the bottom).
"""

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from grpo_jax.rewards import math as rm
from grpo_jax.rewards.math import verify as rv


def B(x: str) -> str:
  """A completion that ends with a boxed answer."""
  return f"We simplify step by step.\nTherefore the final answer is $\\boxed{{{x}}}$."


T, F = 1.0, 0.0

CASES = {
  "fractions_decimals": [
    (B(r"\frac{1}{2}"), r"\frac{1}{2}", T),
    (B(r"\dfrac{1}{2}"), r"\frac12", T),
    (B("0.5"), r"\frac{1}{2}", T),
    (B(r"\frac{2}{4}"), r"\frac12", T),
    (B("1/2"), "0.5", T),
    (B(r"\frac{3}{4}"), "0.75", T),
    (B(r"\frac{3}{5}"), r"\frac{5}{3}", F),
    (B("0.25"), r"\frac{1}{3}", F),
    (B(r"\frac{-3}{4}"), r"-\frac{3}{4}", T),
    (B(r"-\frac34"), "-0.75", T),
    (B(r"\tfrac{7}{8}"), r"\frac{7}{8}", T),
    (B("0.333333"), r"\frac13", T),
    (B("0.33"), r"\frac13", F),
    (B("1.50"), r"\frac{3}{2}", T),
    (B(r"\frac{10}{4}"), "2.5", T),
    (B(".5"), r"\frac12", T),
    (B(r"\frac{1}{2}+\frac{1}{3}"), r"\frac56", T),
    (B(r"\frac{x+1}{2}"), r"\frac{1+x}{2}", T),
    (B(r"\frac{7}{3}"), r"2\frac{1}{3}", T),  # a mixed-number gold
    (B("2.25"), r"\frac{9}{4}", T),
  ],
  "radicals_pi": [
    (B(r"2\sqrt{3}"), r"2\sqrt{3}", T),
    (B(r"\sqrt{12}"), r"2\sqrt3", T),
    (B(r"\frac{\sqrt{3}}{2}"), r"\frac{1}{2}\sqrt{3}", T),
    (B(r"\frac{1}{\sqrt{2}}"), r"\frac{\sqrt{2}}{2}", T),
    (B(r"\sqrt{2}"), r"\sqrt{3}", F),
    (B(r"3\sqrt{2}"), r"\sqrt{18}", T),
    (B(r"\pi"), r"\pi", T),
    (B(r"2\pi"), r"\pi", F),
    (B(r"\pi/2"), r"\frac{\pi}{2}", T),
    (B("3.14159"), r"\pi", F),
    (B(r"4\pi"), r"4 \pi", T),
    (B(r"r^2\pi"), r"\pi r^2", T),
    (B(r"\sqrt{2}+\sqrt{3}"), r"\sqrt3+\sqrt2", T),
    (B(r"\frac{\sqrt{6}}{3}"), r"\sqrt{\frac{2}{3}}", T),
    (B(r"2+\sqrt{5}"), r"2-\sqrt{5}", F),
    (B(r"\sqrt{5}-1"), r"-1+\sqrt{5}", T),
    (B(r"3\sqrt(5)"), "3", F),
    (B(r"\frac{9\pi}{2}"), r"4.5\pi", T),
  ],
  "percentages": [
    (B(r"25\%"), "25", T),
    (B(r"25\%"), "0.25", T),
    (B(r"7.41\%"), "7.41", T),
    (B(r"50\%"), r"\frac{1}{2}", T),
    (B("0.5"), "50", F),
    (B("25"), r"25\%", T),
    (B(r"30\%"), r"25\%", F),
    ("So the rate grows.\nAnswer: 12.5%", "12.5", T),
    (B(r"12.5\%"), r"\frac{1}{8}", T),
  ],
  "units_text": [
    (B(r"204 \text{ cm}"), "204", T),
    (B(r"\text{5 apples}"), "5", T),
    ("Answer: 204 cm", "204", T),
    (B(r"12\text{ m}^2"), "12", T),
    (B(r"\$18.90"), "18.90", T),
    (B("18.9"), r"\$18.90", T),
    (B(r"\text{Evelyn}"), r"\text{Evelyn}", T),
    (B("Evelyn"), r"\text{Evelyn}", T),
    (B(r"\text{Monday}"), r"\text{Tuesday}", F),
    (B(r"5\text{ dollars}"), r"\$5", T),
    (B(r"100\text{ km/h}"), "100", T),
    (B(r"6 \text{ inches}"), "6", T),
    (B(r"7 \text{ cm}"), "8", F),
  ],
  "degrees": [
    (B(r"30^\circ"), "30", T),
    (B("30°"), "30", T),
    (B(r"30^{\circ}"), r"30^\circ", T),
    (B("45"), r"45^\circ", T),
    (B(r"60^\circ"), r"30^\circ", F),
    ("Answer: 90 degrees", "90", T),
    (B(r"120^\circ"), "120", T),
  ],
  "intervals": [
    (B("[2,5)"), "[2,5)", T),
    (B("(2,5)"), "[2,5)", F),
    (B("[2,5]"), "[2,5)", F),
    (B(r"(-\infty, 3]"), r"(-\infty,3]", T),
    (B(r"(-\infty,3)"), r"(-\infty,3]", F),
    (B(r"[1,\infty)"), r"(1,\infty)", F),
    (B(r"(0,1)\cup(2,3)"), r"(0,1) \cup (2,3)", T),
    (B(r"(2,3)\cup(0,1)"), r"(0,1)\cup(2,3)", T),
    (B(r"[5,\infty)"), r"x \ge 5", T),
    (B(r"x\le5"), r"x\ge5", F),
    (B(r"(0,1)"), r"[0,1)", F),
  ],
  "sets_tuples": [
    (B(r"\{1,2,3\}"), r"\{3,2,1\}", T),
    (B(r"\{1,2\}"), r"\{1,2,3\}", F),
    (B("1, 2"), "2, 1", T),
    (B("1, -2"), "-2, 1", T),
    (B("(1,2)"), "(1,2)", T),
    (B("(2,1)"), "(1,2)", F),
    (B(r"(3, \frac{\pi}{2})"), r"\left( 3, \frac{\pi}{2} \right)", T),
    (B("(1,2,3)"), "(1,2,3)", T),
    (B("(1,2,4)"), "(1,2,3)", F),
    (B("1,2,3"), "1, 2, 3", T),
    (B(r"\{-1, 1\}"), r"\pm 1", T),
    (B(r"(0.5, 2)"), r"(\frac12, 2)", T),
  ],
  "equations": [
    (B("x = 3"), "3", T),
    (B("3"), "x = 3", T),
    (B("x=4"), "3", F),
    (B("y = 2x + 1"), "y=2x+1", T),
    (B("y = 1 + 2x"), "y = 2x+1", T),
    (B("2x+1"), "y=2x+1", T),
    (B("y=2x-1"), "y=2x+1", F),
    (B("x = -2"), "-2", T),
    (B("a = 5"), "5", T),
    (B("y^2 + x^2 = 1"), "x^2+y^2=1", T),
    (B("x^2+y^2=4"), "x^2+y^2=1", F),
    (B(r"k = \frac{1}{2}"), r"\frac12", T),
    (B("3x-y+13=0"), "3x+4y+14=0", F),
  ],
  "multiple_boxes": [
    (r"First try \boxed{5}; redo gives \boxed{7}", "7", T),
    (r"First try \boxed{5}; redo gives \boxed{7}", "5", F),
    (r"So \boxed{3}. Wait, I made an error; correcting: \boxed{4}", "4", T),
    (r"\boxed{1} and \boxed{2}", "2", T),
    (r"The answer is \fbox{15}.", "15", T),
    (r"The answer is \boxed {9}.", "9", T),
    (r"\boxed{\boxed{8}}", "8", T),
    (r"\boxed{\frac{1}{2}} or rather \boxed{\frac{1}{3}}", r"\frac13", T),
    ("Answer: 5\nOn reflection: $\\boxed{6}$", "6", T),
    (r"<think>maybe \boxed{3}</think> The answer is \boxed{4}.", "4", T),
    (r"<think>maybe \boxed{3}</think> The answer is \boxed{4}.", "3", F),
    (r"The answer is \boxed{5", "5", F),
    (r"Got \boxed{2}, now checking: \boxed{3", "2", F),
  ],
  "answer_line": [
    ("Work...\nAnswer: 204", "204", T),
    ("Answer: $204$", "204", T),
    ("**Answer:** 204", "204", T),
    ("Answer:73", "73", T),
    ("Answer: 204.", "204", T),
    ("Answer: 073", "73", T),
    ("Answer: 73.0", "73", T),
    ("Answer: \\dfrac{3}{4}", r"\frac{3}{4}", T),
    ("answer: 0.5", r"\frac12", T),
    ("Final Answer: 42", "42", T),
    ("Answer:\n42", "42", T),
    ("Answer: x = 12", "12", T),
    ("Final Answer: The final answer is $5$. I hope it is correct.", "5", T),
    ("Answer: 3\nHmm, no.\nAnswer: 4", "4", T),
    ("Answer: 3\nHmm, no.\nAnswer: 4", "3", F),
  ],
  "thousands_separators": [
    (B("1,000"), "1000", T),
    (B("1{,}000"), "1000", T),
    (B("1000"), "1{,}000", T),
    (B(r"10,\!000"), "10000", T),
    (B("1,234,567"), "1234567", T),
    (B(r"1\,000"), "1000", T),
    (B("1,001"), "1000", F),
    ("Answer: 12,345", "12345", T),
    (B("1,000,000"), "10^6", T),
  ],
  "negative_scientific": [
    (B("-5"), "-5", T),
    (B("5"), "-5", F),
    (B("-5"), "5", F),
    (B("−5"), "-5", T),
    (B("-0.5"), r"-\frac12", T),
    (B(r"3.2\times 10^{27}"), "3.2e27", T),
    (B(r"3.2 \times 10^{27}"), "3.2e28", F),
    (B(r"6\times10^{23}"), "6e23", T),
    (B(r"1\times10^{-5}"), "1e-5", T),
    (B("10^{-5}"), "1e-5", T),
    (B(r"6.25\times10^{-7}"), "6.25e-7", T),
    (B(r"4.5\cdot 10^{33}"), "4.5e33", T),
    (B("3.2e27"), r"3.2 \times 10^{27}", T),
    (B(r"-\frac{1}{3}"), "-1./3", T),
    (B(r"-\frac{5}{2}"), "-2.5", T),
    (B(r"1.6\times10^{-19}"), "1.6e-19", T),
    (B(r"1.7\times10^{-19}"), "1.6e-19", F),
  ],
  "matrices": [
    (B(r"\begin{pmatrix}1&2\\3&4\end{pmatrix}"), r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", T),
    (B(r"\begin{bmatrix}1&2\\3&4\end{bmatrix}"), r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", T),
    (B(r"\begin{pmatrix}1&2\\3&5\end{pmatrix}"), r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", F),
    (B(r"\begin{pmatrix}1&3\\2&4\end{pmatrix}"), r"\begin{pmatrix}1&2\\3&4\end{pmatrix}", F),
    (B(r"\begin{pmatrix} 2 \\ -1 \end{pmatrix}"), r"\begin{pmatrix}2\\-1\end{pmatrix}", T),
    (B(r"\begin{pmatrix}\frac12\\1\end{pmatrix}"), r"\begin{pmatrix}0.5\\1\end{pmatrix}", T),
    (B(r"\begin{pmatrix}1&0\\0&1\end{pmatrix}"), r"\begin{pmatrix}1&0\\0&1\end{pmatrix}", T),
    (B(r"\begin{pmatrix}0&1\\1&0\end{pmatrix}"), r"\begin{pmatrix}1&0\\0&1\end{pmatrix}", F),
  ],
  "symbolic": [
    (B("x^2+2x+1"), "(x+1)^2", T),
    (B(r"\frac{n(n+1)}{2}"), r"\frac{n^2+n}{2}", T),
    (B(r"2^{n+1}"), r"2\cdot 2^n", T),
    (B("ab"), "ba", T),
    (B("e^{2}"), "e^2", T),
    (B(r"|x|"), r"|x|", T),
    (B("3+4i"), "4i+3", T),
    (B("3-4i"), "3+4i", F),
    (B(r"\ln 8"), r"3\ln 2", T),
    (B("x^2"), "x^3", F),
    (B("2x+2"), "2(x+1)", T),
  ],
  "wrong_answers": [
    (B("42"), "43", F),
    (B("0"), "1", F),
    (B(r"\frac{1}{2}"), "2", F),
    (B("x+1"), "x-1", F),
    (B(r"\sqrt{2}"), "2", F),
    (B("100"), "1000", F),
    (B("1000001"), "1000000", F),
    (B("100.005"), "100", F),
    (B(r"\text{yes}"), r"\text{no}", F),
    (B("-1"), "1", F),
    (B(r"\infty"), r"-\infty", F),
    (B(r"\emptyset"), r"\{0\}", F),
    (B(r"\frac{22}{7}"), r"\pi", F),
  ],
  "raw_failure": [
    # math-verify #14: evalf(chop=True) makes distinct tiny numbers equal.
    (B(r"\frac{1}{2001!}"), r"\frac{1}{1999!}", F),
    (B(r"\frac{1}{2^{99}}"), r"\frac{1}{2^{98}}", F),
    (B(r"\frac{\pi}{10^{30}}"), r"\frac{2\pi}{10^{30}}", F),
    (B(r"\frac{1}{1999!}"), r"\frac{1}{1999!}", T),
    # Hedged answers.
    ("Answer: 5 or 6", "5", F),
    ("Answer: 5, 6", "5", F),
    # Raw LaTeX golds (no $...$): `-2, 1` must not become 1; `2^{25}\cdot 26!` not 26.
    (B("1"), "-2, 1", F),
    (B("-2, 1"), "-2, 1", T),
    (B("26"), r"2^{25}\cdot 26!", F),
    (B(r"2^{25}26!"), r"2^{25}\cdot 26!", T),
    (B(r"\frac{9}{7}"), r"\dfrac{9}{7}", T),
    # e-notation golds.
    (B(r"3.2 \cdot 10^{27}"), "3.2e27", T),
    (B("3.2"), "3.2e27", F),
  ],
  "aime_integers": [
    (B("073"), "73", T),
    (B("1"), "001", T),
    (B("999"), "999", T),
    (B("0"), "0", T),
    (B("98"), "89", F),
    (B("27.0"), 27, T),
    (B("204"), 204, T),
    (B("27"), 27.0, T),
    (B("5.5"), 5, F),
    (B("2^{10}"), "1024", T),  # a closed form is evaluated exactly
    (B("2^{11}"), "1024", F),
    (B(r"5 \text{ or } 6"), "6", F),  # integer golds require a closed-form number
  ],
  "no_answer": [
    ("I don't know.", "5", F),
    ("", "5", F),
    ("The result is 5.", "5", F),
    ("So x is 5\nand we're done", "5", F),
    ("... so the value is 4", "4", F),
    ("$5$", "5", F),
    (r"\boxed{}", "0", F),
  ],
  "reward_hacking": [
    (B(r"5 \text{ or } 6"), "5", F),
    (B(r"\text{5 or 6}"), "5", F),
    (B("5, 6, 7"), "6", F),
    ("Answer: 1, 2, 3, 4, 5", "3", F),
    (B("x"), "5", F),
    (B(r"\text{the answer}"), "5", F),
    (B(r"5 \pm 1"), "5", F),
    (B(r"\{5, 6\}"), "5", F),
    (B(r"\{\frac12, \frac13\}"), r"\frac12", F),
  ],
  "malformed_latex": [
    (B(r"\frac{1}{"), "1", F),
    (r"\boxed{\frac{1}{2}", r"\frac12", F),
    (B("}{"), "1", F),
    (B(r"\sqrt"), "2", F),
    (B(r"\begin{pmatrix}1&2"), r"\begin{pmatrix}1&2\end{pmatrix}", F),
    (B(r"\left( 1,2"), "(1,2)", F),
    (B("((((1"), r"\frac12", F),
    (B(r"\frac{\frac{\frac}}"), r"\frac12", F),
    (B("^^^"), r"\sqrt2", F),
    (B("$$$"), r"\sqrt2", F),
    (B("\\\\"), r"\sqrt2", F),
    (B("1/0"), r"\frac12", F),
    (B(r"\frac{1}{0}"), r"\frac12", F),
    (B("0/0"), r"\frac12", F),
    (B(r"\text{"), r"\frac12", F),
    (B(r"\sqrt{"), r"\sqrt{2}", F),
    (B("x="), "x=3", F),
    (B("="), r"\frac12", F),
    (B(r"\int"), r"\pi", F),
    (B(r"\frac{1}}{2}"), r"\frac12", F),
  ],
  "enormous": [
    (B("9^{9^{9^{9}}}"), "1", F),
    (B("9^{9^{9^{9}}}"), r"\sqrt{2}", F),
    (B(r"\dfrac{5^{(5^{(5^{(5^5)})}-4)}-5}{16}"), r"\frac12", F),
    (B("10^{10^{10}}"), "10^{10^{10}}", T),
    (B("10^{10^{10}}+1"), "10^{10^{10}}", F),
    (B("(10^{100})!"), r"\frac12", F),
    (B("2^{10^6}"), "2^{999999}", F),
    (B("9" * 5000), "9" * 5000, T),
    (B("9" * 4999 + "8"), "9" * 5000, F),
    ("filler text. " * 8000 + r"\boxed{7}", "7", T),
    ("$" * 5000, "1", F),
    (B("(" * 100 + "1" + ")" * 100), r"\frac12", F),
    (B("+".join(["1"] * 2000)), r"\sqrt{2000}", F),
    (B("x^{x^{x^{x}}}"), "x", F),
    (B("2^{2^{10}}"), "2^{1024}", T),
    (B(r"999!\cdot 1000"), "1000!", T),
    ("Answer: " + "1" * 3000, "5", F),
    # Long runs of whitespace must not make any extraction/normalisation regex quadratic.
    ("answer" + " " * 20000, "1", F),
    ("Final Answer: final answer is" + " " * 20000 + "x", "1", F),
    (r"\boxed{5^" + " " * 20000 + "}", r"\sqrt2", F),
    (B("9" * 5000 + "e"), "1", F),
  ],
}

FLAT = [(g, i, *case) for g, cases in CASES.items() for i, case in enumerate(cases)]
TIMEOUT_S = 4.0


def test_host_side_steps_are_fast_on_every_case():
  for _, _, completion, gold, _ in FLAT:
    t0 = time.monotonic()
    pred, g = rm.prepare(completion, gold)
    if pred is not None:
      rm.fast_compare(pred, g)
      rm.guard_reason(pred)
    assert time.monotonic() - t0 < 0.25, completion[:80]


def test_battery_size():
  assert len(FLAT) >= 150
  for group in ["fractions_decimals", "matrices", "malformed_latex", "enormous", "raw_failure"]:
    assert len(CASES[group]) >= 5


@pytest.fixture(scope="module")
def graded():
  rm.get_pool(2)  # started once for the module
  completions = [c for _, _, c, _, _ in FLAT]
  golds = [g for _, _, _, g, _ in FLAT]
  t0 = time.monotonic()
  rewards_N, counts = rm.score_batch(completions, golds, timeout_s=TIMEOUT_S, num_workers=2)
  elapsed = time.monotonic() - t0
  yield rewards_N, counts, elapsed
  rm.shutdown()


@pytest.mark.parametrize("group,index", [(g, i) for g, i, *_ in FLAT])
def test_case(graded, group, index):
  rewards_N, _, _ = graded
  k = next(j for j, (g, i, *_) in enumerate(FLAT) if g == group and i == index)
  completion, gold, expected = FLAT[k][2:]
  assert rewards_N[k] == expected, (group, index, completion[-120:], gold[:60])


def test_battery_no_timeouts_no_crashes_and_fast(graded):
  rewards_N, counts, elapsed = graded
  assert rewards_N.shape == (len(FLAT),) and rewards_N.dtype == np.float32
  assert set(np.unique(rewards_N)) <= {0.0, 1.0}
  assert counts["reward/timeouts"] == 0
  assert counts["reward/worker_errors"] == 0
  assert counts["reward/gold_parse_failures"] == 0
  # Most of the battery is decided without sympy.
  assert counts["reward/fastpath"] > len(FLAT) // 3
  assert counts["reward/guarded"] >= 5
  assert elapsed < 20.0


# ---- extraction ---------------------------------------------------------------------------


@pytest.mark.parametrize(
  "text,expected",
  [
    (r"x \boxed{3} y \boxed{4}", "4"),
    (r"\boxed{\{1,2\}}", r"\{1,2\}"),
    (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
    (r"\fbox{5}", "5"),
    (r"\boxed 5 done", "5"),
    (r"\boxed{5", None),
    ("Answer: $12$.", "12"),
    ("**Final Answer:** 9", "9"),
    ("no answer here 42", None),
    ("<think>\\boxed{1}</think>Answer: 2", "2"),
    ("Answer: " + "1" * 20000, None),
    (r"\boxed{  }", None),
  ],
)
def test_extract_answer(text, expected):
  assert rm.extract_answer(text) == expected


# ---- gold normalisation ---------------------------------------------------------------------


@pytest.mark.parametrize(
  "gold,expected",
  [
    (27.0, "27"),
    (204, "204"),
    (0.125, "0.125"),
    ("$\\frac{1}{2}$", r"\frac{1}{2}"),
    (r"\boxed{5}", "5"),
    ("1{,}000", "1000"),
    ("1,000", "1000"),
    ("3.2e27", r"3.2\times10^{27}"),
    ("1e-5", r"1\times10^{-5}"),
    ("-1./3", "-1/3"),
    ("np.arcsin(10/13)", r"\arcsin(10/13)"),
    (r"\dfrac{9}{7}", r"\frac{9}{7}"),
    (["1", "2"], "1, 2"),
    ("2e", "2e"),
  ],
)
def test_normalize_gold(gold, expected):
  assert rm.normalize_gold(gold) == expected


def test_normalize_gold_rejects_non_answers():
  for bad in (True, float("nan"), float("inf")):
    with pytest.raises(ValueError):
      rm.normalize_gold(bad)


# ---- exact fast path ------------------------------------------------------------------------


def test_fast_path_is_exact_where_floats_are_not():
  # Distinct rationals that collide in float64 (and under evalf chop) stay distinct.
  big = 10**30
  assert 1 / big == 1 / (big + 1)
  assert rm.fast_compare(f"1/{big}", f"1/{big + 1}") is False
  assert rm.fast_compare(f"\\frac{{1}}{{{big}}}", f"1/{big}") is True
  assert rm.fast_compare("1000001", "1000000") is False


def test_fast_path_decides_only_plain_numbers():
  assert rm.fast_compare("3", "2") is False  # integer gold, plain number: decided here
  assert rm.fast_compare(r"\sqrt{4}", "2") is None  # a closed form: evaluated in the worker
  assert rm.fast_compare("0.333333", r"\frac13") is None  # inexact decimal: math-verify decides
  assert rm.fast_compare(r"\sqrt{2}", r"\sqrt{2}") is None  # gold not a plain number
  assert rm.is_integer_gold("073") and not rm.is_integer_gold("7.5")


def test_integer_golds_take_the_fast_path_or_the_closed_form_route():
  completions = [B("12"), B("13"), B(r"\sqrt{144}"), "Answer: 12 cm", "Answer: 12 or 13"]
  rewards_N, counts = rm.score_batch(completions, ["12"] * 5)
  np.testing.assert_array_equal(rewards_N, [1, 0, 1, 1, 0])
  assert counts["reward/fastpath"] == 3
  assert counts["reward/verifier_calls"] == counts["reward/closed_form"] == 2


# ---- guards ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
  "answer,reason",
  [
    ("9^{9^{9^{9}}}", "power_tower"),
    ("10^{10^{10}}", "huge_exponent"),
    ("2^{999999}", "huge_exponent"),
    ("(10^{100})!", "huge_factorial"),
    ("100000!", "huge_factorial"),
    ("1" * 1001, "huge_literal"),
    ("(" * 40 + ")" * 40, "too_nested"),
    ("x" * 1001, "too_long"),
    ("2^{2^{10}}", None),
    (r"\binom{10^{6}}{3}", "huge_binomial"),
    (r"{6000 \choose 2}", "huge_binomial"),
    (r"\binom{10}{3}", None),
    ("(n+1)!", None),
    (r"\frac{1}{2001!}", None),
  ],
)
def test_guards(answer, reason):
  assert rm.guard_reason(answer) == reason


# ---- the worker pool ------------------------------------------------------------------------


def test_hard_kill_replaces_a_stuck_worker():
  # A 370M-digit power the worker's soft alarm is not allowed to stop (soft > hard): the
  # parent must kill the worker at the deadline, score the item 0 and keep serving.
  pool = rv.VerifierPool(num_workers=2)
  try:
    t0 = time.monotonic()
    out = pool.check(
      [("1", "9^{9^{9}}"), ("2", "2"), ("x+1", "1+x")], timeout_s=1.5, soft_fraction=5.0
    )
    assert out == [("timeout", False), ("ok", True), ("ok", True)]
    assert pool.restarts == 1
    assert time.monotonic() - t0 < 15.0
    assert pool.check([("3", "3")]) == [("ok", True)]
  finally:
    pool.close()


def test_pool_size_follows_the_host_unless_given(monkeypatch):
  monkeypatch.setattr(rv.os, "sched_getaffinity", lambda pid: set(range(112)), raising=False)
  assert rv.host_num_workers(0) == rv.MAX_HOST_WORKERS  # a 112-core TPU host, capped
  monkeypatch.setattr(rv.os, "sched_getaffinity", lambda pid: {0, 5, 7}, raising=False)
  assert rv.host_num_workers(0) == 3  # the cores this process may use, not the machine's
  assert rv.host_num_workers(5) == 5
  with pytest.raises(ValueError, match="num_workers"):
    rv.host_num_workers(-1)
  try:
    assert rm.get_pool(0).num_workers == 3
    assert rm.get_pool(1).num_workers == 1  # resized: a new pool of the requested size
  finally:
    rm.shutdown()


def test_soft_timeout_counts_and_keeps_the_worker():
  pool = rv.VerifierPool(num_workers=1)
  try:
    out = pool.check([("1", "9^{9^{9}}")], timeout_s=3.0, soft_fraction=0.2)
    assert out == [("timeout", False)]
    assert pool.check([(r"\frac12", "0.5")]) == [("ok", True)]
  finally:
    pool.close()


def test_score_batch_counts_timeouts(monkeypatch):
  monkeypatch.setattr(rm.guards, "guard_reason", lambda answer: None)  # let the tower through
  rewards_N, counts = rm.score_batch(
    [B("9^{9^{9}}"), B(r"\sqrt{8}")], [r"\sqrt2", r"2\sqrt2"], timeout_s=3.0
  )  # the tower never finishes; 3 s leave sympy's check of √8 room on a loaded machine
  np.testing.assert_array_equal(rewards_N, [0, 1])
  assert counts["reward/timeouts"] == 1


def test_works_off_the_main_thread():
  out = {}

  def run():
    out["r"] = rm.score_batch([B(r"\sqrt{12}"), B(r"\sqrt{11}")], [r"2\sqrt3"] * 2)

  th = threading.Thread(target=run)
  th.start()
  th.join(60)
  rewards_N, counts = out["r"]
  np.testing.assert_array_equal(rewards_N, [1, 0])
  assert counts["reward/verifier_calls"] == 2


def test_score_scalar_and_metric_keys():
  assert rm.score(B(r"\frac{\sqrt3}{2}"), r"\frac{1}{2}\sqrt{3}") == 1.0
  assert rm.score("no answer", "1") == 0.0
  _, counts = rm.score_batch(["x", B("^^^")], ["1", r"\sqrt2"])
  assert set(rm.METRIC_KEYS) == set(counts)
  assert {"reward/timeouts", "reward/parse_failures", "reward/fastpath"} <= set(counts)
  assert counts["reward/parse_failures"] == 2 and counts["reward/no_answer"] == 1


def test_duplicate_pairs_are_verified_once():
  rewards_N, counts = rm.score_batch([B(r"\sqrt{12}")] * 6, [r"2\sqrt3"] * 6)
  assert rewards_N.tolist() == [1.0] * 6 and counts["reward/verifier_calls"] == 1


def test_worker_imports_neither_jax_nor_grpo_jax():
  code = (
    "import runpy, sys, os\n"
    "sys.stdin = open(os.devnull)\n"
    f"runpy.run_path({rv._WORKER_PATH!r}, run_name='__main__')\n"
    "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'grpo_jax', 'torch'))\n"
    "sys.stderr.write('MODULES:' + repr(bad) + '\\n')\n"
  )
  proc = subprocess.run(
    [sys.executable, "-c", code],
    capture_output=True,
    text=True,
    timeout=120,
    cwd=os.path.dirname(rv._WORKER_PATH),
  )
  assert '{"ready": true}' in proc.stdout
  assert "MODULES:[]" in proc.stderr, proc.stderr[-2000:]
