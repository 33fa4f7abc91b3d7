"""Power analysis of a seed-replicated sweep from its per-run CSV (``aggregate.py``'s output).

  python experiments/power_analysis.py docs/mini_repro.csv --metric after/pass@8 --effect 0.02 \
      --reference advantage.offset_coef=0.0,advantage.offset_control=none,hadw.enabled=false \
      --family 6 --budget_h 3 --conditions 7 --steps 25,50,100,150

Per condition: the paired differences to the reference over seeds (mean, sd, p, Holm-adjusted
p over the conditions listed), the seeds a paired t test needs to detect ``--effect`` with 80%
power at Holm's strictest step (α / family), and the smallest effect the present seeds detect.
Then a design table: with the runs' measured step time (``final/time/rollout_s`` +
``final/time/update_s``) plus ``--fixed_s`` per run (warm start, plans, evaluation), how many
seeds of ``--conditions`` conditions fit ``--budget_h`` hours at each RL length, and the
effect that many seeds detect, assuming the sd of Δ measured here.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys

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


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("csv", help="per-run CSV of experiments/aggregate.py")
  ap.add_argument("--metric", default="after/pass@8")
  ap.add_argument("--reference", required=True, help="key=value,... naming the reference runs")
  ap.add_argument("--effect", type=float, default=0.02, help="the paired difference to resolve")
  ap.add_argument("--family", type=int, default=0, help="Holm family size (0: the conditions)")
  ap.add_argument("--budget_h", type=float, default=3.0)
  ap.add_argument("--conditions", type=int, default=7, help="conditions of the planned study")
  ap.add_argument("--steps", default="25,50,100,150", help="RL lengths to plan for")
  ap.add_argument("--fixed_s", type=float, default=30.0, help="per-run cost besides RL steps")
  args = ap.parse_args(argv)
  # A CSV (or a reference) in config keys since replaced reads as today's keys.
  rows = [legacy.upgrade_flat(r, args.csv) for r in csv.DictReader(open(args.csv))]
  reference = legacy.upgrade_flat(config_file.parse_arg(args.reference), "--reference")
  family = args.family or len(conditions(rows)[1]) - 1
  table = analyse(rows, args.metric, reference, args.effect, family)
  print(f"{args.metric}: paired Δ to {args.reference}; Holm family {family}; effect {args.effect}")
  print("| condition | n | Δ mean | sd | p | p (Holm) | seeds for effect | detectable now |")
  print("|---|---|---|---|---|---|---|---|")
  for r in table:
    print(
      f"| {r['condition']} | {r['n']} | {r['mean']:+.4f} | {r['sd']:.4f} | {r['p']:.3f} | "
      f"{r['p_holm']:.3f} | {r.get('seeds_needed', '—')} | {r.get('detectable', math.nan):.4f} |"
    )
  sd = float(np.median([r["sd"] for r in table if r["sd"] > 0]))
  steps = [int(s) for s in args.steps.split(",")]
  step_s, plan = design(rows, sd, family, args.budget_h, args.conditions, steps, args.fixed_s)
  print(
    f"\nDesign at sd {sd:.4f} (median over conditions), {step_s:.2f} s per RL step + "
    f"{args.fixed_s:.0f} s per run, {args.conditions} conditions, {args.budget_h} h:"
  )
  print("| RL steps | s per run | seeds per condition | detectable Δ |")
  print("|---|---|---|---|")
  for p in plan:
    print(f"| {p['steps']} | {p['run_s']:.0f} | {p['seeds']} | {p['detectable']:.4f} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
