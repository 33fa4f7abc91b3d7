"""math-verify worker: one long-lived process, JSON lines on stdin/stdout.

Started by ``verify.VerifierPool`` as ``python worker.py`` — a fresh interpreter (spawn
semantics, never a fork of the JAX process), run by path so that it imports neither the
parent's ``__main__`` nor ``grpo_jax`` (and so never jax): only the standard library, sympy
and math-verify.

Request  ``{"i": k, "gold": "<latex>", "pred": "<latex>", "soft_s": 3.0}``, optionally with
``"value": "p/q"`` (the gold's exact value) and ``"strict": bool`` to ask for the closed-form
route (``closed_form.py``): the answer is evaluated exactly and compared with ``value``; an
answer that is not a closed-form number is unequal when ``strict`` (integer golds), else it
goes on to math-verify.
Response ``{"i": k, "status": "ok" | "timeout" | "gold_parse" | "pred_parse" | "guarded" |
"error", "equal": bool}``; the first line written is ``{"ready": true}``.

Answers are parsed with math-verify's unit normalisation off (it removes any trailing
``\\text{...}`` and words such as "more": ``5 \\text{ or more}`` would read 5); the parent removes
whitelisted unit words first (``units.py``). Golds keep it.

Each check runs on this process's main thread under its own SIGALRM soft timeout
(``soft_s``); math-verify's internal signal timeouts are off. Work the alarm cannot interrupt
(C-level big integers) is ended by the parent, which kills this process at its hard deadline.
"""

import json
import os
import sys

# Run by path, sys.path[0] is this folder: drop it so sibling names shadow nothing.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
  sys.path.pop(0)

import importlib.util  # noqa: E402
import logging  # noqa: E402
import resource  # noqa: E402
import signal  # noqa: E402

# Memory cap: a runaway expression fails with MemoryError instead of swapping the host.
_MEMORY_CAP_BYTES = 4 << 30


class SoftTimeout(BaseException):
  """Raised by the alarm; a BaseException so math-verify's `except Exception` cannot eat it."""


def _on_alarm(signum, frame):
  raise SoftTimeout()


def _exact_guard(gold, pred) -> bool:
  """Reject math-verify's numeric matches of distinct values at small magnitudes.

  math-verify compares numbers with ``evalf(chop=True)`` and rounds floats to 6 decimal
  places, so 1/2001! equals 1/1999! (issue #14) and 1.7e-19 equals 1.6e-19. When both sides
  are numbers (no free symbols, no percent marker): exact rationals must be equal; other exact
  values must agree to 1e-40 relative at 60 digits; with a float present, to 1e-5 relative
  (looser than the 6-decimal rule for values above 0.1, so it only bites on tiny ones).
  """
  import sympy

  try:
    if not (isinstance(gold, sympy.Expr) and isinstance(pred, sympy.Expr)):
      return True
    for e in (gold, pred):
      if e.has(sympy.UnevaluatedExpr) or not e.is_number:
        return True
    inexact = gold.has(sympy.Float) or pred.has(sympy.Float)
    a, b = gold.doit(), pred.doit()
    if not inexact and a.is_Rational and b.is_Rational:
      return bool(a == b)
    va, vb = sympy.N(a, 60), sympy.N(b, 60)
    scale = max(abs(va), abs(vb))
    if not scale.is_number or scale == 0:
      return True
    rel = sympy.Float("1e-5" if inexact else "1e-40", 60)
    return bool(abs(va - vb) <= rel * scale)
  except Exception:
    return True


def _load_closed_form():
  """``closed_form.py`` from this folder, by path (no ``grpo_jax`` package import)."""
  path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "closed_form.py")
  spec = importlib.util.spec_from_file_location("_grpo_closed_form", path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


def main() -> None:
  proto = os.fdopen(os.dup(1), "w", buffering=1)
  os.dup2(2, 1)  # anything a library prints goes to stderr, never into the protocol
  sys.stdout = sys.stderr
  try:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or hard > _MEMORY_CAP_BYTES:
      resource.setrlimit(resource.RLIMIT_AS, (_MEMORY_CAP_BYTES, hard))
  except (ValueError, OSError):
    pass
  sys.set_int_max_str_digits(0)
  logging.disable(logging.WARNING)

  import sympy
  from latex2sympy2_extended import latex2sympy
  from latex2sympy2_extended.latex2sympy2 import NormalizationConfig
  from math_verify import LatexExtractionConfig, parse, verify

  cf = _load_closed_form()

  def config(units: bool):
    norm = NormalizationConfig(
      basic_latex=True,
      units=units,
      malformed_operators=True,
      nits=True,
      boxed="all",
      equations=False,
    )
    return norm, [LatexExtractionConfig(boxed_match_priority=0, normalization_config=norm)]

  _, cfg = config(units=True)  # golds; answers without unit removal (module docstring)
  norm, pred_cfg = config(units=False)

  def check(gold: str, pred: str) -> tuple[str, bool]:
    kw = dict(fallback_mode="no_fallback", parsing_timeout=None)
    gold_parsed = parse("\\boxed{" + gold + "}", cfg, **kw)
    if not gold_parsed:
      return "gold_parse", False
    pred_parsed = parse("\\boxed{" + pred + "}", pred_cfg, **kw)
    if not pred_parsed:
      return "pred_parse", False
    equal = verify(gold_parsed, pred_parsed, timeout_seconds=None)
    if equal:
      equal = _exact_guard(gold_parsed[0], pred_parsed[0])
    return "ok", bool(equal)

  def check_closed_form(gold: str, pred: str, value: str, strict: bool) -> tuple[str, bool]:
    target = sympy.Rational(value)
    try:
      expr = latex2sympy(cf.decimals_to_fractions(pred), normalization_config=norm)
    except Exception:
      expr = None
    if expr is not None:
      try:
        v = cf.exact_value(expr)
        if v is not None or strict:
          return "ok", v is not None and v == target
      except cf.TooBig:
        return "guarded", False
      except cf.NotClosedForm:
        if strict:
          return "ok", False
    elif strict:
      return "pred_parse", False
    return check(gold, pred)

  signal.signal(signal.SIGALRM, _on_alarm)
  proto.write(json.dumps({"ready": True}) + "\n")
  for line in sys.stdin:
    try:
      req = json.loads(line)
    except ValueError:
      continue
    status, equal = "error", False
    try:
      signal.setitimer(signal.ITIMER_REAL, max(0.05, float(req.get("soft_s", 3.0))))
      try:
        if "value" in req:
          status, equal = check_closed_form(
            str(req["gold"]), str(req["pred"]), str(req["value"]), bool(req.get("strict"))
          )
        else:
          status, equal = check(str(req["gold"]), str(req["pred"]))
      finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    except SoftTimeout:
      status = "timeout"
    except (Exception, RecursionError, MemoryError):
      status = "error"
    proto.write(json.dumps({"i": req.get("i"), "status": status, "equal": equal}) + "\n")


if __name__ == "__main__":
  main()
