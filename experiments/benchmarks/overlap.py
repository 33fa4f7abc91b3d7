"""Step time on-policy against one-step off-policy overlap (``rollout.off_policy_steps``).

  python -m experiments.benchmarks.overlap --devices 2 --steps 6
  python -m experiments.benchmarks.overlap --model real --devices 2 --steps 6 --overrides \
      sampling.max_new_tokens=64

Runs ``configs/smollm2_arithmetic.py`` (SmolLM2-135M-Instruct, B 8 × G 8, the warm start, the
band and evaluation off: the work of each step, not what it learns) through the RL loop once per
mode in one process, on ``--devices`` CPU devices (one mesh over them), and prints per mode the
median over the steps after the first two (compilation) of ``time/step_s``, ``time/rollout_s``
(the sampler's own time), ``time/rollout_wait_s`` (the part of it the step waited for) and
``time/update_s``, with the ratio on-policy / overlap. ``--overrides`` are ``key=value``
config overrides applied to both runs.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile

import numpy as np

from experiments.benchmarks import common as bc

ROOT = pathlib.Path(__file__).resolve().parents[2]
KEYS = ("time/step_s", "time/rollout_s", "time/rollout_wait_s", "time/update_s")
STALENESS = "rollout/staleness"


def smollm2(hf_path: str) -> tuple[str, list[str]]:
  """The config and overrides of the real-model run: the warm start and the band off."""
  config = str(ROOT / f"configs/smollm2_arithmetic.py:hf_path={hf_path},warmstart=0")
  return config, ["data.pass_rate_band=()"]


def run(mode: int, steps: int, config: str, overrides: list[str], workdir: str) -> dict:
  """``steps`` RL steps of ``config`` (with ``overrides``) at ``rollout.off_policy_steps =
  mode``, evaluation off; the medians of ``KEYS`` over the steps after the first two and the
  mean staleness."""
  from grpo_jax.config import files as config_file
  from grpo_jax.rundir import read
  from grpo_jax.train import modes

  cfg = config_file.load(
    config,
    [
      f"steps={steps}",
      "eval.before=false",
      "eval.after=false",
      "logging.plot=false",
      "logging.progress=false",
      f"checkpoint.every={steps}",
      f"rollout.off_policy_steps={mode}",
      *overrides,
    ],
  )
  modes.train(cfg, workdir, log=lambda *_: None)
  steady = read.metrics(workdir)[2:]
  # On-policy the step waits for the whole rollout.
  times = {k: float(np.median([m.get(k, m["time/rollout_s"]) for m in steady])) for k in KEYS}
  return {**times, STALENESS: float(np.mean([m.get(STALENESS, 0) for m in steady]))}


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("--model", default="real", help="real (SmolLM2-135M-Instruct) or a HF directory")
  p.add_argument("--devices", type=int, default=2, help="CPU devices (0 = jax's default)")
  p.add_argument("--steps", type=int, default=6, help="RL steps per mode (the first 2 dropped)")
  p.add_argument("--overrides", nargs="*", default=[], help="key=value for both runs")
  p.add_argument("--json", help="also write the results here")
  args = p.parse_args(argv)
  if args.steps < 3:
    p.error("--steps must be at least 3 (the first two steps compile)")
  bc.set_cpu_devices(args.devices)
  config, overrides = smollm2(bc.model_dir(args.model))
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    for mode in (0, 1):
      times = run(mode, args.steps, config, overrides + args.overrides, f"{tmp}/off{mode}")
      rows.append({"rollout.off_policy_steps": mode, **times})
      print(f"off_policy_steps={mode}: {times}", flush=True)
  ratio = rows[0]["time/step_s"] / rows[1]["time/step_s"]
  machine = bc.machine()
  print(machine)
  print(bc.fmt_table(rows, ["rollout.off_policy_steps", *KEYS, STALENESS]))
  print(f"step time on-policy / overlap: {ratio:.2f}x")
  if args.json:
    out = {"machine": machine, "rows": rows, "ratio": ratio, "args": vars(args)}
    pathlib.Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
  return 0


if __name__ == "__main__":
  sys.exit(main())
