"""An earlier study report's runs beside new run directories (``study_report.py --prior``).

A report keeps what its analysis needs of every run: ``runs.csv`` (one row per run: condition,
seed, before / after pass@k, final metrics) and ``tests.json`` (the per-run difficulty strata
and the training curves). A study whose earlier run directories are gone can still add a
condition: the new runs are paired with the earlier rows of their seed. That pairing holds
only if the new code reproduces the earlier runs, so a prior is read beside at least one rerun
condition and every rerun must match its earlier row (:func:`merge`).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math

from etils import epath

RUNS, TESTS = "runs.csv", "tests.json"
# Two runs of the same program agree to rounding; anything a changed sample moves (a pass rate
# by 1/1600 at least) is far outside this.
REL_TOL, ABS_TOL = 1e-6, 1e-9


@dataclasses.dataclass(frozen=True)
class Prior:
  """An earlier report's ``rows`` (as :func:`grpo_jax.runs.study.collect`'s, without ``dir``),
  ``strata`` rows and ``curves`` (metric → condition → ``step``/``mean``/``lo``/``hi``)."""

  rows: list[dict]
  strata: list[dict]
  curves: dict[str, dict[str, dict]]


def _value(text: str):
  if text == "":
    return math.nan
  try:
    return int(text)
  except ValueError:
    try:
      return float(text)
    except ValueError:
      return text


def read(report_dir) -> Prior:
  """The runs, strata and curves of the report written under ``report_dir``."""
  report_dir = epath.Path(report_dir)
  if not (report_dir / RUNS).exists():
    raise FileNotFoundError(f"{report_dir} holds no {RUNS}: not a study report's directory")
  with (report_dir / RUNS).open() as f:
    rows = [{k: _value(v) for k, v in row.items()} for row in csv.DictReader(f)]
  for row in rows:
    row["condition"], row["status"] = str(row["condition"]), str(row["status"])
  record = json.loads((report_dir / TESTS).read_text()) if (report_dir / TESTS).exists() else {}
  return Prior(rows, record.get("strata", []), record.get("curves", {}))


def _key(row: dict) -> tuple[str, int]:
  return row["condition"], int(row["seed"])


def merge(rows: list[dict], strata: list[dict], prior: Prior, columns) -> tuple[list, list, int]:
  """(rows, strata, reruns): the new ``rows`` and ``strata`` with the prior's for every
  (condition, seed) the new ones lack, and the number of new runs that reran a prior one.

  A rerun whose ``columns`` differ from its earlier row is a ValueError naming the run and the
  column: the new runs cannot then be paired with the earlier ones. A prior with no rerun is a
  ValueError too (nothing shows the pairing holds)."""
  earlier = {_key(r): r for r in prior.rows}
  reruns = [r for r in rows if r["status"] == "done" and _key(r) in earlier]
  for r in reruns:
    old = earlier[_key(r)]
    for c in columns:
      a, b = r.get(c, math.nan), old.get(c, math.nan)
      if isinstance(a, str) or isinstance(b, str):
        continue
      same = math.isnan(a) and math.isnan(b)
      if not (same or math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)):
        raise ValueError(
          f"run {r.get('name', _key(r))}: {c} is {a} here and {b} in the prior report; the "
          "earlier runs are not reproduced, so new runs cannot be paired with them"
        )
  if not reruns:
    raise ValueError(
      "no run here reruns one of the prior report's (same condition and seed); rerun one of its "
      "conditions beside the new ones so that the pairing can be checked"
    )
  have = {_key(r) for r in rows}
  merged_rows = rows + [r for k, r in earlier.items() if k not in have]
  merged_strata = strata + [s for s in prior.strata if _key(s) not in have]
  return merged_rows, merged_strata, len(reruns)


__all__ = ["Prior", "merge", "read"]
