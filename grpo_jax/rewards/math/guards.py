"""Size guards: refuse answers whose parsing or evaluation could run away, before sympy.

math-verify's own timeout is a SIGALRM that cannot interrupt C-level big-integer work (a
power tower hangs for minutes; math-verify issue #65), and very long or deeply nested input
makes the ANTLR parser slow. The worker pool's hard kill is the backstop; these guards make
the common pathological answers cost microseconds instead of a killed worker.

An answer is refused (reward 0, counted as ``reward/guarded``) when it has more than
``MAX_CHARS`` characters, a power tower of height > 2 or an inner exponent whose value is
above ``MAX_EXPONENT``, an integer literal with more than ``MAX_DIGITS`` digits, a factorial
of a number above ``MAX_FACTORIAL`` or of a non-literal, a binomial ``\\binom{n}{k}`` /
``{n \\choose k}`` whose ``n`` holds a power or a number above ``MAX_FACTORIAL`` (latex2sympy
evaluates it while parsing), more than ``MAX_BRACKETS`` brackets,
or brackets nested deeper than ``MAX_DEPTH``. Golds are trusted and not guarded; an answer
string-identical to its gold is accepted before any guard.
"""

import math
import re

MAX_CHARS = 1000
MAX_DIGITS = 1000
MAX_EXPONENT = 10_000
MAX_FACTORIAL = 5_000
MAX_BRACKETS = 200
MAX_DEPTH = 30

_DIGITS = re.compile(r"\d+")
_FACTORIAL = re.compile(r"(\d+|\}|\))\s*!")
_BINOM = re.compile(r"\\[dt]?binom\s*(?=\{)|\\choose\b")


def _group_end(s: str, i: int) -> int:
  """End (exclusive) of the bracketed group opening at ``s[i]`` (``{`` or ``(``), or len(s)."""
  open_c = s[i]
  close_c = "}" if open_c == "{" else ")"
  depth = 0
  for j in range(i, len(s)):
    if s[j] == open_c:
      depth += 1
    elif s[j] == close_c:
      depth -= 1
      if depth == 0:
        return j + 1
  return len(s)


def _group_before(s: str, close: int) -> str:
  """Text of the bracketed group whose closing ``}``/``)`` is at ``s[close]``."""
  close_c = s[close]
  open_c = "{" if close_c == "}" else "("
  depth = 0
  for j in range(close, -1, -1):
    if s[j] == close_c:
      depth += 1
    elif s[j] == open_c:
      depth -= 1
      if depth == 0:
        return s[j + 1 : close]
  return s[:close]


def _binomial_top(s: str, m: re.Match) -> str:
  """``n`` of ``\\binom{n}{k}`` (group after the match) or ``{n \\choose k}`` (text before)."""
  if m.group(0).endswith("choose"):
    depth = 0
    for j in range(m.start() - 1, -1, -1):
      depth += {"}": 1, "{": -1}.get(s[j], 0)
      if depth < 0:
        return s[j + 1 : m.start()]
    return s[: m.start()]
  return s[m.end() + 1 : _group_end(s, m.end()) - 1]


def _exponent_span(s: str, i: int) -> tuple[int, int]:
  """Span of the exponent after the ``^`` at ``s[i-1]``: a group, a number or one token."""
  while i < len(s) and s[i] == " ":
    i += 1
  if i >= len(s):
    return i, i
  if s[i] in "{(":
    return i, _group_end(s, i)
  m = re.match(r"\d+|\\[A-Za-z]+|.", s[i:])
  return i, i + len(m.group(0))


def _log10_value(exponent: str) -> float | None:
  """log10 of a literal exponent like ``{10^{10}}``, ``123`` or ``(2^5)``; None if symbolic."""
  e = exponent.strip("{}() ")
  if re.fullmatch(r"\d+", e):
    return math.log10(int(e)) if int(e) > 0 else 0.0
  m = re.fullmatch(r"\{?(\d+)\}?\s*\^\s*\{?(\d+)\}?", e)
  if m:
    base, power = int(m.group(1)), int(m.group(2))
    return power * math.log10(base) if base > 1 else 0.0
  return None


def tower_height(s: str) -> int:
  """Height of the tallest ``^`` tower in ``s`` (``2^{3}`` → 1, ``9^{9^{9}}`` → 2)."""
  best = 0
  i = s.find("^")
  while i >= 0:
    a, b = _exponent_span(s, i + 1)
    best = max(best, 1 + tower_height(s[a:b]))
    i = s.find("^", max(b, i + 1))
  return best


def _exponent_too_big(s: str) -> bool:
  i = s.find("^")
  while i >= 0:
    a, b = _exponent_span(s, i + 1)
    lg = _log10_value(s[a:b])
    if lg is not None and lg > math.log10(MAX_EXPONENT):
      return True
    i = s.find("^", i + 1)
  return False


def _nesting_depth(s: str) -> int:
  depth = best = 0
  for c in s:
    if c in "{([":
      depth += 1
      best = max(best, depth)
    elif c in "})]":
      depth -= 1
  return best


def guard_reason(answer: str) -> str | None:
  """Why ``answer`` must not reach sympy, or None when it is safe to verify."""
  if any(len(d) > MAX_DIGITS for d in _DIGITS.findall(answer)):
    return "huge_literal"
  if len(answer) > MAX_CHARS:
    return "too_long"
  if sum(answer.count(c) for c in "{}()[]") > MAX_BRACKETS or _nesting_depth(answer) > MAX_DEPTH:
    return "too_nested"
  if "^" in answer:
    if tower_height(answer) > 2:
      return "power_tower"
    if _exponent_too_big(answer):
      return "huge_exponent"
  for m in _BINOM.finditer(answer):
    top = _binomial_top(answer, m)
    if "^" in top or any(int(d) > MAX_FACTORIAL for d in _DIGITS.findall(top)):
      return "huge_binomial"
  for m in _FACTORIAL.finditer(answer):
    if m.group(1) in "})":
      # `(n+1)!` is fine; `(10^{100})!` is not: look inside the group the `!` closes.
      inner = _group_before(answer, m.start(1))
      if "^" in inner or any(int(d) > MAX_FACTORIAL for d in _DIGITS.findall(inner)):
        return "huge_factorial"
    elif int(m.group(1)) > MAX_FACTORIAL:
      return "huge_factorial"
  return None
