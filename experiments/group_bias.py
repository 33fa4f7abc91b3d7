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
import json
import math
import pathlib
import sys

from grpo_jax.config import files as config_file
from grpo_jax.rundir import tables
from grpo_jax.runs import aggregate, group_bias, study

ONE_STAGE = ["strategy.enabled=false", "advantage.baseline=group", "hadw.enabled=false"]
HALVES = (0.0, 0.5, 1.0)  # the pre-registered split: hard (p < 1/2) and easy prompts


def seed_correct(config: str, seed: int, samples: int, workdir: pathlib.Path):
  """(G, correct_PxM) of one seed's warm-started policy on the held-out problems."""
  overrides = [f"seed={seed}", *ONE_STAGE, f"eval.num_samples={samples}", "eval.ks=(1,)"]
  overrides += ["logging.progress=false", "logging.tensorboard=false", "logging.plot=false"]
  cfg = config_file.load(config, overrides)
  run_dir = workdir / f"seed{seed}"
  files = study.problem_files(run_dir) if (run_dir / "eval").exists() else {}
  if 0 not in files:
    from grpo_jax.train.loop import evaluate_run, train  # noqa: PLC0415 (loads jax)

    train(cfg, run_dir, presample_only=True)  # the warm start, checkpointed at step 0
    evaluate_run(cfg, run_dir, step=0)
    files = study.problem_files(run_dir)
  return int(cfg.sampling.group_size), study.correct_PxN(files[0])


def pooled(per_seed: dict[int, list[dict]]) -> list[dict]:
  """Per bin over seeds: mean bias with a 95% t interval (unit: seed; seeds without a mixed
  group in the bin do not count), mixed groups summed."""
  bins = [r["bin"] for r in next(iter(per_seed.values()))]
  out = []
  for i, name in enumerate(bins):
    members = [seed_rows[i] for seed_rows in per_seed.values()]
    mean, lo, hi = aggregate.t_interval([r["bias"] for r in members])
    pred = aggregate.t_interval([r["predicted"] for r in members])[0]
    mixed = sum(r["mixed"] for r in members)
    out.append(
      {"bin": name, "seeds": sum(math.isfinite(r["bias"]) for r in members), "mixed": mixed}
      | {"bias": mean}
      | {"lo": lo, "hi": hi, "predicted": pred}
    )
  return out


def markdown(rows: list[dict], G: int, samples: int) -> str:
  head = (
    f"E[p̂ − p | mixed group] by difficulty (G = {G}; {samples} samples per problem: each group "
    "against independent halves of the other samples for the bin and for p). Mean over seeds "
    "[95% t interval]; β(p, G) the closed form at the measured p."
  )
  row = lambda r: [
    r["bin"], r["seeds"], r["mixed"], tables.interval(r["bias"], r["lo"], r["hi"], signed=True),
    tables.number(r["predicted"], signed=True),
  ]  # fmt: skip
  header = ["p bin", "seeds", "mixed groups", "measured bias", "β(p, G)"]
  return f"{head}\n\n{tables.markdown(header, map(row, rows))}\n"


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
  workdir = pathlib.Path(args.workdir)
  halves, fine, G = {}, {}, None
  for seed in (int(s) for s in args.seeds.split(",")):
    G, correct_PxM = seed_correct(args.config, seed, args.samples, workdir)
    halves[seed] = group_bias.bias_by_bin(correct_PxM, G, HALVES)
    fine[seed] = group_bias.bias_by_bin(correct_PxM, G)
    print(f"seed {seed}: " + ", ".join(f"{r['bin']} {r['bias']:+.3f}" for r in fine[seed]))
  rows, fine_rows = pooled(halves), pooled(fine)
  out = pathlib.Path(args.out)
  out.parent.mkdir(parents=True, exist_ok=True)
  record = {"G": G, "samples": args.samples, "pooled": rows, "pooled_fine": fine_rows}
  record |= {"per_seed": halves, "per_seed_fine": fine}
  out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
  text = markdown(rows, G, args.samples) + "\n" + markdown(fine_rows, G, args.samples)
  out.with_suffix(".md").write_text(text)
  print(text)
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
