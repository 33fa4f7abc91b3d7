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

from grpo_jax.config import files as config_file
from grpo_jax.config import legacy
from grpo_jax.rundir import tables
from grpo_jax.runs import aggregate


def parse_reference(text: str | None) -> dict | None:
  """``"a.b=0.0,c=false"`` → ``{"a.b": 0.0, "c": False}`` (values parsed as Python literals;
  config keys since replaced as the key that replaced them, as the runs' overrides read)."""
  if not text:
    return None
  out = {}
  for key, value in config_file.parse_arg(text).items():
    lowered = value.lower()
    out[key] = {"true": True, "false": False}.get(lowered, config_file.parse_value(value, None))
  return legacy.upgrade_flat(out, text)


def pairs_table(rows, pairs: list[str], metrics: list[str]) -> str:
  """Markdown: one line per ``A:B`` pair, Δ = A − B per metric as mean [95% t interval]."""
  lines = []
  for pair in pairs:
    a_text, _, b_text = pair.partition(":")
    a, b = parse_reference(a_text), parse_reference(b_text)
    cells, n = [], 0
    for m in metrics:
      d = aggregate.paired_difference(rows, a, b, m)
      n = d["n"]
      cells.append(tables.interval(d["mean"], d["lo"], d["hi"], signed=True))
    lines.append([a_text, b_text, n, *cells])
  table = tables.markdown(["A", "B", "n", *(f"Δ {m}" for m in metrics)], lines)
  return (
    f"Paired differences over seeds (A − B, same seed; mean [95% t interval], n seeds):\n\n{table}"
  )


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
  rows = aggregate.collect(args.sweep_dir, args.last_k)
  if not rows:
    print(f"no run directories under {args.sweep_dir}", file=sys.stderr)
    return 1
  reference = parse_reference(args.reference)
  seeds = aggregate.over_seeds(rows, reference=reference)
  aggregate.to_csv(rows, out.with_name(out.name + ".csv"))
  aggregate.to_csv(seeds, out.with_name(out.name + "_seeds.csv"))
  metrics = [m for m in args.metrics.split(",") if m]
  keys = [k for k in aggregate.override_keys(rows) if k != aggregate.SEED]
  deltas = [f"delta/{m}" for m in metrics if m.startswith("after/")] if reference else []
  text = "\n\n".join(
    [
      f"Per run ({len(rows)} runs; final/* = mean over the last {args.last_k} steps; "
      "[lo, hi] = 95% bootstrap CI over held-out problems):",
      aggregate.to_markdown(rows, metrics, extra=("status", "steps")),
      "Over seeds (mean [95% t interval over seeds]"
      + ("; delta/ = paired difference to the reference, same seed):" if reference else "):"),
      aggregate.to_markdown(seeds, [*metrics, *deltas], keys=keys, extra=("n",)),
    ]
  )
  if args.pair:
    text += "\n\n" + pairs_table(rows, args.pair, [m for m in metrics if m.startswith("after/")])
  out.with_name(out.name + "_table.md").write_text(text + "\n")
  print(text)
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
