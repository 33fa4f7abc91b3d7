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
import sys

from grpo_jax.runs import power_plan


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
  rows = power_plan.read_rows(args.csv)
  family = args.family or power_plan.family_size(rows)
  text, sd = power_plan.conditions_text(rows, args.metric, args.reference, args.effect, family)
  print(text)
  steps = [int(s) for s in args.steps.split(",")]
  plan = (args.budget_h, args.conditions, steps, args.fixed_s)
  print(power_plan.design_text(rows, sd, family, *plan))
  return 0


if __name__ == "__main__":
  sys.exit(main())
