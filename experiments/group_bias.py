"""H4 of the study: the group-relative bias in the policy's own samples (runs/group_bias.py).

  python experiments/group_bias.py --config configs/study.py --seeds 0,1,2,3 \
      --workdir runs/group_bias --out docs/study/bias

Per seed: the study's warm start (the policy every condition of that seed starts RL from, the
one-stage condition's config), checkpointed at step 0, then ``--samples`` samples of each of
the 200 held-out problems at the training temperature (``launch.py --mode=eval`` with
``eval.num_samples``). The samples are cut into groups of G (the study's group size) and
E[p̂ − p | mixed group] is measured by difficulty bin with independent halves for binning and
for p. Writes ``<out>.json`` (per seed and bin) and ``<out>.md``: per bin, the mean over seeds
with a 95% t interval and β(p, G) at the measured p for reference; first for the pre-registered
halves p < 1/2 and p ≥ 1/2 (H4's verdict), then for quarters.
A seed's folder that already holds its evaluation is read back, not redone.
"""

from __future__ import annotations

import argparse
import sys

from grpo_jax.runs import group_bias_report


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  parser.add_argument("--config", default="configs/study.py")
  parser.add_argument("--seeds", default="0,1,2,3", help="comma-separated seeds")
  parser.add_argument("--samples", type=int, default=64, help="samples per problem")
  parser.add_argument("--workdir", required=True, help="one folder per seed is made here")
  parser.add_argument("--out", required=True, help="writes <out>.json and <out>.md")
  args = parser.parse_args(argv)
  seeds = [int(s) for s in args.seeds.split(",")]
  print(group_bias_report.measure(args.config, seeds, args.samples, args.workdir, args.out))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
