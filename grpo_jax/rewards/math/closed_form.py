"""Exact evaluation of a closed-form numeric answer: ``2^{10}``, ``5!``, ``\\binom{10}{3}``.

Used by the worker (``worker.py``) for a plain-rational gold and an answer that is not a plain
number. The answer is parsed by latex2sympy (unevaluated), decimal literals first rewritten as
exact fractions (``1.5`` → ``\\frac{15}{10}``), and the tree is rebuilt bottom-up with sympy's
exact Integer/Rational arithmetic — never ``evalf``. Size limits are checked on the evaluated
arguments BEFORE each node is computed, so a blow-up is refused instead of computed:

  * ``b^x`` with rational ``b = p/q``, ``x``: refused when |x| · log2(max(|p|, q)) > MAX_BITS;
  * any other function of a rational argument above MAX_FUNCTION_ARG (``n!``, ``\\binom{n}{k}``,
    ``\\Gamma(n)``) is refused;
  * every intermediate rational must fit in MAX_BITS bits (numerator and denominator).

Standard library, sympy and latex2sympy2_extended only: the worker imports this file by path.
"""

import math
import re

import sympy

MAX_BITS = 1 << 20  # about 315,000 decimal digits
MAX_FUNCTION_ARG = 10_000

_DECIMAL = re.compile(r"(?<![\d.])(\d*)\.(\d+)(?![\d.])")


class NotClosedForm(Exception):
  """The answer is not a number built from literals (a symbol, a set, an equation, ...)."""


class TooBig(Exception):
  """Evaluating the answer exactly would exceed the size limits."""


def decimals_to_fractions(s: str) -> str:
  """``2.5^{2}`` → ``(\\frac{25}{10})^{2}``: decimal literals as exact fractions."""

  def repl(m: re.Match) -> str:
    whole, frac = m.group(1), m.group(2)
    num = (whole + frac).lstrip("0") or "0"
    return "(\\frac{" + num + "}{1" + "0" * len(frac) + "})"

  return _DECIMAL.sub(repl, s)


def _bits(r: sympy.Rational) -> int:
  return max(int(r.p).bit_length(), int(r.q).bit_length())


def _check_size(r) -> None:
  if isinstance(r, sympy.Rational) and _bits(r) > MAX_BITS:
    raise TooBig()


def _pow_too_big(base, exp) -> bool:
  if not (isinstance(base, sympy.Rational) and isinstance(exp, sympy.Rational)):
    return False
  mag = max(abs(int(base.p)), int(base.q))
  if mag <= 1:
    return False
  return abs(float(exp)) * math.log2(mag) > MAX_BITS


def evaluate(e):
  """Exact value of a sympy expression tree built from number literals.

  Returns a sympy number (a Rational when the value is rational, else e.g. ``sqrt(2)``).
  Raises NotClosedForm or TooBig.
  """
  if isinstance(e, sympy.Float):
    return sympy.Rational(str(e))
  if isinstance(e, sympy.Rational) or e in (sympy.pi, sympy.E):
    return e
  if not isinstance(e, sympy.Expr) or e.free_symbols or isinstance(e, sympy.Symbol):
    raise NotClosedForm()
  if not e.args:  # a constant such as oo, zoo, nan, I
    if e.is_extended_real and e.is_finite:
      return e
    raise NotClosedForm()
  args = [evaluate(a) for a in e.args]
  if isinstance(e, sympy.UnevaluatedExpr):
    return args[0]
  if isinstance(e, sympy.Pow):
    if _pow_too_big(*args):
      raise TooBig()
  elif not isinstance(e, (sympy.Add, sympy.Mul)):
    for a in args:
      if isinstance(a, sympy.Rational) and abs(a) > MAX_FUNCTION_ARG:
        raise TooBig()
  out = e.func(*args)
  _check_size(out)
  return out


def exact_value(expr) -> sympy.Rational | None:
  """The rational value of a parsed answer, or None when it is a number but not rational.

  ``x = 5`` (a symbol on the left) counts as its right-hand side. Raises NotClosedForm for a
  non-number, TooBig past the size limits.
  """
  if isinstance(expr, sympy.Eq) and isinstance(expr.lhs, sympy.Symbol):
    expr = expr.rhs
  v = evaluate(expr)
  if not isinstance(v, sympy.Rational) and v.count_ops() <= 40:
    v = sympy.simplify(v)  # e.g. log(1024)/log(2), sqrt(2)*sqrt(8)
  if isinstance(v, sympy.Rational):
    return v
  if v.is_number and v.is_finite is not False:
    return None
  raise NotClosedForm()
