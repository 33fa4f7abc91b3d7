"""HA-DW (arXiv 2601.08521) on Qwen3-4B-Base with MATH: GRPO / GSPO / DAPO ± HA-DW and the
paper's ablations (λ sweep, fixed anchors, G = 8 vs 16).

  # one run: GRPO + HA-DW (λ = 1.3, window anchor)
  python experiments/launch.py --config configs/paper_hadw_qwen3_4b.py:algo=grpo,hadw=1 \
      --config.model.hf_path=/ckpt/Qwen3-4B-Base --workdir /shared/runs/hadw4b_grpo
  # every row of Tables 1, 2, 3 and 7, one run after another (or --pod for one gcloud line per run)
  python experiments/launch.py --config configs/paper_hadw_qwen3_4b.py --sweep \
      --workdir /shared/runs/hadw4b --config.model.hf_path=/ckpt/Qwen3-4B-Base
  python experiments/launch.py --config configs/paper_hadw_qwen3_4b.py --dry_run  # memory

Hardware: the paper trains on one node of 8 A100s with verl (paged vLLM sampling). Here: a TPU
v5p-128 slice (64 chips, 95 GiB HBM, 16 hosts), mesh data 2 × fsdp 8 × tensor 4; the sampler
keeps all N = 256·8 = 2048 rows × 5120 tokens of KV cache at once (~22 GiB per chip). On an
8-GPU host lower ``sampling.prompts_per_step`` until ``--dry_run`` fits.

Setting (paper Table 8 / App. C): MATH train (7.5k, the
``MATH-lighteval`` copy), the paper's boxed template, 256 prompts × G = 8 per step, 1024 prompt /
4096 response tokens, AdamW lr 1e-6 (10 warm-up steps, wd 0.1, clip 1.0), no KL, mini-batch 16
prompts (16 optimizer steps per batch), 3 epochs for GRPO/GSPO (87 steps) and 9 for DAPO (263),
``filtering = False`` for all six runs (so no DAPO dynamic sampling here). HA-DW: window anchor
over h = 10 batch accuracies (the official scripts), λ = 1.3 (Table 7's main row); C⁻ is the
prior of Eq. 13 (``hadw.include_current=False``; the official code uses the posterior).
Algorithms (``grpo_jax.config.recipes``): GRPO with seq_mean_token_mean (App. B, the authors'
scripts), verl's dual clip c = 3 on GRPO and c = 10 on DAPO (the authors' DAPO script), AdamW
β2 = 0.999 (verl), the overlong punishment on DAPO only.

Evaluation: the paper decodes greedily on MATH500, Minerva and OlympiadBench and reports avg@16
at T = 1 on AIME25 and AMC23. One config holds one eval setting (``eval.temperature``,
``eval.num_samples``, ``eval.ks`` apply to every benchmark), so ``eval`` picks it:
``avg16`` (default: T = 1, n = 16, pass@1 = avg@16 — the protocol of the two small, noisy
benchmarks, where one greedy sample on 30 or 40 problems would not resolve the differences) or
``greedy`` (T = 0, n = 1, the protocol of the three others). The paper's table takes MATH500 /
Minerva / OlympiadBench from a second pass over the final checkpoint:
``--mode=eval`` with ``:...,eval=greedy``.

Paper numbers to approach (accuracy %, mean of MATH500 / AIME25 / AMC23 / Minerva /
OlympiadBench; AIME25 and AMC23 avg@16; no seeds or error bars reported):

  Table 1   GRPO 46.5 → +HA-DW 48.7 · GSPO 47.1 → 49.2 · DAPO 46.8 → 49.5
  Table 2   fixed anchor 0.4 / 0.5 / 0.6: 48.1 / 47.8 / 48.0 (dynamic C_t 48.7)
  Table 3   GRPO G = 16: 47.0 (G = 8: 46.5; HA-DW at G = 8: 48.7)
  Table 7   λ = 0.5 / 0.8 / 1.0 / 1.3 / 1.5 / 1.7 / 2.0:
            46.5 / 47.2 / 47.4 / 48.7 / 48.6 / 48.1 / 47.3
  Fig. 1c   MATH500 levels 4-5: HA-DW +3.4 points (eval/*.json ``by_level``)

Arguments: ``algo`` (grpo | gspo | dapo), ``hadw`` (1), ``lam`` (1.3), ``anchor`` (window |
fixed), ``c`` (0.5, the fixed anchor), ``G`` (8), ``epochs`` (3, DAPO 9), ``ckpt``, ``eval``
(avg16 | greedy).
"""

from grpo_jax.config import base_config, recipes
from grpo_jax.config.files import parse_arg

CKPT = "/checkpoints/Qwen3-4B-Base"  # a local copy of Qwen/Qwen3-4B-Base (placeholder)
PRESET = "qwen3_4b_base"
TRAIN_PROBLEMS = 7500  # MATH train
# The names get_config(arg) reads (``<this file>:name=value,...``); any other is an error.
ARGS = ("algo", "ckpt", "G", "epochs", "hadw", "anchor", "lam", "c", "eval")
BENCHMARKS = ("math500", "aime25", "amc23", "minerva", "olympiadbench")


def get_config(arg=None):
  args = parse_arg(arg, ARGS)
  algo = args.get("algo", "grpo")
  cfg = base_config()
  # Model: the HF checkpoint, bf16 compute over fp32 master weights, remat, chunked log-probs.
  recipes.paper_scale_model(cfg, args.get("ckpt", CKPT), PRESET)
  # Data: MATH train with the paper's "... within \boxed{}." template.
  cfg.data.task = "math"
  cfg.data.train_set = "math_train"
  cfg.data.template = "hadw"
  # The checkpoint's chat template, as the authors' verl fork renders prompts (RLHFDataset:
  # apply_chat_template with the generation prompt; Qwen3-Base ships ChatML).
  cfg.data.chat_template = "auto"
  cfg.data.max_prompt_tokens = 1024
  cfg.data.eval_sets = BENCHMARKS
  # B = 256 prompts × G rollouts, 4096-token responses.
  cfg.sampling.prompts_per_step = 256
  cfg.sampling.group_size = int(args.get("G", 8))
  cfg.sampling.max_new_tokens = 4096
  cfg.sampling.temperature = 1.0
  # The algorithm: GRPO | GSPO | DAPO as the paper runs them (grpo_jax.config.recipes), no KL.
  recipes.apply(cfg, algo)
  cfg.dapo.dynamic_sampling = False  # Table 8: filtering = False for every run
  cfg.optimizer.warmup_steps = 10
  # Epochs over MATH train: 3 (GRPO, GSPO) or 9 (DAPO).
  epochs = int(args.get("epochs", 9 if algo == "dapo" else 3))
  cfg.steps = epochs * TRAIN_PROBLEMS // cfg.sampling.prompts_per_step
  # Mini-batches of 16 prompts: 16 optimizer steps per batch.
  cfg.loss.num_minibatches = cfg.sampling.prompts_per_step // 16
  # HA-DW (METHODS §3): window anchor, h = 10, λ; or a fixed anchor c (Table 2).
  cfg.hadw.enabled = bool(int(args.get("hadw", 1)))
  cfg.hadw.anchor = args.get("anchor", "window")
  cfg.hadw.history = 10
  cfg.hadw.include_current = False
  cfg.hadw.lambda_scale = float(args.get("lam", 1.3))
  cfg.hadw.fixed_anchor = float(args.get("c", 0.5))
  cfg.warmstart.enabled = False
  # TPU v5p-128: 64 chips; rows over data × fsdp, parameters over fsdp × tensor, heads over
  # tensor; gradient accumulation over chunks of one row per data × fsdp device.
  cfg.mesh.data = 2
  cfg.mesh.fsdp = 8
  cfg.mesh.tensor = 4
  cfg.loss.micro_batch_size = cfg.mesh.data * cfg.mesh.fsdp
  # Evaluation (see the docstring): avg@16 at T = 1 (AIME25, AMC23) or greedy (MATH500,
  # Minerva, OlympiadBench), every problem of each benchmark.
  cfg.eval.num_problems = 1000
  cfg.eval.top_p = 1.0
  mode = args.get("eval", "avg16")
  if mode == "avg16":
    cfg.eval.num_samples, cfg.eval.ks, cfg.eval.temperature = 16, (1, 16), 1.0
  elif mode == "greedy":
    cfg.eval.num_samples, cfg.eval.ks, cfg.eval.temperature = 1, (1,), 0.0
  else:
    raise ValueError(f"eval must be 'avg16' or 'greedy', got {mode!r}")
  cfg.checkpoint.every = 10
  cfg.checkpoint.keep = 2
  return cfg


def sweep(add):
  # Table 1: each algorithm with and without HA-DW.
  for algo in ("grpo", "gspo", "dapo"):
    for hadw in (0, 1):
      add(arg=f"algo={algo},hadw={hadw}")
  # Table 7: λ sweep for GRPO + HA-DW (1.3 is Table 1's row).
  for lam in (0.5, 0.8, 1.0, 1.5, 1.7, 2.0):
    add(arg=f"algo=grpo,hadw=1,lam={lam}")
  # Table 2: fixed anchors instead of C_t.
  for c in (0.4, 0.5, 0.6):
    add(arg=f"algo=grpo,hadw=1,anchor=fixed,c={c}")
  # Table 3: plain GRPO with twice the rollouts.
  add(arg="algo=grpo,hadw=0,G=16")
