"""Choosing the next token from logits: greedy, temperature, top-k and top-p (nucleus).

Draws are exact inverse-CDF draws with one uniform per row (``categorical``), not Gumbel-max:
``jax.random.categorical`` spends V threefry uniforms per row, which on CPU cost more than the
whole decode step of a small model (64 rows × 4,096 vocab: 5.0 ms against 0.24 ms here; at a
151,936 vocab 221 ms against 21 ms; docs/results/2026-12-02_performance.md).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from grpo_jax.models.logprobs import logps_from_logits

BLOCK = 128  # entries per block of the two-level inverse CDF


def _last_positive(x_NxM: jax.Array) -> jax.Array:
  """Index of the last entry > 0 in each row (0 if none). Shapes: NxM -> N."""
  M = x_NxM.shape[-1]
  return M - 1 - jnp.argmax(x_NxM[:, ::-1] > 0, axis=-1)


def row_uniforms(key: jax.Array, num_rows: int) -> jax.Array:
  """The one U[0, 1) per row that a draw consumes: uniform_N float32."""
  return jax.random.uniform(key, (num_rows,), jnp.float32)


def categorical(
  key: jax.Array, logits_NxV: jax.Array, block: int = BLOCK
) -> tuple[jax.Array, jax.Array]:
  """One draw per row from softmax(logits) and its log-prob: token_N int32, logp_N float32."""
  return inverse_cdf(row_uniforms(key, logits_NxV.shape[0]), logits_NxV, block)


def inverse_cdf(
  uniform_N: jax.Array, logits_NxV: jax.Array, block: int = BLOCK
) -> tuple[jax.Array, jax.Array]:
  """The draw of ``categorical`` for given uniforms (U[0, 1), one per row).

  Inverse CDF in two levels so that no length-V cumulative sum is needed: u ~ U(0, Z)
  (Z = Σ exp(logits − max)) first picks the block of ``block`` entries whose cumulative mass
  passes u, then the entry inside it. An entry is picked with probability p_v (up to float
  rounding, as any sampler); entries of zero mass (logit −inf: top-k / top-p truncation) are
  never picked, also when rounding puts u at an edge. logp = logit − max − log Z, the
  log-softmax of the given logits: of the renormalised truncation when some are −inf.
  """
  N, V = logits_NxV.shape
  x_NxV = logits_NxV.astype(jnp.float32)
  max_Nx1 = jnp.max(x_NxV, axis=-1, keepdims=True)
  p_NxV = jnp.exp(x_NxV - max_Nx1)
  nb = -(-V // block)
  p_NxBxK = jnp.pad(p_NxV, ((0, 0), (0, nb * block - V))).reshape(N, nb, block)
  mass_NxB = jnp.sum(p_NxBxK, axis=-1)
  cdf_NxB = jnp.cumsum(mass_NxB, axis=-1)
  total_N = cdf_NxB[:, -1]
  u_N = uniform_N.astype(jnp.float32) * total_N
  # Blocks whose cumulative mass is ≤ u lie wholly before the draw (zero-mass blocks included).
  blk_N = jnp.minimum(jnp.sum(cdf_NxB <= u_N[:, None], axis=-1), _last_positive(mass_NxB))
  in_NxK = jnp.take_along_axis(p_NxBxK, blk_N[:, None, None], axis=1)[:, 0]
  before_N = jnp.take_along_axis(cdf_NxB - mass_NxB, blk_N[:, None], axis=1)[:, 0]
  u_in_N = jnp.maximum(u_N - before_N, 0.0)
  idx_N = jnp.sum(jnp.cumsum(in_NxK, axis=-1) <= u_in_N[:, None], axis=-1)
  idx_N = jnp.minimum(idx_N, _last_positive(in_NxK))
  token_N = (blk_N * block + idx_N).astype(jnp.int32)
  picked_N = jnp.take_along_axis(x_NxV, token_N[:, None], axis=-1)[:, 0]
  return token_N, picked_N - max_Nx1[:, 0] - jnp.log(total_N)


def first_argmax(x_NxV: jax.Array) -> jax.Array:
  """The first index of each row's maximum (``jnp.argmax``'s result on finite rows) as a max
  and a min reduction. ``jnp.argmax`` lowers to one variadic (value, index) reduce, and over
  the prefill's repeated logits (``prompt_share`` > 1) XLA:CPU's LLVM backend took about two
  minutes to compile that one small kernel."""
  V = x_NxV.shape[-1]
  is_max_NxV = x_NxV == jnp.max(x_NxV, axis=-1, keepdims=True)
  iota_NxV = jax.lax.broadcasted_iota(jnp.int32, x_NxV.shape, x_NxV.ndim - 1)
  return jnp.min(jnp.where(is_max_NxV, iota_NxV, V), axis=-1)


def truncate(scaled_NxV: jax.Array, top_k: int, top_p: float) -> tuple[jax.Array, jax.Array]:
  """The top-k / top-p set S of each row, in descending order: vals_NxK (the logits, −inf
  where top-p drops an entry) and idx_NxK (their token ids); K = top_k, or V with top-k off.
  Top-p runs on the renormalised top-k distribution (HF ``generate``'s order, and vLLM's)."""
  V = scaled_NxV.shape[-1]
  k = min(top_k, V) if top_k > 0 else V
  vals_NxK, idx_NxK = jax.lax.top_k(scaled_NxV, k)
  if top_p < 1.0:
    probs_NxK = jax.nn.softmax(vals_NxK, axis=-1)
    # Keep the smallest prefix whose mass reaches top_p: entry j stays iff the mass before
    # it is < top_p (the top token always stays).
    before_NxK = jnp.cumsum(probs_NxK, axis=-1) - probs_NxK
    vals_NxK = jnp.where(before_NxK < top_p, vals_NxK, -jnp.inf)
  return vals_NxK, idx_NxK


def sample_next_token(
  uniform_N: jax.Array, logits_NxV: jax.Array, temperature: float, top_k: int, top_p: float
) -> tuple[jax.Array, jax.Array]:
  """Draws token_N from the distribution the settings define and returns it with its log-prob
  under that distribution, logp_N = log p̃[token] (π_rollout, METHODS §8):

    p̃ = softmax(logits / τ) restricted to the top-k / top-p set S and renormalised:
    p̃_v = exp(logits_v / τ) / Σ_{u ∈ S} exp(logits_u / τ) for v ∈ S, 0 elsewhere.

  vLLM reports the same (``processed_logprobs``, ``sampling.vllm_engine``). With top-k and
  top-p off (the training default) S is the whole vocabulary and logp is the log softmax the
  trainer's ``token_logps`` recomputes (METHODS §4 statement 16); with them on, logp exceeds
  the trainer's by −log Σ_{u ∈ S} softmax(logits / τ)_u, the truncation the rollout
  correction weighs. τ = 0 is greedy (argmax); its log-probs are under τ = 1, untruncated
  (vLLM's greedy path also skips top-k / top-p).

  ``uniform_N``: one U[0, 1) per row (``row_uniforms``), the only randomness of the draw; the
  sampler draws all steps' uniforms before its decode loop.

  Order as in HF ``generate``: temperature, then top-k, then top-p on what is left. The sort
  (``lax.top_k``) only runs when one of them is on; top-k alone sorts only k entries.
  """
  if temperature == 0.0:
    token_N = first_argmax(logits_NxV)
    logp_all_NxV = logps_from_logits(logits_NxV, 1.0)
    return token_N, jnp.take_along_axis(logp_all_NxV, token_N[:, None], axis=-1)[:, 0]
  scaled_NxV = logits_NxV.astype(jnp.float32) / temperature
  if top_k == 0 and top_p == 1.0:
    return inverse_cdf(uniform_N, scaled_NxV)
  vals_NxK, idx_NxK = truncate(scaled_NxV, top_k, top_p)
  # The draw's log-prob is already under the renormalised truncation (the −inf entries hold
  # no mass in inverse_cdf's normaliser).
  choice_N, logp_N = inverse_cdf(uniform_N, vals_NxK)
  token_N = jnp.take_along_axis(idx_NxK, choice_N[:, None], axis=-1)[:, 0].astype(jnp.int32)
  return token_N, logp_N
