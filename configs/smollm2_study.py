"""The study's real-model arm: SmolLM2-135M-Instruct on the generated arithmetic set, 20 RL steps.

  python experiments/launch.py --config configs/smollm2_study.py --sweep \
      --workdir runs/smollm2_study
  python experiments/study_report.py runs/smollm2_study --config configs/smollm2_study.py \
      --out docs/study_smollm2

Three conditions on configs/smollm2_arithmetic.py's setting (warm start on worked solutions,
online one-line previews, K = 2, G = 8, B = 4), each differing from the anchor in one thing:

  anchor        Strategy-GRPO, α = 0, no HA-DW
  alpha=-0.5    b = μ_g + α·δ_s with α = −0.5
  anchor+hadw   the anchor with HA-DW (window anchor, λ = 1.3)

Runs of one seed share the warm start and the prompt stream. Held-out: 96 problems × 4 samples,
pass@1 and pass@4. Hardware: 2 CPU cores, about 15 minutes a run alone (warm start and
evaluation before 3.5 min, 20 RL steps of 28-42 s, evaluation after); ``:seeds=N`` sets the
replicates. A run keeps about one core busy, so two launcher processes on other seeds
(``:first_seed=2,seeds=2`` and another work directory) run side by side, about 20 minutes a run.
"""

import pathlib

from grpo_jax.config.files import load_module, parse_arg

_BASE = load_module(str(pathlib.Path(__file__).with_name("smollm2_arithmetic.py")))
# The names get_config(arg) reads (``<this file>:name=value,...``); any other is an error.
ARGS = ("steps", "seeds", "first_seed", "hf_path")
CONDITIONS = {
  "anchor": {"advantage.offset_coef": 0.0, "hadw.enabled": False},
  "alpha=-0.5": {"advantage.offset_coef": -0.5, "hadw.enabled": False},
  "anchor+hadw": {"advantage.offset_coef": 0.0, "hadw.enabled": True},
}

# The report's family (experiments/study_report.py): study.Comparison fields, Holm over both.
PRIMARY = (
  ("R1", "alpha=-0.5", "anchor", "after/pass@4", +1),
  ("R2", "anchor+hadw", "anchor", "after/pass@1", +1),
)
HYPOTHESES = {"H1": (("R1",), ("R1",)), "H3": (("R2",), ("R2",))}
STRATA_PAIR = ("anchor", "anchor+hadw")  # (reference, treated) of the difficulty strata


def get_config(arg=None):
  args = parse_arg(arg, ARGS)
  base_arg = f"steps={int(args.get('steps', 20))}"
  if "hf_path" in args:
    base_arg += f",hf_path={args['hf_path']}"
  return _BASE.get_config(base_arg)


def sweep(add, arg=None):
  # Seed-major: a sweep stopped early holds complete replicates of every condition.
  args = parse_arg(arg, ARGS)
  first = int(args.get("first_seed", 0))
  for seed in range(first, first + int(args.get("seeds", 2))):
    for overrides in CONDITIONS.values():
      add(seed=seed, **overrides)
