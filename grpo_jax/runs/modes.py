"""The launcher's ``--mode`` table: each mode, on one run directory after the preflight, returns
the process's exit status. The work itself is the train layer's, over an open run
(``grpo_jax.train.modes``, ``grpo_jax.train.export``); ``compile`` is the planner's.
"""

from __future__ import annotations

import os
import pathlib
import sys

from grpo_jax.rundir import tables


def results_table(results: dict) -> str:
  """results.json's held-out pass@k before and after RL, as a markdown table."""
  ks = [
    k
    for k in results.get("before", results.get("after", {}))
    if k.startswith("pass@") and not k.endswith("_ci")
  ]
  rows = [
    [f"{name} RL"] + [tables.interval(r[k], *r.get(k + "_ci", ())) for k in ks]
    for name in ("before", "after")
    if (r := results.get(name)) is not None
  ]
  table = tables.markdown(["policy", *ks], rows)
  return f"held-out problems: {results['num_eval_problems']}\n{table}"


def train(e, args) -> int:
  """Runs (or resumes) the experiment; a preempted run exits with ``EXIT_CODE`` (rerun it)."""
  from grpo_jax.train import modes
  from grpo_jax.train.preemption import EXIT_CODE, Preempted

  try:
    results = modes.train(e, args.workdir, allow_config_change=args.allow_config_change)
  except Preempted as error:
    print(f"{error}\nrun directory: {args.workdir}")
    return EXIT_CODE
  print(results_table(results))
  print(f"run directory: {args.workdir}")
  return 0


def evaluate(e, args) -> int:
  """The run directory's checkpoint (or the model as built) on the held-out benchmarks."""
  from grpo_jax.train import modes

  modes.evaluate_run(e, args.workdir, args.step)
  print(f"run directory: {args.workdir}")
  return 0


def profile(e, args) -> int:
  """The training problems' pass rates under the latest (or initial) policy."""
  from grpo_jax.train import modes

  out = modes.profile_run(e, args.workdir, allow_config_change=args.allow_config_change)
  print(f"difficulty profile: {out}\nrun directory: {args.workdir}")
  return 0


def presample(e, args) -> int:
  """Warm start and the strategy previews only; a later ``--mode=train`` resumes from them."""
  from grpo_jax.train import modes

  out = modes.presample_run(e, args.workdir, allow_config_change=args.allow_config_change)
  print(f"presampled previews: {out}\nrun directory: {args.workdir}")
  return 0


def export(e, args) -> int:
  """The run directory's checkpoint as a Hugging Face directory (``--out``)."""
  from grpo_jax.train.export import export_run

  export_run(e, args.workdir, args.out or os.path.join(args.workdir, "hf"), args.step)
  return 0


def compile_(e, args) -> int:
  """Every program of one step compiled for the target; the report goes to
  <workdir>/plan/compiled.{json,md} once all compiled (nothing is written before)."""
  from grpo_jax.planning import compiled

  name = pathlib.Path(args.config.split(":")[0]).stem
  try:
    report = compiled.compile_config(e, args.target, args.topology, name=name)
  except RuntimeError as error:  # no libtpu; a program that does not compile
    print(f"error: {error}", file=sys.stderr)
    return 1
  print(compiled.markdown(report))
  js, _ = compiled.write(report, pathlib.Path(args.workdir) / "plan")
  print(f"report: {js}")
  return 0 if report.fits else 3


MODES = {
  "train": train,
  "eval": evaluate,
  "profile": profile,
  "presample": presample,
  "export": export,
  "compile": compile_,
}


__all__ = ["MODES", "results_table"]
