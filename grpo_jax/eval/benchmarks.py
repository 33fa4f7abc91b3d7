"""Benchmark evaluation files: ``eval/<benchmark>_step<k>.json`` and a Markdown summary table.

Each result names its sampling settings (temperature, top-p, n, max tokens) and carries pass@k
for k ≤ n with bootstrap 95% CIs, maj@k where answers are known, mean length, truncation rate and,
when the problems carry a difficulty level (``meta.level``, e.g. MATH500), the same per level.
Read back (``read_results``), a run's results pair up as step 0 (before RL) vs its last
evaluated step, with the change of pass@k per level.
"""

from __future__ import annotations

import numpy as np
from etils import epath

from grpo_jax.eval import passk
from grpo_jax.rundir import names, paths, read, tables, write

SUMMARY_KEYS = ("pass@1", "pass@8", "pass@16", "maj@8", "maj@16", "len_mean", "truncated_frac")


def levels_of(problems) -> list | None:
  """``meta.level`` of each problem, or None when the problems have no levels."""
  out = []
  for p in problems:
    meta = p.get("meta", {}) if isinstance(p, dict) else {}
    if "level" not in (meta or {}):
      return None
    out.append(meta["level"])
  return out


def by_level(correct_PxN: np.ndarray, levels: list, ks) -> dict:
  table = {}
  for level in sorted(set(levels), key=str):
    rows = np.array([lv == level for lv in levels])
    table[str(level)] = {
      f"pass@{k}": float(passk.pass_at_k_array(correct_PxN[rows], k).mean()) for k in ks
    }
    table[str(level)]["num_problems"] = int(rows.sum())
  return table


def result_name(benchmark: str, eval_cfg) -> str:
  """The benchmark's result name; non-default sampling settings are part of it (METHODS §6)."""
  tag = "" if eval_cfg.temperature == 1.0 else f"_T{eval_cfg.temperature:g}"
  tag += "" if eval_cfg.top_p == 1.0 else f"_p{eval_cfg.top_p:g}"
  return benchmark + tag


def result_path(workdir: paths.PathLike, benchmark: str, step: int) -> epath.Path:
  """``eval/<benchmark>_step<k>.json`` (``grpo_jax.rundir.paths.eval_result``)."""
  return paths.eval_result(workdir, benchmark, step)


def write_result(workdir, benchmark: str, step: int, result: dict) -> epath.Path:
  """Writes ``eval/<benchmark>_step<k>.json`` and refreshes ``eval/summary.md``."""
  path = write.eval_result(workdir, benchmark, step, result)
  write_summary(workdir)
  return path


def read_results(workdir) -> list[dict]:
  """Every ``eval/<benchmark>_step<k>.json`` of ``workdir``, sorted by (benchmark, step)."""
  folder = epath.Path(workdir) / names.EVAL
  if not folder.exists():
    return []
  out = []
  for path in sorted(folder.glob("*_step*.json")):
    row = read.json_file(path)
    if "benchmark" in row:
      out.append(row)
  return sorted(out, key=lambda r: (r["benchmark"], r["step"]))


def before_and_after(results: list[dict]) -> dict[str, tuple[dict | None, dict | None]]:
  """``{benchmark: (before, after)}`` over ``read_results`` rows: the result at step 0 (before
  RL) and the one at the largest step > 0, each None where no such step was evaluated."""
  out = {}
  for r in results:
    before, after = out.get(r["benchmark"], (None, None))
    if r["step"] == 0:
      before = r
    elif after is None or r["step"] > after["step"]:
      after = r
    out[r["benchmark"]] = (before, after)
  return out


def level_gains(before: dict, after: dict, metric: str = "pass@1") -> dict[str, float]:
  """``{level: after − before}`` of ``metric`` from the two results' ``by_level`` tables, for the
  levels both hold; empty when the problems have no levels (no ``by_level`` in the results)."""
  lo, hi = before.get("by_level") or {}, after.get("by_level") or {}
  both = [lv for lv in hi if metric in hi[lv] and metric in lo.get(lv, {})]
  return {lv: hi[lv][metric] - lo[lv][metric] for lv in both}


def summary_table(results: list[dict]) -> str:
  """One Markdown row per (benchmark, step): the summary keys present, with CIs for pass@k."""
  keys = [k for k in SUMMARY_KEYS if any(k in r for r in results)]

  def row(r: dict) -> list[str]:
    s = r.get("sampling", {})
    name = f"T={s.get('temperature')}, p={s.get('top_p')}, n={s.get('n')}"
    cells = [tables.interval(float(r[k]), *r.get(f"{k}_ci", ())) if k in r else "" for k in keys]
    return [str(r["benchmark"]), str(r["step"]), name, *cells]

  return tables.markdown(["benchmark", "step", "sampling", *keys], map(row, results))


def write_summary(workdir) -> epath.Path:
  """``eval/summary.md``: :func:`summary_table` of every result of ``workdir``."""
  return write.eval_summary(workdir, summary_table(read_results(workdir)))
