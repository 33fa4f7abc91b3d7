"""The base experiment config: every key grpo_jax reads, with its default.

Experiment files in ``configs/`` start from :func:`base_config` and change fields. Configs are
validated and locked after loading (:func:`finalize`): an unknown or misspelt key is an error
naming it and the nearest valid key, a bad value one naming the key and its valid choices or
range (the typed views, ``grpo_jax.config.views``). Groups follow ARCHITECTURE.md: model, data,
sampling, strategy, advantage, hadw, loss, dapo, optimizer, warmstart, mesh, eval, checkpoint,
logging.
"""

from __future__ import annotations

import difflib

import ml_collections
from ml_collections import ConfigDict


def base_config() -> ConfigDict:
  c = ConfigDict()
  c.seed = 0
  # Number of RL steps (one batch of B prompts x G rollouts each).
  c.steps = 60

  # Decoder (Qwen3 architecture). vocab_size=0 takes the task tokenizer's size.
  c.model = ConfigDict()
  c.model.family = "qwen3"
  c.model.vocab_size = 0
  c.model.hidden_dim = 128
  c.model.num_layers = 4
  c.model.num_heads = 4
  c.model.num_kv_heads = 2
  c.model.head_dim = 32
  c.model.mlp_dim = 384
  c.model.rope_theta = 10_000.0
  c.model.norm_eps = 1e-6
  c.model.tie_embeddings = True
  # Compute and parameter dtypes; log-softmax always runs in float32.
  c.model.dtype = "float32"
  c.model.param_dtype = "float32"
  # Recompute each layer's activations in the backward pass: none | full | dots.
  c.model.remat = "none"
  # Log-probs over vocabulary chunks of this many entries (online logsumexp), so the full
  # N x T x V logits are never materialised; 0 = one pass over the whole vocabulary.
  c.model.logps_vocab_chunk = 0
  # A Hugging Face checkpoint directory (or hub id) to start from; its config.json then sets
  # the architecture (qwen3 | llama | olmo3) and the shape fields above are ignored.
  c.model.hf_path = ""
  # A named shape from grpo_jax.models.PRESETS (e.g. 'qwen3_4b_base'), randomly initialised.
  c.model.preset = ""

  # The prompt source. 'countdown' is the built-in CPU task.
  c.data = ConfigDict()
  c.data.task = "countdown"
  # Countdown: how many digits, their range, and the target range.
  c.data.num_numbers = 3
  c.data.max_number = 9
  c.data.max_target = 99
  # Held-out problems for evaluation (disjoint from training problems).
  c.data.eval_size = 200
  # 'math': catalogue names (grpo_jax.data.math.CATALOGUE) or local copies, the prompt template
  # (dapo | hadw | boxed), the static prompt width (longer prompts are dropped and counted) and
  # the per-check wall-clock limit of the math verifier and its worker processes (0 = one per
  # core the host gives this process, at most 64). The tokenizer is model.hf_path's.
  c.data.train_set = "dapo_math_17k_dedup"
  c.data.train_path = ""
  c.data.eval_sets = ("aime24",)
  c.data.eval_paths = ()
  c.data.template = "dapo"
  # How prompts are wrapped: auto (the tokenizer's chat template with the generation prompt,
  # when it has one; raw text otherwise) | none (raw text, BOS as the tokenizer adds it) | the
  # path of a Jinja chat template file.
  c.data.chat_template = "auto"
  c.data.max_prompt_tokens = 512
  c.data.reward_timeout_s = 5.0
  c.data.reward_workers = 0
  # The generated arithmetic sets' relative level frequencies (levels 1-5), in training and
  # held-out problems alike; () = the defaults (grpo_jax.data.math.arithmetic.DEFAULT_WEIGHTS).
  c.data.level_weights = ()
  # Train only on problems whose profiled pass rate (launch.py --mode=profile) lies in [lo, hi]:
  # a group of G is informative (mixed rewards) with probability 1 - p^G - (1 - p)^G.
  # () = every training problem. pass_rate_file: '' = <workdir>/profile/pass_rates.jsonl.
  c.data.pass_rate_band = ()
  c.data.pass_rate_file = ""
  # Re-profile the band's pool with the current policy every k RL steps (a curriculum: the
  # band moves as the policy improves); 0 = the first profile throughout.
  c.data.reprofile_every = 0

  # The difficulty profile (launch.py --mode=profile; grpo_jax.train.profile): n samples of
  # each of the first num_problems training problems (0 = all) at the sampling settings.
  c.profile = ConfigDict()
  c.profile.num_problems = 256
  c.profile.num_samples = 16

  # Rollouts.
  c.sampling = ConfigDict()
  c.sampling.prompts_per_step = 64  # B
  c.sampling.group_size = 8  # G
  c.sampling.max_new_tokens = 12
  c.sampling.temperature = 1.0
  c.sampling.top_k = 0  # 0 = off
  c.sampling.top_p = 1.0  # 1.0 = off
  # Continuous batching (grpo_jax.sampling.continuous): S decode slots serve the rows, and a
  # slot whose row stops takes the next waiting row (a copy of its prompt's keys/values, all
  # prefilled first), so stopped rows stop costing decode work. 0 = every row decodes until
  # the longest stops (as does S >= the rows of a call). A multiple of the mesh's batch
  # devices (data x fsdp): each device serves its own rows with S / devices slots.
  c.sampling.decode_slots = 0

  # Strategy-conditioned two-stage sampling (METHODS §5): K previews per prompt, then G/K
  # completions conditioned on prompt + preview; subgroup id = preview index.
  c.strategy = ConfigDict()
  c.strategy.enabled = False  # off (or num_previews = 1) = plain one-stage GRPO sampling
  c.strategy.num_previews = 4  # K
  c.strategy.source = "presampled"  # presampled (drawn once by the initial policy) | online
  c.strategy.max_preview_tokens = 4  # stage-1 budget; responses hold this + max_new_tokens
  c.strategy.preview_template = ""  # text after the prompt that asks for the preview
  # The stop string that ends a preview: the first token whose decoded text completes it is
  # the preview's last token (also when the tokenizer merges it into a larger token).
  c.strategy.delimiter = ";"
  c.strategy.merge_identical = False  # previews equal after whitespace/case folding share an id
  c.strategy.train_on_preview = False  # preview tokens in the loss mask (never rewarded)
  c.strategy.presample_path = ""  # '' = <workdir>/presample
  c.strategy.presample_prompts = 0  # prompts to presample; 0 = steps * prompts_per_step

  # Advantage baseline and normalisation (METHODS §1-2).
  c.advantage = ConfigDict()
  c.advantage.baseline = "group"  # group | rloo | subgroup_offset
  c.advantage.offset_coef = 0.0  # alpha in b_i = mu_g + alpha * delta_s
  c.advantage.scale = "group"  # group | batch | none
  c.advantage.scale_of = "rewards"  # rewards | advantages
  c.advantage.eps = 1e-6
  c.advantage.offset_shuffle = False
  c.advantage.offset_shuffle_scope = "prompt"  # prompt | batch
  c.advantage.offset_shuffle_recenter = False
  # Matched-noise control: each prompt's offsets replaced by zero-sum Gaussian noise of the same
  # row-weighted RMS (grpo_jax/advantages/noise.py); exclusive with offset_shuffle.
  c.advantage.offset_noise = False
  # Sign-keeping control: each prompt's non-zero offsets trade magnitudes, each subgroup keeps
  # its sign (grpo_jax/advantages/magnitude_scramble.py); exclusive with shuffle and noise.
  # rebalance: both signs' offsets scaled back to the real mass, so advantages stay zero-sum.
  c.advantage.offset_magnitude_scramble = False
  c.advantage.offset_magnitude_scramble_rebalance = True

  # HA-DW (METHODS §3, arXiv 2601.08521).
  c.hadw = ConfigDict()
  c.hadw.enabled = False
  c.hadw.anchor = "window"  # window | kalman | fixed
  c.hadw.history = 10  # h (window) and m (kalman sigma buffer)
  c.hadw.include_current = False
  c.hadw.lambda_scale = 1.3
  c.hadw.eta = 0.1  # kalman base forgetting factor
  c.hadw.sigma_of = "beliefs"  # beliefs | observations (kalman)
  c.hadw.fixed_anchor = 0.5

  # Policy loss (METHODS §4).
  c.loss = ConfigDict()
  c.loss.kind = "grpo"  # grpo | dapo | gspo
  c.loss.aggregation = "token_mean"
  c.loss.clip_low = -1.0  # -1 = the kind's default
  c.loss.clip_high = -1.0  # -1 = the kind's default
  c.loss.dual_clip = 0.0  # c > 1 enables dual clip; 0 = off
  c.loss.kl_coef = 0.0
  c.loss.kl_estimator = "k3"
  c.loss.entropy_coef = 0.0
  # T_max of seq_mean_token_sum_norm (Dr.GRPO's constant); 0 = the mask's padded width T.
  c.loss.norm_length = 0
  # |log-ratio| bound before exp (per token; GSPO: on log s_i).
  c.loss.ratio_log_clamp = 20.0
  # mu = num_iterations x num_minibatches optimizer steps per batch (METHODS §4 statement 15);
  # with mu > 1 the old log-probs are recomputed once before the first step.
  c.loss.num_iterations = 1  # passes over the batch
  c.loss.num_minibatches = 1  # optimizer steps per pass (rows split evenly)
  # Rows per gradient-accumulation chunk; 0 = a whole minibatch. On CPU hosts, chunks of ~8 rows
  # keep activations in cache and run faster (docs/results/2026-12-02_performance.md).
  c.loss.micro_batch_size = 0
  # Run each group's prompt through the model once in the update's forward passes (the rows of
  # a group repeat it; Prefix Grouper, arXiv 2506.05433): same log-probs and gradients up to
  # float rounding, 1/G of the prompt's work (docs/results/2026-12-02_performance.md).
  c.loss.share_prompt = False
  # The update's passes run on the batch cut to its longest completion, rounded up to one of
  # this many widths ceil(T / 2^k), k < n (T = the response slots): the same loss and gradients
  # up to float rounding, for the work of the slots sampled; one compile per width used.
  # 0 (or 1) = always the full width T.
  c.loss.length_buckets = 4

  # DAPO extras (METHODS §4; Yu et al. 2025), applied to each step's rollouts before the update.
  c.dapo = ConfigDict()
  # Drop groups whose filter_metric is all equal; resample until B groups are kept or max rounds.
  c.dapo.dynamic_sampling = False
  c.dapo.oversample = 1.0  # prompts per sampling round = ceil(oversample * B)
  c.dapo.max_sampling_rounds = 3
  # What "all equal" is judged on (verl's algorithm.filter_groups.metric): 'acc' the verifier's
  # accuracy before any shaping (verl's DAPO recipe), 'seq_reward' the shaped reward.
  c.dapo.filter_metric = "acc"  # acc | seq_reward
  # True: raise if fewer than B groups survive; False: train on them (rows padded, logged).
  c.dapo.require_full_batch = False
  # Truncated responses (no EOS within max_new_tokens) are masked out of the loss.
  c.dapo.overlong_filter = False
  # Soft overlong punishment: reward += weight * max(-(L - (L_max - buffer)) / buffer, -1),
  # if L > L_max - buffer (L_max = sampling.max_new_tokens).
  c.dapo.overlong_penalty = False
  c.dapo.overlong_buffer = 4  # tokens
  c.dapo.overlong_penalty_weight = 1.0

  # AdamW with linear warmup, constant after, and global-norm clipping.
  c.optimizer = ConfigDict()
  c.optimizer.learning_rate = 2e-4
  c.optimizer.warmup_steps = 5
  c.optimizer.weight_decay = 0.0
  c.optimizer.b1 = 0.9
  c.optimizer.b2 = 0.99
  c.optimizer.grad_clip = 1.0

  # Supervised warm start on the task's reference solutions, stopped once held-out pass@1
  # reaches target_pass1 (checked every check_every steps) or after max_steps.
  c.warmstart = ConfigDict()
  c.warmstart.enabled = True
  c.warmstart.max_steps = 1500
  c.warmstart.batch_size = 32
  c.warmstart.learning_rate = 1e-3
  c.warmstart.target_pass1 = 0.2
  c.warmstart.check_every = 100
  c.warmstart.check_problems = 64
  # What the loss supervises: all (the reference solution's tokens) | format (the answer line
  # without its digits, and the end token: how the answer is written, none of the working).
  c.warmstart.supervise = "all"

  # Device mesh axis sizes; -1 = all remaining devices.
  c.mesh = ConfigDict()
  c.mesh.data = -1
  c.mesh.fsdp = 1
  c.mesh.tensor = 1
  # Logical-axis rule presets (grpo_jax.sharding.rules): train | sample | replicated. 'train'
  # splits params, grads and Adam moments over fsdp x tensor; 'sample' over tensor only.
  c.mesh.train_rules = "train"
  c.mesh.sample_rules = "sample"
  # Constrain activations at layer boundaries to rows over data x fsdp (jax.set_mesh).
  c.mesh.constrain_activations = True

  # Held-out evaluation: n samples per problem, pass@k for k in ks.
  c.eval = ConfigDict()
  c.eval.num_problems = 200
  c.eval.num_samples = 8
  c.eval.ks = (1, 8)
  c.eval.temperature = 1.0
  c.eval.top_p = 1.0
  # Two-stage (preview → completions) evaluation with online previews; default single-stage.
  c.eval.with_strategy = False
  # Also evaluate every k RL steps (0 = only before and after), writing
  # eval/<benchmark>_step<k>.json and eval/summary.md.
  c.eval.every_steps = 0
  c.eval.before = True
  c.eval.after = True

  c.checkpoint = ConfigDict()
  c.checkpoint.every = 10
  c.checkpoint.keep = 2

  c.logging = ConfigDict()
  c.logging.tensorboard = True
  c.logging.plot = True
  c.logging.progress = True
  # Sampled rollouts written per step to samples.jsonl and TensorBoard text (0 = none).
  c.logging.samples_per_step = 4
  # Weights & Biases (grpo_jax.train.wandb_tracker; pip install grpo_jax[wandb]): step metrics,
  # eval pass@k, the config and sampled rollouts. mode: online | offline | disabled.
  c.logging.wandb = False
  c.logging.wandb_project = "grpo_jax"
  c.logging.wandb_entity = ""  # "" = the account's default
  c.logging.wandb_mode = "online"
  return c


def _all_keys(cfg: ConfigDict, prefix: str = "") -> list[str]:
  keys = []
  for k, v in cfg.items():
    name = f"{prefix}{k}"
    keys.append(name)
    if isinstance(v, ConfigDict):
      keys.extend(_all_keys(v, name + "."))
  return keys


def nearest_key(cfg: ConfigDict, key: str) -> str | None:
  """The valid dotted key closest to ``key`` (for error messages)."""
  match = difflib.get_close_matches(key, _all_keys(cfg), n=1, cutoff=0.0)
  return match[0] if match else None


def override(cfg: ConfigDict, key: str, value) -> None:
  """Sets a dotted key, raising a KeyError that names the nearest valid key if unknown."""
  *path, leaf = key.split(".")
  node = cfg
  for i, part in enumerate(path):
    if part not in node or not isinstance(node[part], ConfigDict):
      raise KeyError(_unknown(cfg, ".".join(path[: i + 1])))
    node = node[part]
  if leaf not in node:
    raise KeyError(_unknown(cfg, key))
  with node.unlocked():
    node[leaf] = value


def _unknown(cfg: ConfigDict, key: str) -> str:
  return f"unknown config key '{key}'; did you mean '{nearest_key(cfg, key)}'?"


def check_keys(cfg: ConfigDict, reference: ConfigDict | None = None, prefix: str = "") -> None:
  """Every key of ``cfg`` must exist in the base config (catches misspelt keys in files)."""
  reference = base_config() if reference is None else reference
  root = base_config()
  for k, v in cfg.items():
    name = f"{prefix}{k}"
    if k not in reference:
      raise KeyError(_unknown(root, name))
    if isinstance(v, ConfigDict):
      if not isinstance(reference[k], ConfigDict):
        raise KeyError(f"config key '{name}' is a value, not a group")
      check_keys(v, reference[k], name + ".")


def finalize(cfg: ConfigDict) -> ConfigDict:
  """Validates keys against the base config, then builds the typed views
  (``grpo_jax.config.views.build``: every value's type, choices and range, and the cross-key
  rules), and locks the config. Raises KeyError / ValueError naming the first bad key."""
  from grpo_jax.config import views

  check_keys(cfg)
  views.build(cfg)
  cfg.lock()
  return cfg


def to_dict(cfg: ConfigDict) -> dict:
  return cfg.to_dict()


__all__ = ["base_config", "finalize", "override", "nearest_key", "check_keys", "ml_collections"]
