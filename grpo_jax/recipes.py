"""The papers' algorithm settings as reusable config pieces (``cfg -> cfg``, applied in place).

Each piece sets a few keys of an experiment config and returns it, so experiment files compose
them: ``recipes.dapo(base_config())``, or only ``recipes.gspo_loss(cfg)`` at quickstart scale.
The numbers are the HA-DW paper's comparison settings (arXiv 2601.08521, training details):

  grpo   token ratio, ε_low = ε_high = 0.2                    (Shao et al. 2024)
  gspo   sequence ratio, ε = 3e-4 / 4e-4, seq_mean_token_mean  (Zheng et al. 2025, eq. 5-7)
  dapo   clip-higher 0.2 / 0.28, token_mean, dynamic sampling,
         soft overlong punishment                             (Yu et al. 2025, §3.1-3.4)
  all    no KL (no reference model), AdamW lr 1e-6, weight decay 0.1, grad clip 1.0

Choices the papers leave open, pinned here and named so they can be changed: GRPO aggregates
with ``token_mean`` (verl's default, which the HA-DW runs use; the original GRPO paper averages
per sequence, ``seq_mean_token_mean``); DAPO's overlong buffer is 1/5 of the generation limit
(4096 of 20480 in the paper) and its dynamic sampling draws 3× the prompts per round for up to
10 rounds (verl's DAPO recipe); overlong *filtering* is off (the paper's final recipe uses the
soft punishment; ``dapo(cfg, overlong_filter=True)`` turns it on).
"""

from __future__ import annotations

from grpo_jax.losses.registry import lookup


def paper_scale_model(cfg, hf_path: str, preset: str):
  """A Hugging Face checkpoint at paper scale: its config.json sets the architecture (``preset``
  is the fallback for dry runs without it), bf16 compute over fp32 master weights, every decoder
  layer rematerialised in the backward pass and log-probs over 16k-entry vocabulary chunks
  (5k-token rows)."""
  cfg.model.hf_path = hf_path
  cfg.model.preset = preset
  cfg.model.dtype = "bfloat16"
  cfg.model.param_dtype = "float32"
  cfg.model.remat = "full"
  cfg.model.logps_vocab_chunk = 16_384
  return cfg


def paper_optimizer(cfg):
  """AdamW, lr 1e-6, weight decay 0.1, global-norm clip 1.0."""
  cfg.optimizer.learning_rate = 1e-6
  cfg.optimizer.weight_decay = 0.1
  cfg.optimizer.grad_clip = 1.0
  return cfg


def no_kl(cfg):
  """β = 0: no KL term and no reference model in the train state."""
  cfg.loss.kl_coef = 0.0
  return cfg


def grpo_loss(cfg, aggregation: str = "token_mean"):
  """Token ratio, symmetric clip 0.2."""
  cfg.loss.kind = "grpo"
  cfg.loss.clip_low = 0.2
  cfg.loss.clip_high = 0.2
  cfg.loss.aggregation = aggregation
  return cfg


def gspo_loss(cfg):
  """Sequence ratio (token form), clip 3e-4 / 4e-4, sequence-mean of token means."""
  cfg.loss.kind = "gspo"
  cfg.loss.clip_low = 3e-4
  cfg.loss.clip_high = 4e-4
  cfg.loss.aggregation = "seq_mean_token_mean"
  return cfg


def dapo_loss(cfg):
  """Token ratio, clip-higher 0.2 / 0.28, token-level mean over the whole step."""
  cfg.loss.kind = "dapo"
  cfg.loss.clip_low = 0.2
  cfg.loss.clip_high = 0.28
  cfg.loss.aggregation = "token_mean"
  return cfg


def dynamic_sampling(cfg, oversample: float = 3.0, max_rounds: int = 10):
  """Drop all-equal-reward groups and refill (train on what is kept after ``max_rounds``)."""
  cfg.dapo.dynamic_sampling = True
  cfg.dapo.oversample = float(oversample)
  cfg.dapo.max_sampling_rounds = int(max_rounds)
  cfg.dapo.require_full_batch = False
  return cfg


def overlong(cfg, buffer: int | None = None, weight: float = 1.0, overlong_filter: bool = False):
  """Soft overlong punishment over the last ``buffer`` tokens (default: 1/5 of the limit)."""
  cfg.dapo.overlong_penalty = True
  cfg.dapo.overlong_buffer = int(buffer or max(1, cfg.sampling.max_new_tokens // 5))
  cfg.dapo.overlong_penalty_weight = float(weight)
  cfg.dapo.overlong_filter = bool(overlong_filter)
  return cfg


def grpo(cfg):
  """GRPO as the HA-DW paper runs it."""
  return paper_optimizer(no_kl(grpo_loss(cfg)))


def gspo(cfg):
  """GSPO as the HA-DW paper runs it."""
  return paper_optimizer(no_kl(gspo_loss(cfg)))


def dapo(cfg, overlong_filter: bool = False):
  """DAPO as the HA-DW paper runs it: clip-higher, token mean, dynamic sampling, overlong."""
  cfg = overlong(dynamic_sampling(dapo_loss(cfg)), overlong_filter=overlong_filter)
  return paper_optimizer(no_kl(cfg))


# Whole recipes by name.
RECIPES = {"grpo": grpo, "gspo": gspo, "dapo": dapo}


def apply(cfg, name: str):
  """``RECIPES[name](cfg)``; an unknown name lists the valid ones."""
  return lookup(RECIPES, name, "recipe")(cfg)
