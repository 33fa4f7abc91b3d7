"""Quickstart: the full method on the built-in countdown task with a tiny Qwen3-architecture policy.

  python experiments/launch.py --config configs/quickstart.py --workdir runs/quickstart

Hardware: 2 CPU cores, 2–7 minutes (quiet or shared). What it does: a supervised warm start
until validation pass@1 reaches 0.2, held-out pass@1 / pass@8 (200 problems × 8 samples,
single-stage), then RL with the full method — strategy-conditioned sampling (K = 4 plans per
prompt, G = 8, METHODS §5) + subgroup-offset baseline with α = −0.5 (METHODS §1) + HA-DW (window
anchor, λ = 1.3, §3) — and the same evaluation after. Prints the table, writes results.json and
plots/reward_curve.png.

On this CPU task the plan (`*-;` ...) is part of the answer, so the current policy writes it
each step (``strategy.source='online'``) and its tokens are trained (``train_on_preview``): RL
then improves plan choice as well as execution. The papers' setting — plans presampled once by
the initial policy and masked from the loss — is ``configs/strategy_offset_neg.py:hadw=1``.
Measured (docs/results/2026-12-02_quickstart.md, one CPU with AVX-512): held-out pass@1
0.192 → 0.331 [0.278, 0.380], pass@8 0.695 → 0.525, below its Strategy-GRPO anchor (α = 0, no
HA-DW: 0.351) and plain GRPO (0.387) on the same seed and 150 steps;
``configs/quickstart_compare.py`` runs the three side by side. Runs are deterministic on one
CPU; another CPU gives nearby, different numbers (same page).

``configs/quickstart.py:steps=20`` shortens the run; ``configs/quickstart_grpo.py`` is plain GRPO.
"""

from grpo_jax.config import base_config
from grpo_jax.config.files import parse_arg

# The names get_config(arg) reads (``<this file>:name=value,...``); any other is an error.
ARGS = ("steps",)


def get_config(arg=None):
  args = parse_arg(arg, ARGS)
  cfg = base_config()
  cfg.steps = int(args.get("steps", 150))
  # Strategy-conditioned sampling: 4 plans per prompt, 2 completions per plan.
  cfg.strategy.enabled = True
  cfg.strategy.num_previews = 4
  cfg.strategy.source = "online"
  cfg.strategy.train_on_preview = True
  # b_i = μ_g + α·δ_s: α < 0 credits the plan's quality (the stronger direction in the paper).
  cfg.advantage.baseline = "subgroup_offset"
  cfg.advantage.offset_coef = -0.5
  # History-aware difficulty anchor reweighting.
  cfg.hadw.enabled = True
  # Each group's prompt through the model once in the update (same gradients up to rounding),
  # and the gradient accumulated over chunks of 64 rows (8 groups), which stay in this CPU's
  # caches: the update takes 0.42 instead of 0.53 s a step (docs/results/2026-12-02_performance.md).
  cfg.loss.share_prompt = True
  cfg.loss.micro_batch_size = 64
  return cfg
