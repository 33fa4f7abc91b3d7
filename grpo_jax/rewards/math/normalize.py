"""String normalisation for golds and extracted answers, before any comparison.

Golds come from datasets in many shapes; math-verify misreads several of them if passed raw
(verifier notes §2.3): Python e-notation ``3.2e27`` becomes 3.2·e·27, Minerva's ``-1./3`` and
``np.arcsin(10/13)`` are not LaTeX, ``1{,}000`` and ``10,\\!000`` carry thousands separators,
numeric golds arrive as int/float (``27.0``). ``normalize_gold`` turns each into one LaTeX
string; the verifier later wraps it in ``\\boxed{}`` so it is never read as free text.

``clean_latex`` is the light cleanup shared by golds and predictions: spacing commands,
``\\dfrac``/``\\tfrac``, ``\\left``/``\\right``, Unicode minus signs (and the dashes written
as one: figure, en and em dash, small and fullwidth hyphen-minus), degree signs,
``\\varnothing``. It never changes a value.
"""

import math
import numbers
import re

# `\d+(?:\.\d*)?`, not `\d+\.?\d*`: the latter splits a long digit run O(n^2) ways on failure.
_E_NOTATION = re.compile(r"(?<![\w.\\])([+-]?(?:\d+(?:\.\d*)?|\.\d+))[eE]([+-]?\d+)(?![\w.])")
_PY_TRAILING_DOT = re.compile(r"(?<![\w.])(\d+)\.(?![\d\w])")
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
# Not after a backslash: `\\ ` is a matrix row break, not a space.
_SPACING = re.compile(r"(?<!\\)\\[,;:! ]|\\q?quad\b|~")
# Dashes used as a minus sign: U+2212 minus, U+2010/2011 hyphens, U+2012 figure dash, U+2013
# en dash, U+2014 em dash, U+FE63 small and U+FF0D fullwidth hyphen-minus.
_MINUS = "\u2212\u2010\u2011\u2012\u2013\u2014\ufe63\uff0d"
_UNICODE = {
  **dict.fromkeys(_MINUS, "-"),
  "×": r"\times ",
  "·": r"\cdot ",
  "π": r"\pi ",
  "∞": r"\infty ",
  "√": r"\sqrt",
  "≤": r"\le ",
  "≥": r"\ge ",
  "°": r"^\circ",
  "\u00a0": " ",
}


def number_to_string(x) -> str:
  """Canonical string of a numeric gold: ints as digits, integral floats without ``.0``."""
  if isinstance(x, bool):
    raise ValueError("boolean is not a math answer")
  if isinstance(x, numbers.Integral):
    return str(int(x))
  if isinstance(x, numbers.Real):
    f = float(x)
    if not math.isfinite(f):
      raise ValueError(f"non-finite numeric answer {f!r}")
    if f.is_integer() and abs(f) < 1e16:
      return str(int(f))
    return repr(f)
  raise TypeError(f"not a number: {type(x).__name__}")


def clean_latex(s: str) -> str:
  """Value-preserving cleanup applied to both sides (see module docstring)."""
  for k, v in _UNICODE.items():
    s = s.replace(k, v)
  s = s.replace("{,}", "").replace(",\\!", "")
  s = _SPACING.sub(" ", s)
  s = re.sub(r"\\[dt]frac(?![A-Za-z])", r"\\frac", s)
  s = re.sub(r"\\(?:left|right|big|Big|bigg|Bigg)(?![A-Za-z])", "", s)
  s = s.replace(r"\displaystyle", "").replace(r"\varnothing", r"\emptyset")
  s = re.sub(r"\\text\{\s*\}", "", s)
  s = re.sub(r"\s+", " ", s)
  return s.strip()


def _unwrap(s: str) -> str:
  """Drop math delimiters and one whole-string ``\\boxed{...}`` around a gold."""
  changed = True
  while changed:
    changed = False
    s = s.strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
      if len(s) >= len(left) + len(right) + 1 and s.startswith(left) and s.endswith(right):
        s, changed = s[len(left) : -len(right)], True
    m = re.match(r"^\\(?:boxed|fbox)\s*\{", s)
    if m and s.endswith("}"):
      depth, ok = 0, True
      for i in range(m.end() - 1, len(s)):
        if s[i] == "{" and s[i - 1] != "\\":
          depth += 1
        elif s[i] == "}" and s[i - 1] != "\\":
          depth -= 1
          if depth == 0 and i != len(s) - 1:
            ok = False
            break
      if ok:
        s, changed = s[m.end() : -1], True
  return s


def _pythonic_to_latex(s: str) -> str:
  """Minerva-style Python golds: ``np.`` prefixes, ``**``, ``1./3``, ``sqrt(2)``."""
  s = s.replace("np.pi", r"\pi ").replace("math.pi", r"\pi ")
  s = re.sub(r"\b(?:np|math)\.", "", s)
  s = s.replace("**", "^")
  s = _PY_TRAILING_DOT.sub(r"\1", s)
  s = re.sub(r"(?<!\\)\b(sqrt|arcsin|arccos|arctan|sin|cos|tan|log|exp)\(", r"\\\1(", s)
  return s


def expand_e_notation(s: str) -> str:
  r"""``3.2e27`` → ``3.2\times10^{27}``; ``1e-5`` → ``1\times10^{-5}``. Leaves ``2e`` alone."""
  if "e" not in s and "E" not in s:
    return s
  return _E_NOTATION.sub(lambda m: f"{m.group(1).rstrip('.')}\\times10^{{{int(m.group(2))}}}", s)


def normalize_gold(gold) -> str:
  """One LaTeX string for a dataset gold of any common shape.

  ``27.0`` → ``27``; ``"$\\frac{1}{2}$"`` → ``\\frac{1}{2}``; ``"\\boxed{5}"`` → ``5``;
  ``"1{,}000"``/``"1,000"`` → ``1000``; ``"3.2e27"`` → ``3.2\\times10^{27}``;
  ``"np.arcsin(10/13)"`` → ``\\arcsin(10/13)``; ``"-1./3"`` → ``-1/3``.
  A list or tuple of answers is joined with ``", "``.
  """
  if isinstance(gold, (list, tuple)):
    return ", ".join(normalize_gold(g) for g in gold)
  if not isinstance(gold, str):
    return number_to_string(gold)
  s = _unwrap(clean_latex(gold))
  if "np." in s or "math." in s or "**" in s or re.search(r"\d\./", s):
    s = _pythonic_to_latex(s)
  s = expand_e_notation(s)
  return strip_thousands(clean_latex(s))


def strip_thousands(s: str) -> str:
  """``1,234,567`` → ``1234567`` when the whole string is one separated number; else ``s``."""
  if _THOUSANDS.match(s.replace(" ", "")):
    return s.replace(",", "").replace(" ", "")
  return s


def canonical(s: str) -> str:
  """Whitespace-free form used for the identical-strings shortcut; a space between two digits
  stays (``5 6``, two numbers, is not ``56``)."""

  def gap(m: re.Match) -> str:
    i, j = m.start(), m.end()
    return " " if 0 < i and j < len(s) and s[i - 1].isdigit() and s[j].isdigit() else ""

  return re.sub(r"\s+", gap, s)
