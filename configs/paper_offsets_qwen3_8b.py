"""Subgroup offsets ("One Offset, Two Directions") on Qwen3-8B-Base with DAPO-Math-17K.

  # one run (α = −0.5), checkpoint directory given explicitly:
  python experiments/launch.py --config configs/paper_offsets_qwen3_8b.py:alpha=-0.5 \
      --config.model.hf_path=/ckpt/Qwen3-8B-Base --workdir /shared/runs/offsets8b_neg
  # the whole study (anchor, α = ±0.5, shuffle, coefficient sweep), one run after another:
  python experiments/launch.py --config configs/paper_offsets_qwen3_8b.py --sweep \
      --workdir /shared/runs/offsets8b --config.model.hf_path=/ckpt/Qwen3-8B-Base
  # the same on a 16-host pod: one `gcloud ... tpu-vm ssh --worker=all` line per run
  python experiments/launch.py --config configs/paper_offsets_qwen3_8b.py --pod \
      --tpu_name my-v5p-128 --workdir /shared/runs/offsets8b
  python experiments/launch.py --config configs/paper_offsets_qwen3_8b.py --dry_run  # memory

Hardware: a TPU v5p-128 slice (64 chips, 95 GiB HBM each; 16 hosts), mesh data 2 × fsdp 8 ×
tensor 4.
The sampler holds the KV cache of all N = B·G = 2048 rows × 5.2k tokens at once (~24 GiB per
chip here), so one 8-GPU host needs a smaller ``sampling.prompts_per_step``. ``--dry_run``
prints the per-chip estimate.

Setting. The subgroup-offset paper trains Qwen3-8B-Base and Olmo3-7B-Base on DAPO-Math-17K with
strategy-conditioned sampling (a short preview, completions conditioned on it, subgroup =
preview) and changes only the baseline, b_i = μ_g + α·δ_s (METHODS §1); evaluation is single
stage on AIME24, AIME25, AIME26 and HMMT25 (pass@1 and pass@16). The paper itself was not
available: its batch size, G, K, lengths, learning rate, step
count, preview prompt and coefficient grid are NOT KNOWN. The values below are ours, taken from
the HA-DW paper's verl setting where one exists (lr 1e-6, no KL, clip 0.2, seq-mean-token-mean).

What it should approach (qualitative only; the paper's numbers were not available): both α > 0
and α < 0 give modest but consistent pass@16 gains over the α = 0 anchor (smaller gains in
pass@1), α < 0 the stronger; shuffled offsets fall below the anchor; a moderate |α| works best
in the coefficient sweep (run on Qwen3-8B-Base only).

Arguments: ``alpha`` (−0.5), ``shuffle`` (0; 1 sets advantage.offset_control = 'shuffle'),
``steps`` (300), ``ckpt`` (checkpoint directory).
"""

from grpo_jax.config import base_config, recipes
from grpo_jax.config.files import parse_arg

# The names get_config(arg) reads (``<this file>:name=value,...``); any other is an error.
ARGS = ("steps", "ckpt", "alpha", "shuffle")
CKPT = "/checkpoints/Qwen3-8B-Base"  # a local copy of Qwen/Qwen3-8B-Base (placeholder)
PRESET = "qwen3_8b_base"  # its shape, for --dry_run and random-init smoke runs
# Coefficient sweep (Qwen3-8B-Base only, as in the paper).
ALPHAS = (-1.0, -0.75, -0.5, -0.25, 0.25, 0.5, 0.75, 1.0)


def get_config(arg=None):
  args = parse_arg(arg, ARGS)
  cfg = base_config()
  cfg.steps = int(args.get("steps", 300))
  # Model: the HF checkpoint, bf16 compute over fp32 master weights, remat, chunked log-probs.
  recipes.paper_scale_model(cfg, args.get("ckpt", CKPT), PRESET)
  # Data: DAPO-Math-17K (deduplicated), DAPO's answer-line template; four competition sets.
  cfg.data.task = "math"
  cfg.data.train_set = "dapo_math_17k_dedup"
  cfg.data.template = "dapo"
  # The checkpoint's chat template around the user message, as verl's RLHFDataset renders every
  # prompt (apply_chat_template with the generation prompt); Qwen3-*-Base tokenizers ship
  # Qwen's ChatML template, and a checkpoint without one gets the raw text.
  cfg.data.chat_template = "auto"
  cfg.data.max_prompt_tokens = 1024
  cfg.data.eval_sets = ("aime24", "aime25", "aime26", "hmmt_feb25")
  # B = 128 prompts × G = 16 rollouts (K = 4 previews × 4 completions), 4k-token responses.
  cfg.sampling.prompts_per_step = 128
  cfg.sampling.group_size = 16
  cfg.sampling.max_new_tokens = 4096
  cfg.sampling.temperature = 1.0
  # Strategy previews: one line, presampled once by the initial policy, masked from the loss.
  cfg.strategy.enabled = True
  cfg.strategy.num_previews = 4
  cfg.strategy.source = "presampled"
  cfg.strategy.max_preview_tokens = 64
  cfg.strategy.preview_template = (
    "\n\nBefore solving, state the solution strategy you will use in one line.\nStrategy:"
  )
  cfg.strategy.delimiter = "\n"
  cfg.strategy.merge_identical = True
  # The baseline: b_i = μ_g + α·δ_s, group-std normalisation of rewards (METHODS §1-2).
  cfg.advantage.baseline = "subgroup_offset"
  cfg.advantage.offset_coef = float(args.get("alpha", -0.5))
  cfg.advantage.offset_control = "shuffle" if int(args.get("shuffle", 0)) else "none"
  # GRPO as recipes.grpo runs it (seq-mean-token-mean, clip 0.2, dual clip 3), AdamW lr 1e-6,
  # β2 0.999, wd 0.1, no KL.
  recipes.grpo(cfg)
  cfg.optimizer.warmup_steps = 10
  cfg.loss.num_minibatches = 4  # 4 optimizer steps per batch (32 prompts each)

  cfg.warmstart.enabled = False  # a pretrained base model needs no warm start
  # TPU v5p-128: 64 chips; rows over data × fsdp, parameters over fsdp × tensor, heads over
  # tensor (the sampler's parameter copy is split over tensor only).
  cfg.mesh.data = 2
  cfg.mesh.fsdp = 8
  cfg.mesh.tensor = 4
  # Gradient accumulation over chunks of one row per data × fsdp device.
  cfg.loss.micro_batch_size = cfg.mesh.data * cfg.mesh.fsdp
  # Evaluation: n = 16 single-stage samples per problem, pass@1 (= avg@16) and pass@16.
  cfg.eval.num_problems = 1000  # every problem of each benchmark (AIME: 30)
  cfg.eval.num_samples = 16
  cfg.eval.ks = (1, 16)
  cfg.eval.temperature = 1.0
  cfg.checkpoint.every = 25
  cfg.checkpoint.keep = 2
  cfg.logging.progress = True
  return cfg


def sweep(add):
  # The directions and the shuffle ablation, then the coefficient sweep.
  add(**{"advantage.offset_coef": 0.0, "advantage.offset_control": "none"})  # Strategy-GRPO
  for alpha in ALPHAS:
    add(**{"advantage.offset_coef": alpha, "advantage.offset_control": "none"})
  for alpha in (-0.5, 0.5):
    add(**{"advantage.offset_coef": alpha, "advantage.offset_control": "shuffle"})
