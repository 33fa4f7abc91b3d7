"""GRPO on Qwen3-1.7B (or 4B, or 8B with LoRA) with MATH on one TPU v5e-8 host: the slice most
academic TPU users have (8 chips × 16 GiB HBM), sized with the compiler.

  # check it fits before booking (a CPU host with the [tpu] extra; no TPU, no weights)
  JAX_PLATFORMS=cpu python experiments/launch.py --config configs/grpo_v5e8_qwen3.py \
      --mode=compile --target v5e-8
  # train (on the v5e-8 VM)
  python experiments/launch.py --config configs/grpo_v5e8_qwen3.py \
      --config.model.hf_path=/ckpt/Qwen3-1.7B --workdir runs/grpo_v5e8

Mesh fsdp 4 × tensor 2: parameters and Adam moments over all 8 chips, heads over 2 (the sampler
reads half the weights per chip and token), rows over the 4 fsdp devices. For Qwen3-1.7B,
B 28 × G 8 × T 2,048 is the largest B whose compiled step fits in 90% of 16 GiB per chip (14.23
GiB; B 32 needs 15.70): the sampler's KV cache of the B·G rows bounds it
(docs/results/2026-12-07_tpu_compile.md). Qwen3-4B does not fit a v5e-8 at any B: float32
masters, Adam moments and the update's gradient buffers take 11 of the 14.4 GiB before any
activation (15.26 GiB compiled at B 8); take a v6e-8 (32 GiB a chip) with the same mesh.

Qwen3-8B fits with rank-16 LoRA (``model=8b``, all projections, α 32, 10× the rate): the base is
frozen in bf16 (2 GiB a chip over tensor 8), and only the adapters have float32 masters and Adam
moments. Its mesh is tensor 8 with no fsdp: a frozen base has no optimizer state to split, and
the sampler then reads the train layout, so no decode step gathers a weight (under fsdp 4 ×
tensor 2 the sampler's merged copy takes 8 GiB a chip, and sampling from the train layout
gathers the weights in every decode step). B 21 × G 8 × T 2,048 is the largest B that fits
(14.17 GiB; each prompt of 8 rows adds 0.42 GiB of KV cache, so B 22 needs 14.6 of the 14.4
allowed). ``--config.model.lora.sampler=unmerged`` samples from the base itself with the
adapters beside it, no 1.91 GiB merged copy: B 25 fits at 13.49 GiB (docs/scaling.md).

Arguments: ``model`` (1.7b | 4b | 8b), ``B`` (prompts per step), ``G`` (group size), ``T`` (new
tokens), ``ckpt``.
"""

from grpo_jax.config import base_config, recipes
from grpo_jax.config.files import parse_arg

ARGS = ("model", "B", "G", "T", "ckpt")
PRESETS = {"1.7b": "qwen3-1.7b", "4b": "qwen3_4b_base", "8b": "qwen3_8b_base"}
# 1.7B and 8B (LoRA): the largest B × G × T that fits a v5e-8 per XLA (--mode=compile --target
# v5e-8); 4B: the B compiled for the finding above (it fits no v5e-8).
FITS = {"1.7b": (28, 8, 2048), "4b": (8, 8, 2048), "8b": (21, 8, 2048)}
LORA = {"8b": 16}  # rank of the LoRA runs (model.lora, all_linear); full fine-tuning otherwise


def get_config(arg=None):
  args = parse_arg(arg, ARGS)
  size = args.get("model", "1.7b")
  if size not in PRESETS:
    raise ValueError(f"model must be one of {sorted(PRESETS)}, got {size!r}")
  B, G, T = FITS[size]
  cfg = base_config()
  recipes.paper_scale_model(
    cfg, args.get("ckpt", f"/checkpoints/Qwen3-{size.upper()}"), PRESETS[size]
  )
  cfg.data.task = "math"
  cfg.data.train_set = "math_train"
  cfg.data.max_prompt_tokens = 512
  cfg.sampling.prompts_per_step = int(args.get("B", B))
  cfg.sampling.group_size = int(args.get("G", G))
  cfg.sampling.max_new_tokens = int(args.get("T", T))
  recipes.apply(cfg, "grpo")
  cfg.loss.num_minibatches = max(1, cfg.sampling.prompts_per_step // 16)
  cfg.warmstart.enabled = False
  cfg.mesh.data = 1
  cfg.mesh.fsdp = 4
  cfg.mesh.tensor = 2
  if size in LORA:  # a frozen bf16 base: no fsdp, the sampler reads the train layout (doc)
    cfg.model.lora.rank = LORA[size]
    cfg.model.lora.alpha = 2.0 * LORA[size]
    cfg.optimizer.learning_rate = 10 * cfg.optimizer.learning_rate
    cfg.mesh.fsdp = 1
    cfg.mesh.tensor = 8
  cfg.loss.micro_batch_size = cfg.mesh.data * cfg.mesh.fsdp  # one row per device a micro-batch
  cfg.eval.num_problems = 500
  cfg.eval.num_samples = 4
  cfg.eval.ks = (1, 4)
  cfg.steps = 200
  cfg.checkpoint.every = 20
  return cfg
