"""The launcher: one experiment from a config file, with ``--config.key=value`` overrides.

  python experiments/launch.py --config configs/quickstart.py [--workdir DIR] [--config.steps=20]

Re-running the same command on the same workdir resumes from the last checkpoint.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from grpo_jax import config_file  # noqa: E402


def parse_args(argv: list[str]):
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--config", required=True, help="configs/<name>.py[:key=value,...]")
  parser.add_argument("--workdir", default=None, help="run directory (default runs/<name>)")
  parser.add_argument("--mode", default="train", choices=["train"])
  overrides = [a[len("--config."):] for a in argv if a.startswith("--config.")]
  rest = [a for a in argv if not a.startswith("--config.")]
  args = parser.parse_args(rest)
  if args.workdir is None:
    args.workdir = str(pathlib.Path("runs") / pathlib.Path(args.config.split(":")[0]).stem)
  return args, overrides


def results_table(results: dict) -> str:
  ks = [k for k in results.get("before", results.get("after", {})) if k.startswith("pass@")
        and not k.endswith("_ci")]
  lines = [f"held-out problems: {results['num_eval_problems']}",
           "| policy | " + " | ".join(ks) + " |", "|---|" + "---|" * len(ks)]
  for name in ("before", "after"):
    if name in results:
      cells = []
      for k in ks:
        lo, hi = results[name].get(k + "_ci", (float("nan"), float("nan")))
        cells.append(f"{results[name][k]:.3f} [{lo:.3f}, {hi:.3f}]")
      lines.append(f"| {name} RL | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def main(argv: list[str]) -> int:
  args, overrides = parse_args(argv)
  try:
    cfg = config_file.load(args.config, overrides)
  except (KeyError, ValueError, FileNotFoundError) as e:
    print(f"config error: {e.args[0] if e.args else e}", file=sys.stderr)
    return 2
  from grpo_jax.train import train

  results = train(cfg, args.workdir)
  print(results_table(results))
  print(f"run directory: {args.workdir}")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
