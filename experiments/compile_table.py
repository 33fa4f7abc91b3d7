"""One table of several ``--mode=compile`` reports (docs/scaling.md, "Compiled for the slice").

  python experiments/compile_table.py runs/*/plan/compiled.json

One row per report (``grpo_jax.planning.compiled_table``): the target, per-chip resident state and
step peak against HBM, fits, compile seconds, the update's FLOPs against the model's, the step's
roofline and its time and sampled tokens per second per chip at the MFU the report was written
with (``Report.to_dict``'s ``mfu``, 0.4), and the decode loops' weight gathers.
"""

from __future__ import annotations

import argparse
import sys

from grpo_jax.planning import compiled_table


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("reports", nargs="+", help="compiled.json files")
  args = parser.parse_args(argv)
  print(compiled_table.table_of_files(args.reports))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
