"""The study's report (docs/study_design.md's analysis plan) from its run directories.

  python experiments/study_report.py runs/study/seeds0 runs/study/seeds8 --out docs/study \
      --bias docs/study/bias.json

Reads every run under the given sweep directories, labels it with its condition
(``--config``'s CONDITIONS), and writes under ``--out``:

- ``runs.csv``: one row per run (condition, seed, status, before / after pass@k, final metrics);
- ``report.md``: per condition mean [95% t interval] over seeds; the primary comparisons
  (paired Δ, t interval, p, Holm p, the smallest Δ detectable at 80% power); a verdict per
  hypothesis; the same comparisons on the other metric, unadjusted; the withdrawn comparisons,
  unadjusted and outside the family; pass@1 by difficulty stratum; RL's own effect
  (after − before); H4 from ``--bias`` (experiments/group_bias.py);
- ``forest.png``, ``curves.png``, ``strata.png``; ``tests.json`` (the numbers behind the tables).

Unfinished runs are listed and left out; a comparison uses the seeds where both runs finished.

``--prior docs/study`` adds an earlier report's runs (its runs.csv, strata and curves) for every
(condition, seed) the directories lack: a condition added after the earlier run directories
are gone, run beside a rerun of one earlier condition, which must reproduce its earlier rows
(grpo_jax/runs/study_prior.py).
"""

from __future__ import annotations

import argparse
import sys

from grpo_jax.runs import study_report


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  parser.add_argument("sweep_dirs", nargs="+")
  parser.add_argument("--config", default="configs/study.py", help="defines CONDITIONS")
  parser.add_argument("--out", required=True)
  parser.add_argument("--bias", default=None, help="experiments/group_bias.py's <out>.json")
  parser.add_argument("--last_k", type=int, default=10)
  parser.add_argument("--prior", default=None, help="an earlier report's --out directory")
  args = parser.parse_args(argv)
  text = study_report.write(
    args.sweep_dirs, args.config, args.out, args.bias, args.last_k, args.prior
  )
  print(text)
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
