"""Presentation around a number still reads as the number: units on the whitelist, degree
signs, currency, percent, and the Unicode dashes written as a minus sign. The answers that
change a number are ``test_math_gaming.py``.

Every case is (answer, gold, expected reward), graded through ``score_batch`` in one call.
"""

import numpy as np
import pytest

from grpo_jax.rewards import math as rm
from grpo_jax.rewards.math import units
from tests.rewards import grading_battery as battery
from tests.rewards.grading_battery import F, T
from tests.rewards.grading_battery import boxed as B

CASES = {
  "units_accepted": [
    (r"5\text{ cm}", "5", T),
    (r"5 \text{ cm}^2", "5", T),
    (r"5\text{ cm}^{2}", "5", T),
    (r"5\,\text{cm}^3", "5", T),
    (r"5\ \text{meters}", "5", T),
    (r"5^\circ", "5", T),
    (r"5^{\circ}", "5", T),
    (r"30^\circ C", "30", T),
    (r"30^{\circ}\text{C}", "30", T),
    (r"5 \text{ degrees}", "5", T),
    (r"\$5", "5", T),
    (r"\$5.50", "5.5", T),
    ("5 dollars", "5", T),
    (r"5 \text{ cents}", "5", T),
    (r"5\%", "5", T),
    (r"5 \text{ percent}", "5", T),
    (r"5 \text{ percent}", "0.05", T),
    (r"5 \text{ km/h}", "5", T),
    ("5 km/h", "5", T),
    ("5 m/s", "5", T),
    (r"5 \text{ miles per hour}", "5", T),
    ("5 mph", "5", T),
    ("5 m", "5", T),
    (r"5\text{ m}", "5", T),
    (r"5\text{m}", "5", T),
    (r"5\mathrm{m}", "5", T),
    ("5 s", "5", T),
    ("5 L", "5", T),
    (r"5 \text{ g}", "5", T),
    ("5cm", "5", T),
    (r"5 \mathrm{kg}", "5", T),
    (r"5 \text{ mL}", "5", T),
    (r"5 \text{ liters}", "5", T),
    (r"5 \text{ square units}", "5", T),
    (r"5 \text{ sq. ft.}", "5", T),
    (r"5 \text{ inches}", "5", T),
    (r"5 \text{ feet}", "5", T),
    ("5 ft", "5", T),
    (r"5 \text{ seconds}", "5", T),
    (r"5 \text{ min}", "5", T),
    (r"5 \text{ hr}", "5", T),
    (r"5 \text{ hours}", "5", T),
    (r"5 \text{ days}", "5", T),
    (r"5 \text{ weeks}", "5", T),
    (r"5 \text{ years}", "5", T),
    (r"5 \text{ units}", "5", T),
    (r"5 \text{ ways}", "5", T),
    (r"5 \text{ apples}", "5", T),
    ("5th", "5", T),
    (r"5\text{.}", "5", T),
    (r"x = 5 \text{ cm}", "5", T),
    (r"\frac{5}{2} \text{ cm}", "2.5", T),
    (r"2.5 \text{ cm}", r"\frac52", T),
    (r"2^{10} \text{ ways}", "1024", T),
    (r"2\sqrt{3} \text{ cm}", r"2\sqrt{3}", T),
    (r"2\sqrt{3}\ \mathrm{cm}", r"2\sqrt{3}", T),
    (r"4\pi \text{ square units}", r"4\pi", T),
    (r"\frac{\pi}{2} \text{ radians}", r"\frac{\pi}{2}", T),
    (r"10\sqrt{2} \textbf{ inches}", r"10\sqrt{2}", T),
    (r"x^2 \text{ cm}^2", "x^2", T),
    (r"6 \text{ cm}", "5", F),
    (r"5 \text{ cm}", "6", F),
    (r"2\sqrt{3} \text{ cm}", r"3\sqrt{2}", F),
  ],
  "unicode_minus": [
    ("\u20125", "-5", T),  # figure dash
    ("\u20135", "-5", T),  # en dash
    ("\u20145", "-5", T),  # em dash
    ("\u22125", "-5", T),  # minus sign
    ("\uff0d5", "-5", T),  # fullwidth hyphen-minus
    ("\ufe635", "-5", T),  # small hyphen-minus
    ("\u20105", "-5", T),  # hyphen
    ("\u20125", "5", F),
    ("\u2014\\frac{1}{2}", "-0.5", T),
    ("\uff0d2.5", "-2.5", T),
    ("\ufe633", "-3", T),
    ("\u20122^{3}", "-8", T),
    ("x \u2012 1", "x-1", T),
    ("-5", "\u22125", T),
    ("-5", "\u20145", T),
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
  assert all(len(cases) >= 15 for cases in CASES.values())
  battery.check_clean(graded[1])


def test_words_that_change_the_number_are_not_stripped():
  assert units.split_unit_tail(r"5 \text{ cm}^2") == ("5", False)
  assert units.split_unit_tail("5 percent") == ("5", True)
  assert units.split_unit_tail("5 km/h") == ("5", False)
  assert units.split_unit_tail(r"5x \text{ cm}") == ("5x", False)  # the variable stays
  for kept in ["5x", "5m", "5 x", r"5 \text{ or more}", r"5 \text{ cm or more}", "cm", "x^2"]:
    assert units.split_unit_tail(kept) == (kept, False)
  assert rm.parse_number("5x") is None and rm.parse_number(r"5 \text{ or more}") is None
  assert rm.parse_number(r"5\text{ cm}").value == 5 and rm.parse_number("5 s").value == 5


@pytest.mark.parametrize(
  "answer",
  ["5" + " cm" * 20000, "5 " + "x " * 20000 + "cm", "a" * 20000, r"5 \text{" + " cm" * 5000 + "}"],
  ids=["units", "variables", "letters", "text"],
)
def test_unit_tail_on_long_answers(answer):
  # The tail is searched within the last tokens only (one regex pass, no nested repetition), so
  # these return at once; a backtracking pattern would not return at all.
  text, is_percent = units.split_unit_tail(answer)
  assert not is_percent and text.startswith(answer[:1])
  assert rm.parse_number(answer[:20000]) is None


def test_percent_rule_still_applies():
  rewards_N, _ = rm.score_batch([B(r"5\%"), B("5 percent"), B(r"5\%")], ["0.05", "0.05", "0.5"])
  np.testing.assert_array_equal(rewards_N, [1, 1, 0])
