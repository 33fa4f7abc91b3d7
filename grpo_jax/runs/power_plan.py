"""The power analysis of a seed-replicated sweep (``experiments/power_analysis.py``) from its
per-run CSV (``experiments/aggregate.py``'s): per condition the paired differences to a
reference over seeds with Holm-adjusted p, the seeds that detect an effect and the effect the
present seeds detect; then how many seeds of a planned study fit a budget at each RL length."""

from __future__ import annotations

import csv
import math

import numpy as np

from grpo_jax.config import files as config_file
from grpo_jax.config import legacy
from grpo_jax.runs import power

FIXED = {"name", "status", "steps", "seed"}


def _norm(value: str) -> str:
  return value.strip().lower()


def conditions(rows: list[dict]) -> tuple[list[str], dict[tuple, dict[str, dict]]]:
  """(override columns, {condition values: {seed: row}}) of the finished runs."""
  keys = [k for k in rows[0] if "/" not in k and k not in FIXED]
  out: dict[tuple, dict[str, dict]] = {}
  for r in rows:
    if r.get("status", "done") == "done":
      out.setdefault(tuple(_norm(r[k]) for k in keys), {})[r["seed"]] = r
  return keys, out


def analyse(rows, metric: str, reference: dict, effect: float, family: int) -> list[dict]:
  keys, groups = conditions(rows)
  ref_key = tuple(_norm(str(reference.get(k, ""))) for k in keys)
  if ref_key not in groups:
    raise ValueError(f"no runs of the reference {reference} (conditions: {list(groups)})")
  ref = groups[ref_key]
  out = []
  for cond, runs in groups.items():
    if cond == ref_key:
      continue
    deltas = [float(runs[s][metric]) - float(ref[s][metric]) for s in runs if s in ref]
    test = power.paired_test(deltas)
    row = {"condition": ",".join(f"{k}={v}" for k, v in zip(keys, cond)), **test}
    if test["sd"] > 0:
      row["seeds_needed"] = power.seeds_needed(test["sd"], effect, family=family)
      row["detectable"] = power.min_detectable(test["n"], test["sd"], family=family)
    out.append(row)
  for row, p in zip(out, power.holm([r["p"] for r in out])):
    row["p_holm"] = float(p)
  return out


def design(rows, sd: float, family: int, budget_h: float, n_conditions: int, steps, fixed_s):
  """Seeds per condition that fit the budget at each RL length, and their detectable effect."""
  step_s = float(
    np.mean([float(r["final/time/rollout_s"]) + float(r["final/time/update_s"]) for r in rows])
  )
  table = []
  for t in steps:
    run_s = fixed_s + t * step_s
    seeds = int(budget_h * 3600 // (run_s * n_conditions))
    mde = power.min_detectable(seeds, sd, family=family) if seeds >= 2 else math.nan
    table.append({"steps": t, "run_s": run_s, "seeds": seeds, "detectable": mde})
  return step_s, table


def read_rows(path: str) -> list[dict]:
  """The CSV's rows; a CSV in config keys since replaced reads as today's keys."""
  with open(path) as f:
    return [legacy.upgrade_flat(r, path) for r in csv.DictReader(f)]


def family_size(rows: list[dict]) -> int:
  """The conditions other than the reference: the default Holm family."""
  return len(conditions(rows)[1]) - 1


def conditions_text(rows, metric: str, reference: str, effect: float, family: int):
  """(Markdown of ``analyse`` against ``reference`` (``k=v,...``), the median sd of Δ)."""
  ref = legacy.upgrade_flat(config_file.parse_arg(reference), "--reference")
  table = analyse(rows, metric, ref, effect, family)
  lines = [f"{metric}: paired Δ to {reference}; Holm family {family}; effect {effect}"]
  lines.append("| condition | n | Δ mean | sd | p | p (Holm) | seeds for effect | detectable now |")
  lines.append("|---|---|---|---|---|---|---|---|")
  for r in table:
    lines.append(
      f"| {r['condition']} | {r['n']} | {r['mean']:+.4f} | {r['sd']:.4f} | {r['p']:.3f} | "
      f"{r['p_holm']:.3f} | {r.get('seeds_needed', '—')} | {r.get('detectable', math.nan):.4f} |"
    )
  return "\n".join(lines), float(np.median([r["sd"] for r in table if r["sd"] > 0]))


def design_text(rows, sd: float, family: int, budget_h: float, n_conditions: int, steps, fixed_s):
  """Markdown of ``design``, headed by its assumptions."""
  step_s, plan = design(rows, sd, family, budget_h, n_conditions, steps, fixed_s)
  lines = [
    f"\nDesign at sd {sd:.4f} (median over conditions), {step_s:.2f} s per RL step + "
    f"{fixed_s:.0f} s per run, {n_conditions} conditions, {budget_h} h:"
  ]
  lines.append("| RL steps | s per run | seeds per condition | detectable Δ |")
  lines.append("|---|---|---|---|")
  for p in plan:
    lines.append(f"| {p['steps']} | {p['run_s']:.0f} | {p['seeds']} | {p['detectable']:.4f} |")
  return "\n".join(lines)
