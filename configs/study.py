"""The pre-registered CPU study (docs/study_design.md): 9 conditions × 16 seeds × 50 RL steps.

  python experiments/launch.py --config configs/study.py --sweep --workdir runs/study
  python experiments/study_report.py runs/study --out docs/study      # tables and verdicts

Hardware: 2 CPU cores, about 3.3 hours for the 128 runs (~90 s each: warm start, presampled
plans, 200 held-out problems × 8 samples before and after, 50 RL steps). Two launcher processes
on halves of the seeds (``:first_seed=0,seeds=8`` and ``:first_seed=8,seeds=8``, two work
directories) keep both cores busy; the report reads both. Re-running a command skips finished
runs and resumes unfinished ones: in the work directories of the first 112 runs (the seven
conditions before ``scramble``) it runs the 16 of ``scramble`` alone, about 15 minutes with
the two processes. ``conditions=alpha=-0.5/scramble`` (names joined by ``/``) runs only those.
``shrunk`` (added 2026-12-07) ran in one process beside reruns of ``anchor`` and ``alpha=-0.5``
(``conditions=shrunk``, then ``conditions=anchor/alpha=-0.5``), the report pairing them with the
earlier rows through ``--prior docs/study``.

Every run is the mini-reproduction's (configs/mini_repro.py): the quickstart's tiny policy,
a warm start to held-out pass@1 ≈ 0.15, B = 32 prompts × G = 8 per step. The conditions:

  grpo            one-stage GRPO, group-mean baseline
  grpo+hadw       the same with HA-DW (window anchor, λ = 1.3)
  anchor          Strategy-GRPO, α = 0: K = 4 plans presampled by the warm-started policy,
                  2 completions per plan, plan tokens masked from the loss (the papers' setting)
  alpha=-0.5      b = μ_g + α·δ_s with α = −0.5
  alpha=+0.5      α = +0.5
  shuffle         α = −0.5, offsets permuted across each prompt's plans
  noise           α = −0.5, offsets replaced by zero-sum noise of the same per-prompt magnitude
                  (H2', withdrawn: its runs stay in the sweep and the report, outside the family)
  scramble        α = −0.5, each plan keeps its offset's sign and takes the magnitude of another
                  plan of the prompt, rebalanced to zero-sum (added 2026-12-03 for H2'')
  shrunk          α = −0.5 scaled by the partition's reliability λ (advantage.offset_strength =
                  'shrunk', τ̂² pooled over the step): b = μ_g + α·λ_g·δ_s (added 2026-12-07 for H5)

Runs of one seed share the warm start, the prompt stream and the evaluation draws (and the
strategy conditions their presampled plans), so conditions are compared on common random
numbers and every paired difference is within a seed.
"""

import pathlib

from grpo_jax.config.files import load_module, parse_arg

_MINI = load_module(str(pathlib.Path(__file__).with_name("mini_repro.py")))
# The names get_config(arg) reads (``<this file>:name=value,...``); any other is an error.
ARGS = ("steps", "seeds", "first_seed", "conditions")
SEEDS = 16
STRATEGY = {"strategy.enabled": True, "advantage.baseline": "subgroup_offset"}
ONE_STAGE = {"strategy.enabled": False, "advantage.baseline": "group"}
_UNSET = {"advantage.offset_control": "none", "hadw.enabled": False}
# Keys the sweep gained after its first 128 runs, with the value those runs ran with. The sweep
# sets one on a run only where it differs (run_overrides), so the earlier runs keep their names
# (a re-run skips them), and the analysis reads a run without it as having that value
# (study.label's absent).
ADDED_KEYS = {"advantage.offset_strength": "fixed"}
# Rebalanced to zero-sum by advantage.offset_magnitude_scramble_rebalance's default (True); the
# key is left out of the runs' names, which must stay within a file name's 255 bytes.
SCRAMBLE = {"advantage.offset_control": "magnitude_scramble"}
# λ_g's τ̂² pooled over the step by advantage.offset_strength_scope's default ('batch'); the key is
# left out of the names for the same reason.
SHRUNK = {"advantage.offset_strength": "shrunk"}
# name → overrides; every condition names the same keys, so the analysis labels each run by
# them (grpo_jax.runs.study.label) and the aggregated table has one column each. Runs recorded
# under the three boolean keys that advantage.offset_control replaced keep their directories
# (grpo_jax.runs.recorded) and read as today's keys (grpo_jax.config.legacy).
CONDITIONS = {
  name: {**_UNSET, **ADDED_KEYS, **overrides}
  for name, overrides in {
    "grpo": {**ONE_STAGE, "advantage.offset_coef": 0.0},
    "grpo+hadw": {**ONE_STAGE, "advantage.offset_coef": 0.0, "hadw.enabled": True},
    "anchor": {**STRATEGY, "advantage.offset_coef": 0.0},
    "alpha=-0.5": {**STRATEGY, "advantage.offset_coef": -0.5},
    "alpha=+0.5": {**STRATEGY, "advantage.offset_coef": 0.5},
    "shuffle": {**STRATEGY, "advantage.offset_coef": -0.5, "advantage.offset_control": "shuffle"},
    "noise": {**STRATEGY, "advantage.offset_coef": -0.5, "advantage.offset_control": "noise"},
    "scramble": {**STRATEGY, "advantage.offset_coef": -0.5, **SCRAMBLE},
    "shrunk": {**STRATEGY, "advantage.offset_coef": -0.5, **SHRUNK},
  }.items()
}


def run_overrides(condition: dict) -> dict:
  """A condition's overrides as its runs set them: the :data:`ADDED_KEYS` at their earlier value
  left out."""
  return {k: v for k, v in condition.items() if k not in ADDED_KEYS or v != ADDED_KEYS[k]}


P8, P1 = "after/pass@8", "after/pass@1"
# The design's family of eight primary comparisons (grpo_jax.runs.study.Comparison fields; Holm
# over all eight). H2'' (the sign-keeping magnitude scramble against the real offsets) took H2''s
# place on 2026-12-03, and H5a, H5b (shrunk offsets against the fixed ones and the anchor) joined
# on 2026-12-07, each before any run of its condition (docs/study_design.md, "Changes to the
# plan").
PRIMARY = (
  ("H1a", "alpha=-0.5", "anchor", P8, +1),
  ("H1b", "alpha=-0.5", "alpha=+0.5", P8, +1),
  ("H2a", "shuffle", "alpha=-0.5", P8, -1),
  ("H2b", "shuffle", "anchor", P8, -1),
  ("H2''", "scramble", "alpha=-0.5", P8, -1),
  ("H3", "grpo+hadw", "grpo", P1, +1),
  ("H5a", "shrunk", "alpha=-0.5", P8, +1),
  ("H5b", "shrunk", "anchor", P8, +1),
)
# Withdrawn from the family, reported unadjusted: H2' (shuffle − matched noise) has expected
# Δ 0 whatever the offsets do, since at equal subgroup sizes the noise has the shuffle's mean
# and covariance.
WITHDRAWN = (("H2'", "shuffle", "noise", P8, -1),)
# hypothesis → (its comparisons, the ones that must be significant for "supported").
HYPOTHESES = {
  "H1": (("H1a", "H1b"), ("H1a",)),
  "H2": (("H2a", "H2b"), ("H2a",)),
  "H2''": (("H2''",), ("H2''",)),
  "H3": (("H3",), ("H3",)),
  "H5": (("H5a", "H5b"), ("H5a",)),
}
STRATA_PAIR = ("grpo", "grpo+hadw")  # (reference, treated) of the difficulty strata
BIAS = "H4"  # the hypothesis study_report judges from experiments/group_bias.py (--bias)


def get_config(arg=None):
  args = parse_arg(arg, ARGS)
  cfg = _MINI.get_config(f"steps={int(args.get('steps', 50))}")
  cfg.strategy.train_on_preview = False  # plan tokens masked from the loss
  return cfg


def sweep(add, arg=None):
  # Seed-major: a sweep stopped early holds complete replicates of every condition.
  args = parse_arg(arg, ARGS)
  first = int(args.get("first_seed", 0))
  for seed in range(first, first + int(args.get("seeds", SEEDS))):
    for cond in pick(args.get("conditions")):
      add(seed=seed, **run_overrides(cond))


def pick(names: str | None) -> list[dict]:
  """The conditions a ``conditions=a/b`` argument names (all of them without one), in
  :data:`CONDITIONS`' order; an unknown name is a ValueError naming the valid ones."""
  wanted = names.split("/") if names else list(CONDITIONS)
  unknown = [n for n in wanted if n not in CONDITIONS]
  if unknown:
    raise ValueError(f"unknown study conditions {unknown}; valid: {list(CONDITIONS)}")
  return [cond for name, cond in CONDITIONS.items() if name in wanted]
