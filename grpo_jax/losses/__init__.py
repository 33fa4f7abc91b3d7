"""Policy losses (METHODS §4): GRPO / DAPO / GSPO clipped surrogates, CISPO, SAPO and GMPO,
the Clip-Cov / KL-Cov entropy controls, aggregation, KL, entropy.

Pure functions of arrays. Per step: ``denoms = denominators(mask_NxT, cfg.loss)`` on the whole
step's final mask, then ``policy_loss(...)`` on each micro-batch with those ``denoms``; the
micro-batch losses (and gradients, and aux metrics) sum to the full-batch values.
"""

from grpo_jax.losses.aggregation import AGGREGATIONS, aggregate, denominators
from grpo_jax.losses.correction import CORRECTIONS, mismatch_metrics
from grpo_jax.losses.entropy_control import CONTROLS
from grpo_jax.losses.kinds import TokenLoss
from grpo_jax.losses.kl import KL_CLAMP, KL_ESTIMATORS, kl_penalty
from grpo_jax.losses.policy import LOSS_KINDS, LossKind, Terms, policy_loss, resolve_clip
from grpo_jax.losses.ratios import (
  RATIOS,
  sequence_log_ratio,
  sequence_ratio,
  token_log_ratio,
  token_ratio,
)
from grpo_jax.losses.surrogate import clipped_surrogate

__all__ = [
  "AGGREGATIONS",
  "CONTROLS",
  "CORRECTIONS",
  "KL_CLAMP",
  "KL_ESTIMATORS",
  "LOSS_KINDS",
  "LossKind",
  "RATIOS",
  "aggregate",
  "clipped_surrogate",
  "denominators",
  "kl_penalty",
  "mismatch_metrics",
  "Terms",
  "TokenLoss",
  "policy_loss",
  "resolve_clip",
  "sequence_log_ratio",
  "sequence_ratio",
  "token_log_ratio",
  "token_ratio",
]
