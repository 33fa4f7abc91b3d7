"""Does a strategy partition carry signal on the real model, and do offsets that follow it lose?
SmolLM2-135M-Instruct on arithmetic in its band, 7 conditions × 3 seeds × 20 RL steps
(docs/study_design.md, "2026-12-07: the partition-signal arm", registered before its runs).

  # once: the warm start and its profile, exported as the base (as configs/smollm2_study.py)
  python experiments/launch.py --config configs/smollm2_arithmetic.py --mode=profile \
      --workdir runs/smollm2_study_base
  python experiments/launch.py --config configs/smollm2_arithmetic.py --mode=export \
      --workdir runs/smollm2_study_base --out runs/smollm2_study_base/hf
  # the sweep (seed-major), then the report
  python experiments/launch.py --config configs/smollm2_signal.py --sweep \
      --workdir runs/smollm2_signal
  python experiments/study_report.py runs/smollm2_signal --config configs/smollm2_signal.py \
      --out docs/study_signal --last_k 20

Every run starts from the study's base (the worked-solution warm start, seed 0) and trains rank-1
LoRA on every projection (AdamW 3e-4, ``configs/smollm2_arithmetic.py:lora=1``) at B 4 × G 16,
T = 1, on the band (0.1, 0.9) of the base's profile. Two-stage runs draw K = 4 previews of
4 completions each, up to 28 preview tokens; HA-DW is off everywhere. The conditions:

  grpo                 one-stage GRPO at the same B × G (no preview)
  self/anchor          online one-line previews written by the policy (the first line, trained
                       on, as ``method=full``); Strategy-GRPO, α = 0
  self/fixed           the same, b = μ_g + α·δ_s at α = −0.5
  self/shrunk          the same, b = μ_g + α·λ_g·δ_s (``advantage.offset_strength = shrunk``)
  file/anchor          previews drawn from the shipped strategy file (``strategy.file =
                       arithmetic``: six methods of computing, none holding an answer), not
                       trained on; α = 0
  file/fixed, file/shrunk   as for self

Held-out: 128 problems × 4 samples, one-stage (no preview), pass@1 and pass@4, before and after.
``:seeds=N`` and ``:first_seed`` as in configs/smollm2_study.py; ``:base=DIR`` the base.
"""

import pathlib

from grpo_jax.config.files import load_module, parse_arg

_BASE = load_module(str(pathlib.Path(__file__).with_name("smollm2_arithmetic.py")))
# The names get_config(arg) reads (``<this file>:name=value,...``); any other is an error.
ARGS = ("steps", "seeds", "first_seed", "base")
SEEDS = 3
_ONE = {"strategy.enabled": False, "advantage.baseline": "group", "strategy.source": "online"}
_SELF = {"strategy.enabled": True, "advantage.baseline": "subgroup_offset"}
_SELF |= {"strategy.source": "online", "strategy.train_on_preview": True}
_FILE = {**_SELF, "strategy.source": "file", "strategy.train_on_preview": False}
_ALPHA = {
  "anchor": {"advantage.offset_coef": 0.0, "advantage.offset_strength": "fixed"},
  "fixed": {"advantage.offset_coef": -0.5, "advantage.offset_strength": "fixed"},
  "shrunk": {"advantage.offset_coef": -0.5, "advantage.offset_strength": "shrunk"},
}
# name → overrides; every condition names the same keys (grpo_jax.runs.study.label).
CONDITIONS = {
  "grpo": {**_ONE, "strategy.train_on_preview": False, **_ALPHA["anchor"]},
  **{f"self/{a}": {**_SELF, **over} for a, over in _ALPHA.items()},
  **{f"file/{a}": {**_FILE, **over} for a, over in _ALPHA.items()},
}

P1 = "after/pass@1"
# The family (Holm over the four; docs/study_design.md): per preview source, fixed offsets
# against their anchor (predicted Δ < 0: the loss of 2026-12-03) and shrunk against fixed
# (predicted Δ > 0: shrinking backs off where the partition carries no signal).
PRIMARY = (
  ("P1", "self/fixed", "self/anchor", P1, -1),
  ("P2", "self/shrunk", "self/fixed", P1, +1),
  ("P3", "file/fixed", "file/anchor", P1, -1),
  ("P4", "file/shrunk", "file/fixed", P1, +1),
)
HYPOTHESES = {
  "fixed offsets lose (self)": (("P1",), ("P1",)),
  "shrunk beats fixed (self)": (("P2",), ("P2",)),
  "fixed offsets lose (file)": (("P3",), ("P3",)),
  "shrunk beats fixed (file)": (("P4",), ("P4",)),
}
STRATA_PAIR = ("self/anchor", "self/shrunk")  # (reference, treated) of the difficulty strata
# The partition diagnostics over training (the report's --last_k 20: every step), and the
# registered expectations E1a (the file's strategies separate the rewards beyond chance) and
# E1b (self-written previews do not), per seed over the source's three two-stage conditions.
SHARE, NULL = "final/strategy/between_share", "final/strategy/between_share_null"
# The diagnostics over training (curves.png): the between-share with its null dashed.
CURVES = (
  ("reward/mean", "training reward"),
  ("adv/zero_std_frac", "groups with equal rewards"),
  ("strategy/between_share", "between-subgroup share (solid) vs its null (dashed)"),
  ("strategy/offset_reliability", "offset reliability τ̂²/(τ̂²+σ̂²/ñ)"),
  ("adv/offset_abs_mean", "|offset| (mean over rows)"),
)
DESCRIBE = (SHARE, NULL, "final/strategy/offset_reliability", "final/adv/zero_std_frac")
CONTRASTS = (
  ("E1a", ("file/anchor", "file/fixed", "file/shrunk"), SHARE, NULL, "above"),
  ("E1b", ("self/anchor", "self/fixed", "self/shrunk"), SHARE, NULL, "not above"),
)


def get_config(arg=None):
  args = parse_arg(arg, ARGS)
  base = pathlib.Path(args.get("base", "runs/smollm2_study_base"))
  cfg = _BASE.get_config(f"steps={int(args.get('steps', 20))},method=full,warmstart=0,lora=1")
  cfg.model.hf_path = str(base / "hf")  # the warm-started policy
  cfg.data.pass_rate_file = str(base / "profile" / "pass_rates.jsonl")
  cfg.hadw.enabled = False
  cfg.strategy.file = "arithmetic"  # read only by the file conditions
  cfg.strategy.max_preview_tokens = 28  # the file's longest hint; the same budget for self
  cfg.eval.with_strategy = False
  return cfg


def sweep(add, arg=None):
  # Seed-major: a sweep stopped early holds complete replicates of every condition.
  args = parse_arg(arg, ARGS)
  first = int(args.get("first_seed", 0))
  for seed in range(first, first + int(args.get("seeds", SEEDS))):
    for overrides in CONDITIONS.values():
      add(seed=seed, **overrides)
