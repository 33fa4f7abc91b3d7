"""A sweep's run directories → one table: overrides × final metrics × held-out results with CIs.

Per run (a directory holding ``config.json``): the overrides it ran (``sweep_run.json``; keys
since replaced read as the key that replaced them, ``grpo_jax.config.legacy``), its status
(done | failed | partial), each training metric averaged over the last k logged steps
(``final/<metric>``), and ``before/`` / ``after/`` held-out results (``pass@k`` with the
bootstrap CI over problems, ``pass@k_lo`` / ``pass@k_hi``): ``results.json``'s, or for a run
that has not written them, the evaluation's own files ``eval/<benchmark>_step<k>.json`` (step 0,
and the largest step evaluated).

Across seeds (runs whose overrides differ only in ``seed``): n, mean, and a 95% Student-t
interval over seeds, mean ± t_{0.975, n−1}·s/√n (s with ddof = 1; n = 1 gives no interval).
With a reference condition, also the paired difference Δ = run − reference of the same seed
(runs of one seed share warm start and prompts), with the same t interval over seeds.
"""

from __future__ import annotations

import csv
import io
import math
import re

import numpy as np
from etils import epath

from grpo_jax.config import files as config_file
from grpo_jax.config import legacy
from grpo_jax.eval import benchmarks as bench_lib
from grpo_jax.rundir import read, tables
from grpo_jax.rundir.names import ERROR, RUN_INFO

SEED = "seed"
# Columns the Markdown tables show by default (the CSV holds every column).
MD_METRICS = ("final/reward/mean", "after/pass@1", "after/pass@8")


def final_metrics(rows: list[dict], last_k: int) -> dict[str, float]:
  """Mean of each numeric metric over the last ``last_k`` logged steps (NaN-free values)."""
  tail = rows[-last_k:] if last_k > 0 else rows
  keys = sorted({k for r in tail for k in r if k != "step"})
  out = {}
  for k in keys:
    vals = [float(r[k]) for r in tail if isinstance(r.get(k), int | float)]
    vals = [v for v in vals if math.isfinite(v)]
    if vals:
      out[f"final/{k}"] = float(np.mean(vals))
  return out


def _eval_columns(prefix: str, result: dict | None) -> dict[str, float]:
  """``<prefix>/<key>`` for each number in ``result`` but its ``step``, and ``<prefix>/<key>_lo``
  / ``_hi`` for each ``<key>_ci`` interval."""
  out = {}
  for k, v in (result or {}).items():
    if k.endswith("_ci") and isinstance(v, list | tuple) and len(v) == 2:
      out[f"{prefix}/{k[:-3]}_lo"], out[f"{prefix}/{k[:-3]}_hi"] = float(v[0]), float(v[1])
    elif isinstance(v, int | float) and not isinstance(v, bool) and k != "step":
      out[f"{prefix}/{k}"] = float(v)
  return out


def primary_benchmark(names, eval_sets) -> str | None:
  """The benchmark ``results.json`` reports, the task's first evaluation set: among the result
  names ``names`` (``<set>`` or ``<set>_<tags>``), the shortest one of the first set in
  ``eval_sets`` (the config's ``data.eval_sets``) that has any; otherwise the first name sorted
  (e.g. countdown's one benchmark)."""
  for s in eval_sets:
    match = [n for n in names if n == s or n.startswith(s + "_")]
    if match:
      return min(match, key=len)
  return min(names, default=None)


def _eval_files(run_dir: epath.Path) -> tuple[dict | None, dict | None]:
  """(before, after) from ``eval/<benchmark>_step<k>.json`` of the primary benchmark (named by
  ``config.json``'s ``data.eval_sets``): step 0 and the largest step > 0, None where absent."""
  pairs = bench_lib.before_and_after(bench_lib.read_results(run_dir))
  cfg = (read.config(run_dir) or {}).get("config") or {}
  name = primary_benchmark(pairs, (cfg.get("data") or {}).get("eval_sets") or ())
  return pairs.get(name, (None, None))


def _held_out(run_dir, results: dict | None) -> tuple[dict | None, dict | None]:
  """(before, after) held-out results: ``results.json``'s ``before`` / ``after`` (``results``),
  each missing one from the evaluation's files (``_eval_files``)."""
  results = results or {}
  before, after = results.get("before"), results.get("after")
  if before is None or after is None:
    files = _eval_files(epath.Path(run_dir))
    before, after = before or files[0], after or files[1]
  return before, after


def load_run(run_dir, last_k: int = 10) -> dict:
  """One flat row for the run in ``run_dir`` (see the module docstring for the columns)."""
  run_dir = epath.Path(run_dir)
  info = read.run_info(run_dir) or {}
  results = read.results(run_dir)
  metrics = read.metrics(run_dir)
  status = "done" if results else "failed" if (run_dir / ERROR).exists() else "partial"
  row = {
    "name": info.get("name", run_dir.name),
    "status": status,
    "steps": metrics[-1]["step"] if metrics else 0,
  }
  for k, v in config_file.parse_arg(info.get("arg")).items():  # the run's config argument
    row[k] = config_file.parse_value(v, None)
  where = f"{run_dir / RUN_INFO}"  # a run recorded under keys since replaced reads as today's
  row.update(legacy.upgrade_flat(info.get("overrides", {}), where))
  row.update(final_metrics(metrics, last_k))
  before, after = _held_out(run_dir, results)
  row.update(_eval_columns("before", before))
  row.update(_eval_columns("after", after))
  return row


def collect(root, last_k: int = 10) -> list[dict]:
  """Rows for every run directory under ``root`` (sorted by name); ``root`` itself if it is one."""
  root = epath.Path(root)
  if read.is_run(root):
    return [load_run(root, last_k)]
  dirs = sorted(p for p in root.iterdir() if read.is_run(p) or (p / ERROR).exists())
  # The sweep's own order (sweep.json) first: conditions then read as the config lists them.
  order = [e["name"] for e in (read.sweep_info(root) or {}).get("runs", [])]
  rank = {name: i for i, name in enumerate(order)}
  dirs.sort(key=lambda p: (rank.get(p.name, len(rank)), p.name))
  return [load_run(d, last_k) for d in dirs]


def override_keys(rows: list[dict]) -> list[str]:
  """The override columns, in first-seen order."""
  keys: list[str] = []
  for r in rows:
    for k in r:
      if k not in keys and k not in ("name", "status", "steps") and "/" not in k:
        keys.append(k)
  return keys


def t_interval(values) -> tuple[float, float, float]:
  """(mean, lo, hi): 95% Student-t interval over the values (NaN bounds for n < 2)."""
  x = np.asarray([v for v in values if v is not None and math.isfinite(v)], np.float64)
  if len(x) == 0:
    return math.nan, math.nan, math.nan
  mean = float(x.mean())
  if len(x) < 2:
    return mean, math.nan, math.nan
  from scipy import stats  # noqa: PLC0415

  half = float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
  return mean, mean - half, mean + half


def _condition(row: dict, keys: list[str]) -> tuple:
  return tuple((k, row.get(k)) for k in keys if k != SEED)


def over_seeds(rows: list[dict], metrics=None, reference: dict | None = None) -> list[dict]:
  """One row per condition (overrides less ``seed``) over its finished runs: ``n``, and per
  metric ``<m>`` (mean), ``<m>_lo`` / ``<m>_hi`` (t interval); with ``reference`` (override
  values naming one condition) also ``delta/<m>`` = paired difference to it, same seed."""
  keys = override_keys(rows)
  done = [r for r in rows if r["status"] == "done"]
  metrics = list(
    metrics or sorted({k for r in done for k in r if "/" in k and not k.endswith(("_lo", "_hi"))})
  )
  groups: dict[tuple, list[dict]] = {}
  for r in done:
    groups.setdefault(_condition(r, keys), []).append(r)
  ref_rows = {}
  if reference is not None:
    for r in done:
      if all(_same(r.get(k), v) for k, v in reference.items()):
        ref_rows[r.get(SEED)] = r
  out = []
  for cond, members in groups.items():
    row = dict(cond)
    row["n"] = len(members)
    row[SEED + "s"] = " ".join(str(m.get(SEED)) for m in members)
    for m in metrics:
      row[m], row[m + "_lo"], row[m + "_hi"] = t_interval([r.get(m, math.nan) for r in members])
      if reference is not None:
        deltas = [
          r.get(m, math.nan) - ref_rows[r.get(SEED)].get(m, math.nan)
          for r in members
          if r.get(SEED) in ref_rows
        ]
        d = t_interval(deltas)
        row["delta/" + m], row["delta/" + m + "_lo"], row["delta/" + m + "_hi"] = d
    out.append(row)
  return out


def paired_difference(rows: list[dict], condition: dict, reference: dict, metric: str) -> dict:
  """Δ = metric(condition) − metric(reference) over the seeds both finished: ``n``, ``mean``,
  ``lo``, ``hi`` (95% t interval over seeds) and the per-seed ``deltas``."""
  pick = lambda cond: {
    r.get(SEED): r
    for r in rows
    if r["status"] == "done" and all(_same(r.get(k), v) for k, v in cond.items())
  }
  a, b = pick(condition), pick(reference)
  seeds = [s for s in a if s in b]
  deltas = [a[s].get(metric, math.nan) - b[s].get(metric, math.nan) for s in seeds]
  mean, lo, hi = t_interval(deltas)
  return {"n": len(seeds), "mean": mean, "lo": lo, "hi": hi, "deltas": deltas}


def _same(a, b) -> bool:
  if isinstance(a, bool) or isinstance(b, bool):
    return bool(a) == bool(b) and type(a) is type(b)
  if isinstance(a, int | float) and isinstance(b, int | float):
    return math.isclose(float(a), float(b))
  return a == b


def to_csv(rows: list[dict], path=None) -> str:
  """CSV text with the union of the rows' columns (first-seen order); written to ``path``."""
  cols: list[str] = []
  for r in rows:
    cols.extend(k for k in r if k not in cols)
  buf = io.StringIO()
  writer = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
  writer.writeheader()
  writer.writerows(rows)
  if path is not None:
    epath.Path(path).parent.mkdir(parents=True, exist_ok=True)
    epath.Path(path).write_text(buf.getvalue())
  return buf.getvalue()


def _cell(row: dict, m: str) -> str:
  return tables.interval(row.get(m, math.nan), row.get(m + "_lo"), row.get(m + "_hi"))


def held_out_metrics(rows: list[dict]) -> list[str]:
  """``before/pass@k``, ``after/pass@k`` for each k the rows hold, k ascending."""
  found = (re.fullmatch(r"(?:before|after)/pass@(\d+)", key) for r in rows for key in r)
  ks = sorted({int(m[1]) for m in found if m})
  return [f"{when}/pass@{k}" for k in ks for when in ("before", "after")]


def held_out_table(rows: list[dict]) -> str:
  """Runs side by side: override columns, steps, held-out pass@k before and after RL (each
  ``value [lo, hi]``, the bootstrap 95% CI over problems); '' without rows."""
  if not rows:
    return ""
  return to_markdown(rows, metrics=held_out_metrics(rows), extra=("status", "steps"))


def to_markdown(rows: list[dict], metrics=MD_METRICS, keys=None, extra=()) -> str:
  """A Markdown table: override columns, ``extra`` columns, then ``value [lo, hi]`` cells."""
  keys = override_keys(rows) if keys is None else list(keys)
  cells = lambda r: [str(r.get(k, "")) for k in (*keys, *extra)] + [_cell(r, m) for m in metrics]
  return tables.markdown([*keys, *extra, *metrics], map(cells, rows))


__all__ = [
  "collect",
  "final_metrics",
  "held_out_metrics",
  "held_out_table",
  "load_run",
  "over_seeds",
  "override_keys",
  "paired_difference",
  "primary_benchmark",
  "t_interval",
  "to_csv",
  "to_markdown",
]
