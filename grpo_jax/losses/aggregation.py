"""Loss aggregation over tokens and rows, with step-global denominators (METHODS §4 statement 13).

Every aggregation is a sum over rows of a row-local quantity divided by a constant that
``denominators`` computes ONCE per step from the final, whole-batch mask:

  token_mean               Σ_{i,t} m·x / Tok                  (DAPO; verl/TRL default)
  seq_mean_token_mean      Σ_i (Σ_t m·x / n_i) / S            (original GRPO)
  seq_mean_token_sum       Σ_{i,t} m·x / S
  seq_mean_token_sum_norm  Σ_{i,t} m·x / (S·T_max)            (Dr.GRPO, constant T_max)

with Tok the valid tokens of the step, S the rows with at least one valid token, n_i the valid
tokens of row i and T_max = ``loss.norm_length`` (0 = the padded width T: the mask's, or the
uncut T of a mask cut to its longest completion, ``grpo_jax.train.length_buckets``). Because the
denominators are fixed, the loss of any partition of the rows into micro-batches (or data
shards) sums to the full-batch loss, and so do the gradients (verl #5625, TRL
``num_items_in_batch``). Masked entries are selected out with ``where`` (never multiplied by 0),
so NaN/Inf in padding cannot leak in. Zero denominators are replaced by 1: an empty step gives 0.
"""

from __future__ import annotations

import jax.numpy as jnp

from grpo_jax.losses.registry import lookup


def denominators(mask_NxT, cfg_loss, width: int | None = None) -> dict:
  """Step-global normalisers from the final mask (after every filter), as float32 scalars.

  Returns {"tokens": Σ m, "seqs": #rows with Σ_t m > 0, "t_max": T_max}. Raw counts (an empty
  step gives 0; the aggregations divide by max(·, 1)). Call it on the whole step's mask, outside
  any micro-batch loop, and pass the result to every ``policy_loss`` call of the step.
  ``width``: the response slots T that T_max falls back to (``loss.norm_length`` = 0) when the
  mask is cut to fewer slots than were sampled; None = the mask's own width.
  """
  norm_length = cfg_loss.norm_length
  valid_NxT = jnp.asarray(mask_NxT) > 0
  width = valid_NxT.shape[1] if width is None else int(width)
  t_max = norm_length if norm_length > 0 else width
  return {
    # Integer sums are exact; the float32 cast only rounds beyond 2^24 tokens.
    "tokens": jnp.sum(valid_NxT, dtype=jnp.int32).astype(jnp.float32),
    "seqs": jnp.sum(jnp.any(valid_NxT, axis=1), dtype=jnp.int32).astype(jnp.float32),
    "t_max": jnp.asarray(t_max, jnp.float32),
  }


def _masked_sum(x_NxT, valid_NxT):
  return jnp.sum(jnp.where(valid_NxT, x_NxT, 0.0))


def _safe(den):
  return jnp.maximum(den, 1.0)


def token_mean(x_NxT, valid_NxT, denoms):
  """Σ_{i,t} m·x / Tok_global: every valid token of the step weighs the same."""
  return _masked_sum(x_NxT, valid_NxT) / _safe(denoms["tokens"])


def seq_mean_token_mean(x_NxT, valid_NxT, denoms):
  """Σ_i (Σ_t m·x / n_i) / S_global: each sequence weighs the same (length-biased per token)."""
  rows_N = jnp.sum(jnp.where(valid_NxT, x_NxT, 0.0), axis=1)
  n_N = jnp.sum(valid_NxT, axis=1).astype(rows_N.dtype)
  return jnp.sum(rows_N / jnp.maximum(n_N, 1.0)) / _safe(denoms["seqs"])


def seq_mean_token_sum(x_NxT, valid_NxT, denoms):
  """Σ_{i,t} m·x / S_global: per-sequence token sums, averaged over valid sequences."""
  return _masked_sum(x_NxT, valid_NxT) / _safe(denoms["seqs"])


def seq_mean_token_sum_norm(x_NxT, valid_NxT, denoms):
  """Σ_{i,t} m·x / (S_global·T_max): Dr.GRPO's constant normaliser (unbiased in length)."""
  return _masked_sum(x_NxT, valid_NxT) / (_safe(denoms["seqs"]) * _safe(denoms["t_max"]))


# Aggregation by name (``loss.aggregation``).
AGGREGATIONS = {
  "token_mean": token_mean,
  "seq_mean_token_mean": seq_mean_token_mean,
  "seq_mean_token_sum": seq_mean_token_sum,
  "seq_mean_token_sum_norm": seq_mean_token_sum_norm,
}


def aggregate(x_NxT, mask_NxT, denoms, name: str):
  """Applies the aggregation ``name`` (a key of AGGREGATIONS) to per-token values. Scalar."""
  fn = lookup(AGGREGATIONS, name, "loss.aggregation")
  return fn(x_NxT, jnp.asarray(mask_NxT) > 0, denoms)
