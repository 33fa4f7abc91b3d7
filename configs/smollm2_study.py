"""The study's real-model arm: SmolLM2-135M-Instruct on arithmetic in its learnable band.

  # once: the warm start and the profile of the warm-started policy, exported as the base model
  python experiments/launch.py --config configs/smollm2_arithmetic.py --mode=profile \
      --workdir runs/smollm2_study_base
  python experiments/launch.py --config configs/smollm2_arithmetic.py --mode=export \
      --workdir runs/smollm2_study_base --out runs/smollm2_study_base/hf
  # the sweep, then the report
  python experiments/launch.py --config configs/smollm2_study.py --sweep \
      --workdir runs/smollm2_study
  python experiments/study_report.py runs/smollm2_study --config configs/smollm2_study.py \
      --out docs/study_smollm2

Three conditions on ``configs/smollm2_arithmetic.py:method=full``'s setting (levels 1-3, online
one-line previews K = 4 of G / K = 4 completions at B 4 × G 16, T = 1, lr 3e-5, 20 RL steps),
each differing from the anchor in one thing:

  anchor        Strategy-GRPO, α = 0, no HA-DW
  alpha=-0.5    b = μ_g + α·δ_s with α = −0.5
  anchor+hadw   the anchor with HA-DW (window anchor, λ = 1.3)

Every run starts from one base: the worked-solution warm start (seed 0) exported from
``:base=DIR`` (default ``runs/smollm2_study_base``) as ``DIR/hf``, trained on the band (0.1, 0.9)
of that policy's profile, ``DIR/profile/pass_rates.jsonl``. Seeds vary the RL: the prompt stream
and the sampling. Held-out: 128 problems × 4 samples, pass@1 and pass@4. ``:seeds=N`` sets the
replicates; ``:first_seed`` lets a second launcher process run other seeds side by side. The
design, its power analysis and why the previews are online: docs/study_design.md, "The
real-model arm".
"""

import pathlib

from grpo_jax.config.files import load_module, parse_arg

_BASE = load_module(str(pathlib.Path(__file__).with_name("smollm2_arithmetic.py")))
# The names get_config(arg) reads (``<this file>:name=value,...``); any other is an error.
ARGS = ("steps", "seeds", "first_seed", "base")
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
BIAS = "H4"  # the hypothesis study_report judges from experiments/group_bias.py (--bias)


def get_config(arg=None):
  args = parse_arg(arg, ARGS)
  base = pathlib.Path(args.get("base", "runs/smollm2_study_base"))
  cfg = _BASE.get_config(f"steps={int(args.get('steps', 20))},method=full,warmstart=0")
  cfg.model.hf_path = str(base / "hf")  # the warm-started policy
  cfg.data.pass_rate_file = str(base / "profile" / "pass_rates.jsonl")
  return cfg


def sweep(add, arg=None):
  # Seed-major: a sweep stopped early holds complete replicates of every condition.
  args = parse_arg(arg, ARGS)
  first = int(args.get("first_seed", 0))
  for seed in range(first, first + int(args.get("seeds", 2))):
    for overrides in CONDITIONS.values():
      add(seed=seed, **overrides)
