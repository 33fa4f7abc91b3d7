"""AdamW with linear warmup and global-norm gradient clipping (optax)."""

from __future__ import annotations

import optax


def learning_rate_schedule(learning_rate: float, warmup_steps: int) -> optax.Schedule:
  """Linear warmup from 0 over ``warmup_steps`` updates, then constant."""
  if warmup_steps <= 0:
    return optax.constant_schedule(learning_rate)
  return optax.join_schedules(
    [
      optax.linear_schedule(0.0, learning_rate, warmup_steps),
      optax.constant_schedule(learning_rate),
    ],
    boundaries=[warmup_steps],
  )


def make_optimizer(opt_cfg, learning_rate: float | None = None) -> optax.GradientTransformation:
  """``opt_cfg`` is the ``optimizer`` config group; ``learning_rate`` overrides its rate."""
  lr = opt_cfg.learning_rate if learning_rate is None else learning_rate
  parts = []
  if opt_cfg.grad_clip > 0:
    parts.append(optax.clip_by_global_norm(opt_cfg.grad_clip))
  parts.append(
    optax.adamw(
      learning_rate_schedule(lr, opt_cfg.warmup_steps),
      b1=opt_cfg.b1,
      b2=opt_cfg.b2,
      weight_decay=opt_cfg.weight_decay,
    )
  )
  return optax.chain(*parts)
