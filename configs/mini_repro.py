"""CPU mini-reproduction: offsets (α sweep, shuffle, matched noise) and HA-DW on countdown, 3 seeds.

  python experiments/launch.py --config configs/mini_repro.py --sweep --workdir runs/mini_repro
  python experiments/aggregate.py runs/mini_repro --out docs/mini_repro     # the table

Hardware: 2 CPU cores, about 70 minutes for the 27 runs on a shared machine (~2.5 minutes each:
warm start, presampling, 200 held-out problems × 8 samples before and after, 25 RL steps; runs
after the first reuse compiled programs from the sweep's compilation cache). Re-running the
sweep command skips finished runs and resumes unfinished ones.

Every run: the quickstart's tiny Qwen3-architecture policy, a supervised warm start to held-out
pass@1 ≈ 0.15, then Strategy-GRPO sampling (METHODS §5): K = 4 plans per prompt presampled
by the warm-started policy, G = 8 completions (2 per plan), B = 32 prompts per step. Only the
baseline differs between conditions (METHODS §1, §3):

  anchor        α = 0 (Strategy-GRPO)        alpha=±0.5, ±1   b = μ_g + α·δ_s
  shuffle       α = −0.5, offsets permuted across each prompt's plans
  noise         α = −0.5, offsets replaced by zero-sum noise of the same per-prompt magnitude
  +hadw         HA-DW (window anchor, λ = 1.3) on the anchor and on α = −0.5

Runs of one seed share the warm start, the presampled plans and the prompt stream, so the
conditions are compared on common random numbers; seeds 0, 1, 2 replicate the whole study.
What the papers report at scale (Qwen3-8B / Olmo3-7B on DAPO-Math-17K; Qwen3-4B on MATH): both
offset directions a modest pass@16 gain over the anchor, α < 0 the stronger, shuffled offsets
below the anchor; HA-DW about +2 points of average accuracy. At this scale and 25 steps the
differences may well be inside the seed-to-seed noise; docs/mini_repro.md ends with what was seen
(its data, docs/mini_repro.csv, fed the power analysis of configs/study.py's study).
``get_config("steps=…")`` changes the RL length of every run.
"""

from grpo_jax.config import base_config
from grpo_jax.config.files import parse_arg

# The names get_config(arg) reads (``<this file>:name=value,...``); any other is an error.
ARGS = ("steps", "seeds")
SEEDS = (0, 1, 2)
# name → overrides; every run sets the same keys so the aggregated table has one column each.
CONDITIONS = {
  "anchor": {"advantage.offset_coef": 0.0},
  "alpha=-1": {"advantage.offset_coef": -1.0},
  "alpha=-0.5": {"advantage.offset_coef": -0.5},
  "alpha=+0.5": {"advantage.offset_coef": 0.5},
  "alpha=+1": {"advantage.offset_coef": 1.0},
  "shuffle": {"advantage.offset_coef": -0.5, "advantage.offset_control": "shuffle"},
  "noise": {"advantage.offset_coef": -0.5, "advantage.offset_control": "noise"},
  "anchor+hadw": {"advantage.offset_coef": 0.0, "hadw.enabled": True},
  "alpha=-0.5+hadw": {"advantage.offset_coef": -0.5, "hadw.enabled": True},
}


def get_config(arg=None):
  args = parse_arg(arg, ARGS)
  cfg = base_config()
  cfg.steps = int(args.get("steps", 25))
  # B = 32 prompts × G = 8 rollouts per step.
  cfg.sampling.prompts_per_step = 32
  cfg.sampling.group_size = 8
  # Warm start: stop at held-out pass@1 0.15 (room to improve; every group not yet solved).
  cfg.warmstart.target_pass1 = 0.15
  cfg.warmstart.check_every = 100
  # Strategy-conditioned sampling: K = 4 plans (≤ 3 tokens + ';'), presampled once.
  cfg.strategy.enabled = True
  cfg.strategy.num_previews = 4
  cfg.strategy.source = "presampled"
  cfg.strategy.max_preview_tokens = 4
  cfg.strategy.delimiter = ";"
  # b_i = μ_g + α·δ_s over plan subgroups; the sweep sets α, the offset control and HA-DW.
  cfg.advantage.baseline = "subgroup_offset"
  cfg.advantage.offset_coef = 0.0
  cfg.advantage.offset_control = "none"
  cfg.hadw.enabled = False
  cfg.hadw.anchor = "window"
  cfg.hadw.lambda_scale = 1.3
  # Held-out: 200 problems × 8 single-stage samples, pass@1 and pass@8 with bootstrap CIs.
  cfg.eval.num_problems = 200
  cfg.eval.num_samples = 8
  cfg.eval.ks = (1, 8)
  cfg.checkpoint.every = 10
  cfg.logging.progress = False
  cfg.logging.tensorboard = False
  return cfg


def sweep(add, arg=None):
  # Seed-major: a sweep stopped early still holds complete replicates of every condition.
  # ``configs/mini_repro.py:seeds=5`` adds seeds 3 and 4 to a finished 3-seed sweep.
  seeds = range(int(parse_arg(arg, ARGS).get("seeds", len(SEEDS))))
  for seed in seeds:
    for overrides in CONDITIONS.values():
      full = {
        "advantage.offset_coef": 0.0,
        "advantage.offset_control": "none",
        "hadw.enabled": False,
        **overrides,
      }
      add(seed=seed, **full)
