"""A task whose rewards come from the configured reward functions (``reward.functions``,
``grpo_jax.rewards.functions``) instead of its own grader: everything else (prompts, stop
tokens, evaluation sets, warm start) is the task's.

Each function sees the prompts (the task's ``prompt_text``: a string, or a dataset's chat
messages), the completions and the rows' other fields as columns; each call returns its
``reward/<fn>/*`` scalars with the rewards (``Graded``), which the rollouts log with the step.
"""

from __future__ import annotations

import dataclasses

from grpo_jax.rewards.functions import RewardFunctions
from grpo_jax.rewards.graded import Graded

HIDDEN = ("input_ids", "index", "where")  # row fields that are the task's, not the dataset's


def columns(rows) -> dict[str, list]:
  """The rows' fields, one list per field (dataclass rows by their fields)."""
  dicts = [dataclasses.asdict(r) if dataclasses.is_dataclass(r) else dict(r) for r in rows]
  keys = [k for k in (dicts[0] if dicts else {}) if k not in HIDDEN]
  return {k: [d.get(k) for d in dicts] for k in keys}


class RewardedTask:
  """``task`` with ``rewards`` computed by ``functions``."""

  def __init__(self, task, functions: RewardFunctions):
    self._task = task
    self.functions = functions

  def __getattr__(self, name):  # everything but the rewards is the task's
    return getattr(self._task, name)

  def rewards(self, rows, completions: list[str]) -> Graded:
    """float32 ``[N]``: the weighted reward of ``completions[i]`` for ``rows[i]``, with the
    functions' ``reward/<fn>/*`` scalars."""
    if len(rows) != len(completions):
      raise ValueError(f"{len(rows)} rows but {len(completions)} completions")
    prompts = [self._task.prompt_text(r) for r in rows]
    return Graded(*self.functions(prompts, completions, columns(rows)))


def with_reward_functions(task, reward_cfg, data_cfg):
  """``task`` itself when ``reward.functions`` is empty, else its :class:`RewardedTask`."""
  if not reward_cfg.functions:
    return task
  functions = RewardFunctions.load(
    reward_cfg.functions,
    reward_cfg.weights,
    timeout_s=data_cfg.reward_timeout_s,
    num_workers=data_cfg.reward_workers,
  )
  return RewardedTask(task, functions)


__all__ = ["RewardedTask", "columns", "with_reward_functions"]
