"""Choosing the next token from logits: greedy, temperature, top-k and top-p (nucleus)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from grpo_jax.models.logprobs import logps_from_logits


def sample_next_token(
  key: jax.Array, logits_NxV: jax.Array, temperature: float, top_k: int, top_p: float
) -> tuple[jax.Array, jax.Array]:
  """Draws token_N and returns it with logp_N = log softmax(logits / τ)[token].

  The log-prob is always under the *untruncated* tempered distribution, the one the trainer's
  ``token_logps`` recomputes (METHODS §16). Top-k / top-p sample from a truncated
  distribution instead, so with them on the rollouts are slightly off-policy with respect to
  the log-probs used as π_old. τ = 0 is greedy (argmax); its log-probs are then under τ = 1.

  Order as in HF ``generate``: temperature, then top-k, then top-p on what is left. The sort
  (``lax.top_k``) only runs when one of them is on; top-k alone sorts only k entries.
  """
  if temperature == 0.0:
    token_N = jnp.argmax(logits_NxV, axis=-1).astype(jnp.int32)
    logp_all_NxV = logps_from_logits(logits_NxV, 1.0)
  else:
    logp_all_NxV = logps_from_logits(logits_NxV, temperature)
    V = logits_NxV.shape[-1]
    if top_k > 0 or top_p < 1.0:
      k = min(top_k, V) if top_k > 0 else V
      # logp_all is logits/τ shifted by a per-row constant: same order, same softmax.
      vals_NxK, idx_NxK = jax.lax.top_k(logp_all_NxV, k)
      if top_p < 1.0:
        probs_NxK = jax.nn.softmax(vals_NxK, axis=-1)
        # Keep the smallest prefix whose mass reaches top_p: entry j stays iff the mass before
        # it is < top_p (the top token always stays).
        before_NxK = jnp.cumsum(probs_NxK, axis=-1) - probs_NxK
        vals_NxK = jnp.where(before_NxK < top_p, vals_NxK, -jnp.inf)
      choice_N = jax.random.categorical(key, vals_NxK, axis=-1)
      token_N = jnp.take_along_axis(idx_NxK, choice_N[:, None], axis=-1)[:, 0].astype(jnp.int32)
    else:
      token_N = jax.random.categorical(key, logp_all_NxV, axis=-1).astype(jnp.int32)
  logp_N = jnp.take_along_axis(logp_all_NxV, token_N[:, None], axis=-1)[:, 0]
  return token_N, logp_N
