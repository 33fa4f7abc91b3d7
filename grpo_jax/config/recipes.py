"""The papers' algorithm settings as reusable config pieces (``cfg -> cfg``, applied in place).

Each piece sets a few keys of an experiment config and returns it, so experiment files compose
them: ``recipes.dapo(base_config())``, or only ``recipes.gspo_loss(cfg)`` at quickstart scale.
The numbers are the HA-DW paper's comparison settings (arXiv 2601.08521, training details):

  grpo   token ratio, ε_low = ε_high = 0.2, seq_mean_token_mean (Shao et al. 2024; HA-DW
         paper App. B and the authors' verl scripts: loss_agg_mode=seq-mean-token-mean)
  gspo   sequence ratio, ε = 3e-4 / 4e-4, seq_mean_token_mean  (Zheng et al. 2025, eq. 5-7)
  dapo   clip-higher 0.2 / 0.28, token_mean, dynamic sampling filtering on accuracy,
         soft overlong punishment                             (Yu et al. 2025, §3.1-3.4)
  all    no KL (no reference model), AdamW lr 1e-6, weight decay 0.1, grad clip 1.0,
         β = (0.9, 0.999) (verl's AdamW default; the paper names no β)

The newer losses as pieces (not whole recipes; ``docs/losses.md``): ``cispo_loss`` (MiniMax-M1,
arXiv 2506.13585: no lower bound, the weight capped at 5 as TRL's ScaleRL setting, token_mean),
``sapo_loss`` (arXiv 2511.20347: τ 1.0 / 1.05, seq_mean_token_mean as verl forces), ``gmpo_loss``
(arXiv 2507.20673: log-ratios clipped at ±0.4, the sequence mean), and verl's entropy-control
losses ``clip_cov`` / ``kl_cov`` (arXiv 2505.22617, the authors' verl scripts: r = 2e-4, band
(1, 5), Clip-Cov's PPO clip widened to [0, 2]; KL-Cov without a clip, β = 1).

Reward shaping only where its paper has it: the overlong punishment and dynamic sampling belong
to DAPO; ``grpo`` and ``gspo`` switch both off (``no_shaping``).

Dual clip (Ye et al. 2020; METHODS §4): ℓ = min(ℓ, −c·A) for A < 0, as verl runs its
token-ratio loss (``actor.clip_ratio_c``, applied to negative advantages in
``compute_policy_loss``, always on): GRPO c = 3.0, verl's default; DAPO c = 10.0, the value
verl's DAPO recipes and the HA-DW authors' DAPO script set (``clip_ratio_c=10.0``). GSPO keeps
it off: verl's ``compute_policy_loss_gspo`` has no dual clip (and with ε = 3e-4 / 4e-4 the
sequence ratio would have to reach 3 for it to bind).

Choices the papers leave open, pinned here and named so they can be changed: DAPO's overlong
buffer is 1/5 of the generation limit (4096 of 20480 in the paper) and its dynamic sampling
draws 3× the prompts per round for up to 10 rounds (verl's DAPO recipe), keeping the groups
whose accuracy is not all equal (``dapo.filter_metric = 'acc'``, verl's
``algorithm.filter_groups.metric=acc``); overlong *filtering* is off (the paper's final recipe
uses the soft punishment; ``dapo(cfg, overlong_filter=True)`` turns it on).
"""

from __future__ import annotations


def paper_scale_model(cfg, hf_path: str, preset: str):
  """A Hugging Face checkpoint at paper scale: its config.json sets the architecture (``preset``
  is the fallback for dry runs without it), bf16 compute over fp32 master weights, the decoder
  layers scanned and each rematerialised in the backward pass, log-probs over 16k-entry
  vocabulary chunks (5k-token rows)."""
  cfg.model.hf_path = hf_path
  cfg.model.preset = preset
  cfg.model.dtype = "bfloat16"
  cfg.model.param_dtype = "float32"
  cfg.model.remat = "full"
  cfg.model.logps_vocab_chunk = 16_384
  # One scanned layer body: Qwen3-8B's update compiles for v5p-128 in 83 s against 446 s
  # unrolled, its sampler in 156 s against 287 s (docs/scaling.md).
  cfg.model.scan_layers = True
  return cfg


VERL_DUAL_CLIP = 3.0  # verl's actor.clip_ratio_c (its default, GRPO/PPO)
DAPO_DUAL_CLIP = 10.0  # clip_ratio_c of verl's DAPO recipes and the HA-DW authors' DAPO script


def paper_optimizer(cfg):
  """AdamW, lr 1e-6, weight decay 0.1, global-norm clip 1.0 (HA-DW paper Table 8), β = (0.9,
  0.999) (verl's AdamW, torch's default; the base config's b2 = 0.99 stays for quickstarts)."""
  cfg.optimizer.b1 = 0.9
  cfg.optimizer.b2 = 0.999
  cfg.optimizer.learning_rate = 1e-6
  cfg.optimizer.weight_decay = 0.1
  cfg.optimizer.grad_clip = 1.0
  return cfg


def no_kl(cfg):
  """β = 0: no KL term and no reference model in the train state."""
  cfg.loss.kl_coef = 0.0
  return cfg


def grpo_loss(cfg, aggregation: str = "seq_mean_token_mean"):
  """Token ratio, symmetric clip 0.2, dual clip 3.0 (verl), the sequence-mean of token means
  (HA-DW paper App. B and the authors' scripts)."""
  cfg.loss.kind = "grpo"
  cfg.loss.clip_low = 0.2
  cfg.loss.clip_high = 0.2
  cfg.loss.dual_clip = VERL_DUAL_CLIP
  cfg.loss.aggregation = aggregation
  return cfg


def gspo_loss(cfg):
  """Sequence ratio (token form), clip 3e-4 / 4e-4, sequence-mean of token means, no dual clip
  (verl's GSPO loss has none)."""
  cfg.loss.kind = "gspo"
  cfg.loss.clip_low = 3e-4
  cfg.loss.clip_high = 4e-4
  cfg.loss.dual_clip = 0.0
  cfg.loss.aggregation = "seq_mean_token_mean"
  return cfg


def dapo_loss(cfg):
  """Token ratio, clip-higher 0.2 / 0.28, token-level mean over the whole step, dual clip 10.0
  (verl's DAPO recipes: ``clip_ratio_c=10.0``)."""
  cfg.loss.kind = "dapo"
  cfg.loss.clip_low = 0.2
  cfg.loss.clip_high = 0.28
  cfg.loss.dual_clip = DAPO_DUAL_CLIP
  cfg.loss.aggregation = "token_mean"
  return cfg


def cispo_loss(cfg):
  """CISPO: the clipped weight sg(clip(ρ, 0, 5)) on −A·logπ, token_mean (MiniMax-M1 and
  ScaleRL both average over the step's tokens)."""
  cfg.loss.kind = "cispo"
  cfg.loss.clip_low = 1.0
  cfg.loss.clip_high = 4.0
  cfg.loss.dual_clip = 0.0
  cfg.loss.aggregation = "token_mean"
  return cfg


def sapo_loss(cfg):
  """SAPO: the sigmoid gate with τ_pos = 1.0, τ_neg = 1.05, seq_mean_token_mean (verl forces it)."""
  cfg.loss.kind = "sapo"
  cfg.loss.clip_low = cfg.loss.clip_high = -1.0
  cfg.loss.dual_clip = 0.0
  cfg.loss.sapo_tau_pos = 1.0
  cfg.loss.sapo_tau_neg = 1.05
  cfg.loss.aggregation = "seq_mean_token_mean"
  return cfg


def gmpo_loss(cfg):
  """GMPO: the geometric mean of token ratios clipped to (e^-0.4, e^0.4), averaged over rows."""
  cfg.loss.kind = "gmpo"
  cfg.loss.clip_low = 0.4
  cfg.loss.clip_high = 0.4
  cfg.loss.dual_clip = 0.0
  cfg.loss.aggregation = "seq_mean_token_mean"
  return cfg


def clip_cov(cfg, ratio: float = 2e-4):
  """verl's Clip-Cov loss as the authors' scripts run it: the token-ratio surrogate with the
  clip at [0, 2] (clip_ratio_low = high = 1) and no dual clip (verl's clip_cov has none); r of
  the tokens with covariance in (1, 5) lose their gradient; token_mean."""
  cfg.loss.kind = "grpo"
  cfg.loss.clip_low = 1.0
  cfg.loss.clip_high = 1.0
  cfg.loss.dual_clip = 0.0
  cfg.loss.aggregation = "token_mean"
  cfg.loss.entropy_control = "clip_cov"
  cfg.loss.clip_cov_ratio = float(ratio)
  cfg.loss.clip_cov_lb = 1.0
  cfg.loss.clip_cov_ub = 5.0
  return cfg


# A clip ceiling no ratio reaches (ρ <= e^20 = 4.9e8): verl's KL-Cov loss has no clip.
NO_CEILING = 1e9


def kl_cov(cfg, ratio: float = 2e-4):
  """verl's KL-Cov loss: −A·ρ on every token (no clip: floor 0, ceiling above e^20, no dual
  clip), the r largest-covariance tokens + |log ρ| at weight 1, token_mean (the authors' 32B
  script; their 7B one takes r = 2e-3). It acts from a batch's second optimizer step on, so
  set loss.num_minibatches or loss.num_iterations > 1 (the scripts: 8 minibatches)."""
  cfg.loss.kind = "grpo"
  cfg.loss.clip_low = 1.0
  cfg.loss.clip_high = NO_CEILING
  cfg.loss.dual_clip = 0.0
  cfg.loss.aggregation = "token_mean"
  cfg.loss.entropy_control = "kl_cov"
  cfg.loss.kl_cov_ratio = float(ratio)
  cfg.loss.kl_cov_coef = 1.0
  return cfg


def dynamic_sampling(cfg, oversample: float = 3.0, max_rounds: int = 10, metric: str = "acc"):
  """Drop the groups whose ``metric`` (``dapo.filter_metric``: the verifier's accuracy, as verl's
  DAPO recipe, or the shaped ``seq_reward``) is all equal and refill (train on what is kept
  after ``max_rounds``)."""
  cfg.dapo.dynamic_sampling = True
  cfg.dapo.filter_metric = metric
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


def no_shaping(cfg):
  """No DAPO extras: no dynamic sampling, no overlong punishment or filter."""
  cfg.dapo.dynamic_sampling = False
  cfg.dapo.overlong_penalty = False
  cfg.dapo.overlong_filter = False
  return cfg


def grpo(cfg):
  """GRPO as the HA-DW paper runs it (no reward shaping)."""
  return paper_optimizer(no_kl(no_shaping(grpo_loss(cfg))))


def gspo(cfg):
  """GSPO as the HA-DW paper runs it (no reward shaping)."""
  return paper_optimizer(no_kl(no_shaping(gspo_loss(cfg))))


def dapo(cfg, overlong_filter: bool = False):
  """DAPO as the HA-DW paper runs it: clip-higher, token mean, dynamic sampling, overlong."""
  cfg = overlong(dynamic_sampling(dapo_loss(cfg)), overlong_filter=overlong_filter)
  return paper_optimizer(no_kl(cfg))


# Whole recipes by name.
RECIPES = {"grpo": grpo, "gspo": gspo, "dapo": dapo}


def apply(cfg, name: str):
  """``RECIPES[name](cfg)``; an unknown name lists the valid ones."""
  if name not in RECIPES:
    raise ValueError(f"unknown recipe {name!r}; valid: {', '.join(sorted(RECIPES))}")
  return RECIPES[name](cfg)
