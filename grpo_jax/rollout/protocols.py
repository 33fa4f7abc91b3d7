"""What a rollout needs from a task, and what the loop and evaluation need from a rollout.

:class:`Task` is implemented by the built-in tasks (``grpo_jax.data``: countdown, math, a
researcher's dataset) and by any of them rewarded by ``reward.functions``
(``grpo_jax.data.rewarded``); :class:`Rollout` by the one-stage and two-stage rollouts
(``grpo_jax.rollout.registry.ROLLOUTS``). Both are structural (``typing.Protocol``): a new task
or rollout kind implements the members, it subclasses nothing.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from grpo_jax.rewards.graded import Graded
from grpo_jax.rollout.batch import RolloutBatch


@runtime_checkable
class Task(Protocol):
  """Prompts, golds and rewards: rows in, fixed-width prompt tokens and float rewards out.

  A row (a "problem") is the task's own object (a dict, a dataclass); rollouts pass rows back to
  the task and never look inside, except for an ``id`` in the logged samples."""

  tokenizer: object
  pad_id: int  # the prompt's left padding and the sampler's
  eos_id: int
  stop_ids: tuple[int, ...]  # sampling stops on any of these
  prompt_len: int  # P, the static prompt width
  votes: bool  # answers are extracted and compared: evaluation reports maj@k
  load_metrics: dict[str, float]  # about the data (rows dropped or skipped at load)

  def train_problems(self, start: int, count: int) -> list:
    """Rows ``start .. start + count`` of the training stream (deterministic by index)."""

  def eval_problems(self, count: int | None = None) -> list:
    """The first ``count`` held-out rows (all when None)."""

  def benchmarks(self, count: int | None = None) -> dict[str, list]:
    """Every evaluation set by name, each cut to ``count`` rows."""

  def encode_prompts(self, rows) -> tuple[np.ndarray, np.ndarray]:
    """int32 ``tokens_BxP`` (left-padded with ``pad_id``) and ``mask_BxP`` (1 = token)."""

  def decode(self, tokens_NxT: np.ndarray, mask_NxT: np.ndarray) -> list[str]:
    """The completions' texts (the masked tokens, special tokens removed)."""

  def rewards(self, rows, completions: list[str]) -> Graded:
    """``(rewards_N, metrics)``: float32 ``[N]``, the reward of ``completions[i]`` for
    ``rows[i]``, and this call's scalars (``reward/*``, a grader's counters). Returned, never
    kept on the task: evaluation and the rollout thread may grade at the same time."""

  def prompt_text(self, row):
    """The prompt as the row holds it (before any chat template): its identity in logs."""

  def answer_of(self, completion: str) -> str | None:
    """The final answer a completion gives (for maj@k and the logs), None when none."""


@runtime_checkable
class Rollout(Protocol):
  """Turns B prompts into one scored :class:`RolloutBatch` of B × G rows."""

  name: str  # the registry name (``ROLLOUTS``)
  prompt_len: int  # P, the prompt slots of its batch
  majority_vote: bool  # evaluation reports maj@k (the task's ``votes``)

  def describe(self) -> str:
    """One line for the log."""

  def prepare(self, policy, workdir, step: int, log=print):
    """Before the loop (e.g. the presample); returns a path or None."""

  def __call__(self, policy, problems, rng) -> RolloutBatch:
    """A training rollout: G samples per problem, graded and packed."""

  def eval_sample(self, policy, problems, num_samples: int, rng) -> RolloutBatch:
    """One evaluation chunk: ``num_samples`` samples per problem."""

  def eval_sampling_info(self) -> dict:
    """What evaluation summaries add under ``sampling``."""

  def finish(self, workdir) -> None:
    """After the loop (per-run statistics)."""


__all__ = ["Rollout", "Task"]
