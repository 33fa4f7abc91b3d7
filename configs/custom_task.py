"""Your own task: rows from a file, rewards from your functions (docs/custom_task.md).

  python3 -m grpo_jax.models.smollm2    # fetches SmolLM2-135M-Instruct into ~/.cache/grpo_jax
  python experiments/launch.py --config configs/custom_task.py --workdir runs/custom

The rows are ``examples/custom_task/reviews.jsonl`` (one-line product reviews, each with a
``prompt`` and a ``label``); the rewards are ``examples/custom_task/rewards.py``'s ``label``
(the answer's first word is the label) and ``brevity`` (a one-word answer). 16 rows are held out
and evaluated before and after RL (pass@k counts a completion whose total reward is over 0.5).

``:tiny=1`` is the shrink the test suite runs (two prompts, short completions, two steps);
``:hf_path=PATH`` takes another checkpoint (a directory, a hub id or a ``.gguf`` file).
"""

import os

from grpo_jax.config import base_config
from grpo_jax.config.files import parse_arg

ARGS = ("tiny", "steps", "hf_path")
EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "custom_task")
GGUF = os.path.expanduser("~/.cache/grpo_jax/SmolLM2-135M-Instruct.Q4_1.gguf")


def get_config(arg=None):
  args = parse_arg(arg, ARGS)
  tiny = bool(int(args.get("tiny", 0)))
  cfg = base_config()
  cfg.steps = int(args.get("steps", 2 if tiny else 10))
  cfg.model.hf_path = args.get("hf_path", GGUF)

  # The rows: a JSON-lines file; "prompt" is the user message, every other column reaches the
  # reward functions. A malformed row stops the load, naming its line.
  cfg.data.task = "dataset"
  cfg.data.train_path = os.path.normpath(os.path.join(EXAMPLE, "reviews.jsonl"))
  cfg.data.prompt_key = "prompt"
  cfg.data.eval_size = 16  # held out (no data.eval_paths)
  cfg.data.max_prompt_tokens = 64
  cfg.data.bad_rows = "error"

  # The rewards: the label is worth 1, a long answer costs up to 0.5.
  rewards = os.path.normpath(os.path.join(EXAMPLE, "rewards.py"))
  cfg.reward.functions = (f"{rewards}:label", f"{rewards}:brevity")
  cfg.reward.weights = (1.0, 1.0)

  # One-stage GRPO: B prompts x G rollouts at T = 1, AdamW, no reference model.
  cfg.strategy.enabled = False
  cfg.advantage.baseline = "group"
  cfg.hadw.enabled = False
  cfg.sampling.prompts_per_step = 2 if tiny else 8
  cfg.sampling.group_size = 4 if tiny else 8
  cfg.sampling.max_new_tokens = 8 if tiny else 16
  cfg.sampling.temperature = 1.0
  cfg.optimizer.learning_rate = 3e-5
  cfg.optimizer.warmup_steps = 2
  cfg.loss.share_prompt = True
  cfg.loss.micro_batch_size = 16
  cfg.model.logps_vocab_chunk = 16_384

  cfg.warmstart.enabled = False  # no reference solutions (a "solution" column would be one)
  cfg.eval.num_problems = 16
  cfg.eval.num_samples = 2 if tiny else 4
  cfg.eval.ks = (1, 2) if tiny else (1, 4)
  cfg.eval.before = cfg.eval.after = True
  cfg.checkpoint.every = 2 if tiny else 10
  cfg.checkpoint.keep = 1
  cfg.mesh.data = -1
  return cfg
