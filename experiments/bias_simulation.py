"""The bias of group-relative advantages and what HA-DW's weight does to it (METHODS §3
statements 11-12): β(p, G) against Monte-Carlo, the paper's Tables 4-6, and HA-DW's gap by λ
(``grpo_jax.runs.bias_simulation``), as CSVs and PNGs in ``--out``.

  python experiments/bias_simulation.py --out /tmp/bias   # about 10 s on one CPU core
"""

from __future__ import annotations

import argparse
import os

from grpo_jax.runs.bias_simulation import run


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--out", required=True, help="output folder for CSVs and PNGs")
  ap.add_argument("--samples", type=int, default=400_000, help="Monte-Carlo groups per cell")
  ap.add_argument("--anchor", type=float, default=0.5, help="HA-DW anchor C for the gap study")
  ap.add_argument("--seed", type=int, default=0)
  args = ap.parse_args(argv)
  res = run(args.out, samples=args.samples, anchor=args.anchor, seed=args.seed)
  for row in res["tables"]:
    name, g, ours, paper, ok = row
    print(f"{name} G={g} ours={ours:.6f} paper={paper:.6f} match={ok}")
  print(f"wrote {sorted(os.listdir(args.out))} to {args.out}")


if __name__ == "__main__":
  main()
