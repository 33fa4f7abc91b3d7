"""The task registry: ``data.task`` names a prompt source and how to build it from the config.

A task is the object the loop samples from: ``train_problems(start, count)``, ``benchmarks``,
``encode_prompts``, ``rewards``, ``decode``, its tokenizer and stop tokens. Add one by adding a
builder here; ``config.checks`` reads the names for ``data.task``'s valid choices.
"""

from __future__ import annotations


def _countdown(cfg):
  from grpo_jax.data.countdown import CountdownTask  # noqa: PLC0415

  return CountdownTask.from_config(cfg)


def _math(cfg):
  """Datasets + math-verify grading, tokenized with ``model.hf_path``'s tokenizer."""
  if not cfg.model.hf_path:
    raise ValueError("data.task='math' needs model.hf_path (its tokenizer encodes the prompts)")
  from grpo_jax import models  # noqa: PLC0415
  from grpo_jax.data.math.task import MathTask  # noqa: PLC0415

  return MathTask.from_config(cfg, models.load_tokenizer(cfg.model.hf_path))


def _dataset(cfg):
  """The researcher's own rows (``grpo_jax.data.dataset_task``), ``model.hf_path``'s tokenizer."""
  from grpo_jax import models  # noqa: PLC0415
  from grpo_jax.data.dataset_task import DatasetTask  # noqa: PLC0415

  return DatasetTask.from_config(cfg, models.load_tokenizer(cfg.model.hf_path))


TASKS = {"countdown": _countdown, "math": _math, "dataset": _dataset}


def build_task(cfg):
  """The prompt source named by ``data.task``, rewarded by ``reward.functions`` when set."""
  from grpo_jax.data.rewarded import with_reward_functions  # noqa: PLC0415

  return with_reward_functions(TASKS[cfg.data.task](cfg), cfg.reward, cfg.data)


__all__ = ["TASKS", "build_task"]
