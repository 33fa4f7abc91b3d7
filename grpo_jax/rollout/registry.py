"""Rollout kinds by name: ``ROLLOUTS[rollout_kind(cfg)](cfg, task)`` builds the run's rollout, a
``grpo_jax.rollout.protocols.Rollout`` over a ``Task``.

``"one_stage"``: plain GRPO sampling (``grpo_jax.rollout.one_stage``); ``"two_stage"``:
strategy-conditioned sampling (METHODS §5, ``grpo_jax.rollout.two_stage``), when
``strategy.enabled`` and K > 1. A new kind is a class in its own module, added here.
"""

from __future__ import annotations

from grpo_jax import strategy
from grpo_jax.config.experiment import Experiment
from grpo_jax.rollout.one_stage import OneStageRollout
from grpo_jax.rollout.two_stage import TwoStageRollout

ROLLOUTS = {"one_stage": OneStageRollout, "two_stage": TwoStageRollout}


def rollout_kind(cfg: Experiment) -> str:
  """``"two_stage"`` for strategy sampling with K > 1, else ``"one_stage"``."""
  return "two_stage" if strategy.is_two_stage(cfg) else "one_stage"


def build_rollout(cfg: Experiment, task):
  """The run's rollout kind, built (``ROLLOUTS[rollout_kind(cfg)]``)."""
  return ROLLOUTS[rollout_kind(cfg)](cfg, task)


__all__ = ["ROLLOUTS", "build_rollout", "rollout_kind"]
