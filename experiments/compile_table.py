"""One table of several ``--mode=compile`` reports (docs/scaling.md, "Compiled for the slice").

  python experiments/compile_table.py runs/*/plan/compiled.json [--mfu 0.4]

Per report: the target, per-chip resident state and step peak against HBM, fits, the update's
and the rollout sampler's compile seconds, the update's FLOPs against the model's, the step's
roofline and its time at the stated MFU, sampled tokens per second per chip at that MFU, and the
decode loops' weight gathers.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from grpo_jax.rundir import tables

HEAD = [
  "config", "target", "mesh", "state GiB", "peak GiB", "HBM GiB", "fits", "update compile s",
  "sampler compile s", "update FLOPs / model", "roofline step s", "step s at MFU",
  "sampled tok/s/chip", "decode weight gathers",
]  # fmt: skip


def row(report: dict) -> list:
  gib = lambda b: f"{b / 2**30:.1f}"
  programs = {p["name"]: p for p in report["programs"]}
  update = programs["update"]
  samplers = [p for p in report["programs"] if p["name"].startswith("sample")]
  mfu = report["mfu"]
  mesh = "×".join(str(v) for v in report["mesh"].values())
  return [
    report["config"],
    report["hardware"]["name"],
    mesh,
    gib(report["state_bytes"]),
    gib(report["peak_bytes"]),
    gib(report["hardware"]["hbm_bytes"]),
    "yes" if report["fits"] else "**no**",
    f"{update['compile_s']:.0f}",
    " + ".join(f"{p['compile_s']:.0f}" for p in samplers) or "–",
    f"{update['flops_ratio']:.2f}",
    f"{report['step_roofline_s']:.0f}",
    f"{report[f'step_s_at_mfu_{mfu}']:.0f}",
    f"{report[f'sampled_tokens_per_s_per_chip_at_mfu_{mfu}']:,.0f}",
    str(report["decode"].get("weight_gathers_in_loops", "–")),
  ]


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("reports", nargs="+")
  args = parser.parse_args(argv)
  rows = [row(json.loads(pathlib.Path(p).read_text())) for p in args.reports]
  print(tables.markdown(HEAD, rows))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
