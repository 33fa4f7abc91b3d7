"""Segment statistics over integer ids, with negative ids meaning padding (METHODS §1-2).

Rows carry global integer ids (``group_ids_N``, ``subgroup_ids_N``); every reduction here is a
``jax.ops.segment_*`` with the static ``num_segments = N`` (ids must be < N), so groups and
subgroups may have any sizes, need not be contiguous or sorted, and jit never sees a per-group
Python loop. Arrays indexed by id slot carry the suffix ``_S`` (S = N slots, most of them empty).

A padded row (``valid_N`` False) contributes to no statistic: its value is replaced by 0 and its
id by 0 before the reduction, and the count it adds is 0.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _safe_ids(ids_N: jax.Array, valid_N: jax.Array) -> jax.Array:
  # Padded rows are routed to slot 0 with zero weight, so no out-of-range id reaches XLA.
  return jnp.where(valid_N, ids_N, 0)


def seg_sum(x_N: jax.Array, ids_N: jax.Array, valid_N: jax.Array) -> jax.Array:
  """Σ_{i: id(i)=s, valid} x_i for every slot s. Shapes: N -> S (= N)."""
  n = x_N.shape[0]
  x_N = jnp.where(valid_N, x_N, jnp.zeros_like(x_N))
  return jax.ops.segment_sum(x_N, _safe_ids(ids_N, valid_N), num_segments=n)


def seg_count(ids_N: jax.Array, valid_N: jax.Array) -> jax.Array:
  """Number of valid rows per slot, as float32. Shapes: N -> S."""
  return seg_sum(jnp.ones(ids_N.shape, jnp.float32), ids_N, valid_N)


def seg_max(x_N: jax.Array, ids_N: jax.Array, valid_N: jax.Array) -> jax.Array:
  """max over the slot's valid rows; -inf for empty slots (floating x only)."""
  n = x_N.shape[0]
  x_N = jnp.where(valid_N, x_N, -jnp.inf)
  return jax.ops.segment_max(x_N, _safe_ids(ids_N, valid_N), num_segments=n)


def seg_min(x_N: jax.Array, ids_N: jax.Array, valid_N: jax.Array) -> jax.Array:
  """min over the slot's valid rows; +inf for empty slots (floating x only)."""
  return -seg_max(-x_N, ids_N, valid_N)


def gather(x_S: jax.Array, ids_N: jax.Array, valid_N: jax.Array, fill=0) -> jax.Array:
  """Per-row value of the row's slot: x_S[id(i)]; ``fill`` on padded rows. Shapes: S -> N."""
  out_N = x_S[_safe_ids(ids_N, valid_N)]
  return jnp.where(valid_N, out_N, jnp.asarray(fill, x_S.dtype))


def seg_mean(x_N: jax.Array, ids_N: jax.Array, valid_N: jax.Array) -> jax.Array:
  """Slot mean (1/n_s) Σ x_i; 0 for empty slots. Shapes: N -> S."""
  count_S = seg_count(ids_N, valid_N)
  return seg_sum(x_N, ids_N, valid_N) / jnp.maximum(count_S, 1.0)


def exact_mean(x_N: jax.Array, ids_N: jax.Array, valid_N: jax.Array) -> jax.Array:
  """Slot mean that is bit-exact on constant slots (x_i = c ⇒ mean = c, not Σc/n). N -> S.

  Without this, (0.3 + 0.3 + 0.3)/3 ≠ 0.3 in float32 and an advantage that is zero in exact
  arithmetic comes out as ±1e-8, which a division by its own std would blow up.
  """
  hi_S = seg_max(x_N, ids_N, valid_N)
  lo_S = seg_min(x_N, ids_N, valid_N)
  return jnp.where(hi_S == lo_S, hi_S, seg_mean(x_N, ids_N, valid_N))


def seg_std(x_N: jax.Array, ids_N: jax.Array, valid_N: jax.Array, ddof: int = 1) -> jax.Array:
  """Slot standard deviation, two-pass: sqrt(Σ (x_i − μ_s)² / (n_s − ddof)). Shapes: N -> S.

  METHODS §2 pins ddof = 1 (Bessel) and the two-pass form (never Σx² − (Σx)²/n, whose
  cancellation leaves a spurious non-zero std on constant groups). A slot with n_s ≤ ddof
  (a singleton under Bessel) gets std 0, not NaN: its centred values are all zero anyway.
  """
  count_S = seg_count(ids_N, valid_N)
  mean_N = gather(exact_mean(x_N, ids_N, valid_N), ids_N, valid_N)
  ss_S = seg_sum(jnp.square(x_N - mean_N), ids_N, valid_N)
  var_S = jnp.where(count_S > ddof, ss_S / jnp.maximum(count_S - ddof, 1.0), 0.0)
  return jnp.sqrt(var_S)


def masked_mean(x_N: jax.Array, valid_N: jax.Array) -> jax.Array:
  """Mean over valid rows (0 if none). Scalar."""
  total = jnp.sum(jnp.where(valid_N, x_N, 0.0))
  return total / jnp.maximum(jnp.sum(valid_N.astype(jnp.float32)), 1.0)


def masked_std(x_N: jax.Array, valid_N: jax.Array, ddof: int = 1) -> jax.Array:
  """Two-pass std over valid rows with ``ddof`` (0 if at most ``ddof`` rows). Scalar."""
  n = jnp.sum(valid_N.astype(jnp.float32))
  dev_N = jnp.where(valid_N, x_N - masked_mean(x_N, valid_N), 0.0)
  ss = jnp.sum(jnp.square(dev_N))
  return jnp.sqrt(jnp.where(n > ddof, ss / jnp.maximum(n - ddof, 1.0), 0.0))
