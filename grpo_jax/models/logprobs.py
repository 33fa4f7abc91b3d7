"""Per-token log-probabilities (and entropies) of a sequence under the tempered policy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from grpo_jax.models.transformer import forward


def logps_from_logits(logits_NxV: jax.Array, temperature: float) -> jax.Array:
  """log_softmax(logits / τ) in float32 — the one definition the trainer and sampler share
  (METHODS §16)."""
  return jax.nn.log_softmax(logits_NxV.astype(jnp.float32) / temperature, axis=-1)


def token_logps(
  graphdef: nnx.GraphDef,
  params: dict,
  tokens_BxL: jax.Array,
  mask_BxL: jax.Array,
  temperature: float = 1.0,
  with_entropy: bool = False,
):
  """logps_BxL[:, t] = log softmax(logits[:, t−1] / τ)[tokens[:, t]] for t ≥ 1; 0 at t = 0.

  Float32 throughout. Positions with ``mask_BxL == 0`` are set to 0 (they are padding). With
  ``with_entropy`` also returns entropy_BxL[:, t] = −Σ_v p_v log p_v of the same tempered
  distribution (the one that predicted token t), 0 at t = 0 and at padding.
  """
  if isinstance(temperature, (int, float)) and temperature <= 0:
    raise ValueError(f"token_logps needs temperature > 0, got {temperature}")
  logits_BxLxV = forward(graphdef, params, tokens_BxL, mask_BxL)
  logp_all_BxLxV = logps_from_logits(logits_BxLxV[:, :-1], temperature)
  next_tokens_BxL1 = tokens_BxL[:, 1:].astype(jnp.int32)
  picked_BxL1 = jnp.take_along_axis(logp_all_BxLxV, next_tokens_BxL1[..., None], axis=-1)[..., 0]
  keep_BxL = mask_BxL.astype(bool)
  zeros_Bx1 = jnp.zeros((tokens_BxL.shape[0], 1), jnp.float32)
  logps_BxL = jnp.where(keep_BxL, jnp.concatenate([zeros_Bx1, picked_BxL1], axis=1), 0.0)
  if not with_entropy:
    return logps_BxL
  entropy_BxL1 = -jnp.sum(jnp.exp(logp_all_BxLxV) * logp_all_BxLxV, axis=-1)
  entropy_BxL = jnp.where(keep_BxL, jnp.concatenate([zeros_Bx1, entropy_BxL1], axis=1), 0.0)
  return logps_BxL, entropy_BxL
