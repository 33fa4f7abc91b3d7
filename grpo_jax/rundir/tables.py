"""Markdown tables of results: one formatter for every table that runs, evaluation, profiles,
the study and the benchmarks print, and one way to write a value with its interval.

  markdown(["policy", "pass@1"], [["before", interval(0.12, 0.10, 0.15)]])
  | policy | pass@1 |
  |---|---|
  | before | 0.120 [0.100, 0.150] |
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence

DASH = "–"  # a value that is missing or not finite


def number(x, signed: bool = False, digits: int = 3) -> str:
  """A float to ``digits`` decimals (``+`` shown when ``signed``), :data:`DASH` when it is NaN
  or infinite; anything else (an int, a string) as ``str``."""
  if isinstance(x, bool | numbers.Integral) or not isinstance(x, numbers.Real):
    return str(x)
  x = float(x)
  if not math.isfinite(x):
    return DASH
  return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def interval(mean, lo=math.nan, hi=math.nan, signed: bool = False, digits: int = 3) -> str:
  """``mean [lo, hi]`` (a 95% interval, say); the mean alone when the bounds are not finite."""
  real = lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool)
  mean, lo, hi = (float(v) if real(v) else v for v in (mean, lo, hi))
  value = number(mean, signed, digits)
  if not (isinstance(lo, float) and math.isfinite(lo) and isinstance(hi, float)):
    return value
  return f"{value} [{number(lo, signed, digits)}, {number(hi, signed, digits)}]"


def markdown(header: Sequence[str], rows: Iterable[Sequence]) -> str:
  """The table: a header row, the separator, one line per row. Cells that are not strings go
  through :func:`number`; a row shorter than the header is an error."""
  header = [str(h) for h in header]
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for row in rows:
    cells = [c if isinstance(c, str) else number(c) for c in row]
    if len(cells) != len(header):
      raise ValueError(f"a table row has {len(cells)} cells for {len(header)} columns: {cells}")
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


__all__ = ["DASH", "interval", "markdown", "number"]
