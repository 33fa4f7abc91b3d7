"""Exact integer/rational comparison that never touches sympy.

DAPO-Math-17K, AIME 2024/25/26 and AMC23 golds are all integers; MATH has many plain
fractions. For them the answer is decided here with Python ``Fraction`` arithmetic, which is
exact (no ``evalf(chop=True)`` tiny-number collapse) and cannot hang (no sympy, no big powers).

A number is read after stripping presentation only: ``$``, ``\\text{...}`` wrappers, a trailing
run of unit words on the whitelist of ``units.py`` (``5\\text{ cm}^2``, ``5 km/h``,
``5 percent`` reads as ``5\\%``), ``^\\circ`` (and a C or F after it), currency, thousands
separators (``1,000`` / ``1{,}000`` / ``1\\,000``), a leading ``x =``, a trailing full stop,
leading zeros. Accepted shapes: ``-12``, ``3.50``, ``.5``, ``7/8``, ``\\frac{7}{8}``,
``-\\frac{7}{8}``, ``\\frac78``, each optionally followed by ``%``. Words that change the
number are not units and stay: ``5x``, ``5 \\text{ or more}``, ``\\text{at least } 5``,
``5 \\text{ or } 6`` are not plain numbers (see ``units.py`` for the rule).

Percent: when exactly one side carries ``%``, both readings are accepted (``7.41\\%`` vs
``7.41``; ``50\\%`` vs ``\\frac12``). Without a ``%`` sign there is no ×100 rule (``0.5`` is
not ``50``).

Policy (``fast_compare``): when both sides are plain numbers an integer gold is decided here
(True on exact equality, else False). For other rational golds the fast path returns True on
exact equality and False only when both sides are exact (no decimal point); otherwise it
defers (None) to math-verify, whose 6-decimal rounding accepts ``0.333333`` for ``\\frac13``.
A prediction that is not a plain number (``2^{10}``, ``5!``, ``\\binom{10}{3}``, ``-(-3)``) is
not scored 0 here, except two numbers side by side (``5 6``, ``5 \\quad 6``: several
candidates for one number): it defers (None), and for an exact gold (integer or fraction, no
``%``) ``closed_form_target`` gives the value that the worker's exact closed-form route
(``closed_form.py``) compares it with. With an integer gold that route is strict: an answer
that is not a closed-form number (``5 or 6``, ``\\{5, 6\\}``, ``x``, ``5x``) scores 0, as in
the AIME/DAPO answer format. The worker parses answers without math-verify's unit removal,
which drops any trailing ``\\text{...}`` and words such as "more" or "less": the words kept
here reach it and make the answer unequal. An integer gold too long for ``int()`` is decided
here too: only its digit string matches.
"""

import re
from fractions import Fraction
from typing import NamedTuple

from grpo_jax.rewards.math import units

# Python refuses int() on longer digit strings (3.11+); beyond this compare digit strings.
_MAX_INT_DIGITS = 4000

_INT = r"[+-]?\d+"
_DEC = r"[+-]?(?:\d+\.\d*|\.\d+)"
_FRAC_TEX = re.compile(r"^([+-]?)\\frac\{\s*([+-]?\d+)\s*\}\{\s*([+-]?\d+)\s*\}$")
_FRAC_TEX_SHORT = re.compile(r"^([+-]?)\\frac(\d)(\d)$")
_FRAC_SLASH = re.compile(rf"^({_INT})\s*/\s*({_INT})$")
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_TEXT_CMD = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_ASSIGN = re.compile(r"^[A-Za-z](?:_\{?\w+\}?)?\s*=\s*(?!.*=)")
# A degree sign, and a C or F right after it (`30^\circ C`).
_DEGREE = re.compile(
  r"(?:\^\s*(?:\{\s*)?\\circ(?:\s*\})?|\\circ|°|\\degree)(?:\s*(?:[CF](?![A-Za-z])|\{\s*[CF]\s*\}))?"
)
# Plain numbers apart by spaces: a thousands grouping (`1 000`) or several numbers (`5 6`).
_UNSIGNED = r"(?:\d+(?:\.\d*)?|\.\d+)"
_SIDE_BY_SIDE = re.compile(rf"[+-]?{_UNSIGNED}(?:\s+[+-]?{_UNSIGNED})+")
_SPACE_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(?:\s+\d{3})+(?:\.\d+)?$")


class Num(NamedTuple):
  """A parsed plain number: exact value, whether written exactly, percent sign, digits."""

  value: Fraction | None  # None only for integers too long for int()
  exact: bool  # no decimal point
  percent: bool
  digits: str  # canonical integer digits (with sign) when value is an integer, else ""


def _strip_presentation(s: str) -> tuple[str, bool]:
  s = s.strip()
  s = _TEXT_CMD.sub(lambda m: " " + m.group(1) + " ", s)
  s = s.replace("\\$", "").replace("$", "").replace("{,}", "").replace("\\!", "")
  s = _DEGREE.sub("", s)
  s = re.sub(r"(?<!\\)\\[,;: ]", " ", s).strip()
  s = _ASSIGN.sub("", s)
  s, percent = units.split_unit_tail(s)
  if s.endswith("\\%") or s.endswith("%"):
    percent = True
    s = s[:-2] if s.endswith("\\%") else s[:-1]
    s = s.strip()
  if s.endswith(".") and re.match(r"^[+-]?\d+\.$", s):
    s = s[:-1]
  if s.startswith("{") and s.endswith("}"):
    s = s[1:-1].strip()
  return s, percent


def _side_by_side(s: str) -> bool:
  """``5 6`` (``5 \\quad 6``): numbers apart by spaces that are not thousands groups."""
  return bool(_SIDE_BY_SIDE.fullmatch(s)) and not _SPACE_THOUSANDS.match(s)


def _canon_int(s: str) -> str:
  sign = "-" if s.startswith("-") else ""
  digits = s.lstrip("+-").lstrip("0") or "0"
  return ("" if digits == "0" else sign) + digits


def parse_number(s: str) -> Num | None:
  """Read ``s`` as a plain rational number, or None if it is anything else."""
  if not isinstance(s, str) or len(s) > 20000:
    return None
  s, percent = _strip_presentation(s)
  if _side_by_side(s):
    return None
  s = s.replace(" ", "")
  if _THOUSANDS.match(s):
    s = s.replace(",", "")
  if re.fullmatch(_INT, s):
    digits = _canon_int(s)
    if len(digits) > _MAX_INT_DIGITS:
      return Num(None, True, percent, digits)
    return Num(Fraction(int(digits)), True, percent, digits)
  if len(s) > _MAX_INT_DIGITS:
    return None
  if re.fullmatch(_DEC, s):
    v = Fraction(s)
    return Num(v, False, percent, str(v.numerator) if v.denominator == 1 else "")
  m = _FRAC_TEX.match(s) or _FRAC_TEX_SHORT.match(s)
  if m:
    sign, a, b = m.groups()
    num, den = int(a), int(b)
  else:
    m = _FRAC_SLASH.match(s)
    if not m:
      return None
    sign, num, den = "", int(m.group(1)), int(m.group(2))
  if den == 0:
    return None
  v = Fraction(num, den) * (-1 if sign == "-" else 1)
  return Num(v, True, percent, str(v.numerator) if v.denominator == 1 else "")


def _values(n: Num, other_has_percent: bool) -> list[Fraction]:
  vals = [n.value]
  if n.percent and not other_has_percent:
    vals.append(n.value / 100)
  return vals


def fast_compare(pred: str, gold: str) -> bool | None:
  """Exact verdict when both sides are plain numbers; None means "not decided here".

  Args:
    pred: the extracted answer (``extract_answer`` output).
    gold: the normalised gold (``normalize_gold`` output).
  """
  g = parse_number(gold)
  if g is None:
    return None
  gold_is_int = bool(g.digits) and g.exact and not g.percent
  p = parse_number(pred)
  if p is None:  # not a plain number: the closed-form route or math-verify decides
    if g.value is None or (len(pred) <= 20000 and _side_by_side(_strip_presentation(pred)[0])):
      return False  # a digit string too long for int(); several numbers for one
    return None
  if g.value is None or p.value is None:  # an integer too long for int(): compare digits
    return bool(g.digits) and g.digits == p.digits and g.percent == p.percent
  gv = _values(g, p.percent)
  pv = _values(p, g.percent)
  if any(a == b for a in gv for b in pv):
    return True
  if gold_is_int or (g.exact and p.exact):
    return False
  return None


def closed_form_target(pred: str, gold: str) -> tuple[Fraction, bool] | None:
  """``(gold value, strict)`` when ``pred`` goes to the exact closed-form route, else None.

  The route applies to an exact gold (an integer or a fraction written without a decimal
  point or ``%``) and a ``pred`` that is not a plain number; ``strict`` (integer gold) means an
  answer that is not a closed-form number scores 0 instead of going on to math-verify.
  """
  g = parse_number(gold)
  if g is None or g.value is None or not g.exact or g.percent or parse_number(pred) is not None:
    return None
  return g.value, g.value.denominator == 1


def is_integer_gold(gold: str) -> bool:
  """True when ``gold`` reads as a plain integer (the AIME/AMC/DAPO answer shape)."""
  g = parse_number(gold)
  return g is not None and bool(g.digits) and g.exact and not g.percent
