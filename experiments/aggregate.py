"""A sweep's run directories → CSV and Markdown tables (per run, and mean ± CI over seeds).

  python experiments/aggregate.py runs/mini_repro --out docs/mini_repro \
      --reference advantage.offset_coef=0.0,advantage.offset_control=none,hadw.enabled=false

writes ``<out>.csv`` (one row per run: overrides, status, every training metric averaged over
the last ``--last_k`` steps, before/after held-out pass@k with bootstrap CIs),
``<out>_seeds.csv`` (per condition over seeds: mean and 95% t interval; with ``--reference``,
the paired difference to that condition) and ``<out>_table.md`` (both tables, key columns).
``--out`` defaults to ``<sweep dir>/aggregate``.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from grpo_jax.runs import aggregate, aggregate_report


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  parser.add_argument("sweep_dir")
  parser.add_argument("--out", default=None, help="output prefix (default <sweep_dir>/aggregate)")
  parser.add_argument("--last_k", type=int, default=10, help="steps averaged for final metrics")
  parser.add_argument("--reference", default=None, help="key=value,... naming the reference")
  parser.add_argument(
    "--metrics", default=",".join(aggregate.MD_METRICS), help="columns of the Markdown tables"
  )
  parser.add_argument(
    "--pair",
    action="append",
    default=[],
    metavar="A:B",
    help="k=v,...:k=v,... paired difference A - B over seeds (repeatable)",
  )
  args = parser.parse_args(argv)
  out = pathlib.Path(args.out or pathlib.Path(args.sweep_dir) / "aggregate")
  metrics, pairs = tuple(args.metrics.split(",")), tuple(args.pair)
  text = aggregate_report.write(args.sweep_dir, out, args.last_k, args.reference, metrics, pairs)
  if text is None:
    print(f"no run directories under {args.sweep_dir}", file=sys.stderr)
    return 1
  print(text)
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
