"""A sweep's tables on disk (``experiments/aggregate.py``): ``<out>.csv`` (one row per run),
``<out>_seeds.csv`` (per condition over seeds, with the paired difference to a reference) and
``<out>_table.md`` (both tables, key columns, and the paired differences of ``A:B`` pairs).
Conditions are written ``k=v,...`` (values parsed as Python literals, replaced config keys read as
the key that replaced them, as the runs' overrides are)."""

from __future__ import annotations

import pathlib

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


def write(
  sweep_dir: str,
  out: pathlib.Path,
  last_k: int = 10,
  reference: str | None = None,
  metrics: tuple[str, ...] = aggregate.MD_METRICS,
  pairs: tuple[str, ...] = (),
) -> str | None:
  """Writes the three files at prefix ``out`` and returns the Markdown; None when
  ``sweep_dir`` holds no run directory. ``metrics``: the Markdown tables' columns (their
  ``after/`` ones get the paired differences)."""
  rows = aggregate.collect(sweep_dir, last_k)
  if not rows:
    return None
  ref = parse_reference(reference)
  seeds = aggregate.over_seeds(rows, reference=ref)
  aggregate.to_csv(rows, out.with_name(out.name + ".csv"))
  aggregate.to_csv(seeds, out.with_name(out.name + "_seeds.csv"))
  metrics = [m for m in metrics if m]
  keys = [k for k in aggregate.override_keys(rows) if k != aggregate.SEED]
  deltas = [f"delta/{m}" for m in metrics if m.startswith("after/")] if ref else []
  text = "\n\n".join(
    [
      f"Per run ({len(rows)} runs; final/* = mean over the last {last_k} steps; "
      "[lo, hi] = 95% bootstrap CI over held-out problems):",
      aggregate.to_markdown(rows, metrics, extra=("status", "steps")),
      "Over seeds (mean [95% t interval over seeds]"
      + ("; delta/ = paired difference to the reference, same seed):" if ref else "):"),
      aggregate.to_markdown(seeds, [*metrics, *deltas], keys=keys, extra=("n",)),
    ]
  )
  if pairs:
    text += "\n\n" + pairs_table(rows, list(pairs), [m for m in metrics if m.startswith("after/")])
  out.with_name(out.name + "_table.md").write_text(text + "\n")
  return text
