"""Rotary position embeddings: the inverse frequencies of each HF ``rope_type`` and their use.

The frequency tables are computed in NumPy float32 at trace time (they are constants of the
config), following transformers' ``modeling_rope_utils``: ``default``, ``linear``, ``llama3``
(Llama-3.1/3.2) and ``yarn`` (OLMo-3's long-context full-attention layers). Each returns
(inv_freq_{Dh/2}, attention_scaling); cos and sin are multiplied by the scaling.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np


def _default(theta: float, dim: int, p: dict) -> tuple[np.ndarray, float]:
  """inv_freq_j = 1 / theta^(2j / Dh)."""
  return 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.float32) / dim)), 1.0


def _linear(theta: float, dim: int, p: dict) -> tuple[np.ndarray, float]:
  """Position interpolation: inv_freq / factor."""
  inv_freq, _ = _default(theta, dim, p)
  return inv_freq / np.float32(p["factor"]), 1.0


def _llama3(theta: float, dim: int, p: dict) -> tuple[np.ndarray, float]:
  """Llama-3.1 scaling: wavelengths above old_ctx/low_freq_factor are divided by ``factor``,
  those below old_ctx/high_freq_factor kept, the band between interpolated smoothly."""
  inv_freq, _ = _default(theta, dim, p)
  factor, lo, hi = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
  old_ctx = p["original_max_position_embeddings"]
  wavelen = 2 * math.pi / inv_freq
  scaled = np.where(wavelen > old_ctx / lo, inv_freq / factor, inv_freq)
  smooth = (old_ctx / wavelen - lo) / (hi - lo)
  smoothed = (1 - smooth) * scaled / factor + smooth * scaled
  medium = ~(wavelen < old_ctx / hi) & ~(wavelen > old_ctx / lo)
  return np.where(medium, smoothed, scaled).astype(np.float32), 1.0


def _yarn(theta: float, dim: int, p: dict) -> tuple[np.ndarray, float]:
  """YaRN (arXiv 2309.00071): interpolation for low frequencies, extrapolation for high ones,
  a linear ramp between the correction dims of beta_fast and beta_slow rotations."""
  factor = p["factor"]
  old_ctx = p["original_max_position_embeddings"]

  def mscale(scale, m=1.0):
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

  attention_factor = p.get("attention_factor")
  if attention_factor is None:
    if p.get("mscale") and p.get("mscale_all_dim"):
      attention_factor = mscale(factor, p["mscale"]) / mscale(factor, p["mscale_all_dim"])
    else:
      attention_factor = mscale(factor)
  beta_fast, beta_slow = p.get("beta_fast") or 32, p.get("beta_slow") or 1

  def correction_dim(rotations):
    return (dim * math.log(old_ctx / (rotations * 2 * math.pi))) / (2 * math.log(theta))

  low, high = correction_dim(beta_fast), correction_dim(beta_slow)
  if p.get("truncate", True):
    low, high = math.floor(low), math.ceil(high)
  low, high = max(low, 0), min(high, dim - 1)
  if low == high:
    high += 0.001  # avoids a zero-width ramp
  pos_freqs = theta ** (np.arange(0, dim, 2, dtype=np.float32) / dim)
  ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - low) / (high - low), 0, 1)
  extrapolation = 1 - ramp
  inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
  return inv_freq.astype(np.float32), float(attention_factor)


ROPE_TYPES = {"default": _default, "linear": _linear, "llama3": _llama3, "yarn": _yarn}


def rope_tables(head_dim: int, theta: float, scaling: tuple = ()) -> tuple[np.ndarray, float]:
  """(inv_freq_{Dh/2} float32, attention_scaling) for ``scaling`` = sorted (key, value) pairs of
  HF's ``rope_parameters`` (empty = default rope)."""
  p = dict(scaling)
  rope_type = p.get("rope_type", p.get("type", "default"))
  if rope_type not in ROPE_TYPES:
    raise NotImplementedError(f"rope_type '{rope_type}' is not supported; have {list(ROPE_TYPES)}")
  inv_freq, scale = ROPE_TYPES[rope_type](float(theta), head_dim, p)
  return np.asarray(inv_freq, np.float32), float(scale)


def rope_inv_freq(head_dim: int, theta: float) -> jax.Array:
  """inv_freq_j = 1 / theta^(2j / Dh), j < Dh/2, in float32 (HF default rope)."""
  return jnp.asarray(rope_tables(head_dim, theta)[0])


def rope_cos_sin(
  positions_BxL: jax.Array, head_dim: int, theta: float, scaling: tuple = ()
) -> tuple[jax.Array, jax.Array]:
  """cos(pθ_j)·s and sin(pθ_j)·s for the Dh/2 frequencies θ_j of ``scaling`` (s its attention
  scaling), in float32: the halves' tables, BxLxDh2 each."""
  inv_freq, scale = rope_tables(head_dim, theta, scaling)
  freqs_BxLxDh2 = positions_BxL.astype(jnp.float32)[..., None] * jnp.asarray(inv_freq)
  return jnp.cos(freqs_BxLxDh2) * scale, jnp.sin(freqs_BxLxDh2) * scale


def apply_rope(
  x_BxLxHxDh: jax.Array,
  positions_BxL: jax.Array,
  theta: float,
  scaling: tuple = (),
  float32_tables: bool = False,
) -> jax.Array:
  """x·cos(pθ) + rotate_half(x)·sin(pθ), rotate_half(x) = [-x₂, x₁] over the two halves of Dh.

  Angles in float32. Qwen3/Llama cast cos/sin to x's dtype before the product; OLMo-3 keeps
  them in float32 and casts the result (``float32_tables``) — identical in float32.

  The halves are swapped by reversing a (2, Dh/2) view, and the sign of −x₂ sits in the sine
  table: [x₂, x₁]·[−sin, sin] is rotate_half(x)·sin exactly. Slicing the halves and
  concatenating them gave the same values, but its gradient was a pad and an add per half.
  A reverse's gradient is a reverse, which fuses with the products around it
  (docs/results/2026-12-02_performance.md).
  """
  Dh = x_BxLxHxDh.shape[-1]
  table_dtype = jnp.float32 if float32_tables else x_BxLxHxDh.dtype
  cos_BxLxDh2, sin_BxLxDh2 = rope_cos_sin(positions_BxL, Dh, theta, scaling)
  cos = jnp.concatenate([cos_BxLxDh2, cos_BxLxDh2], axis=-1).astype(table_dtype)[:, :, None, :]
  sin = jnp.concatenate([-sin_BxLxDh2, sin_BxLxDh2], axis=-1).astype(table_dtype)[:, :, None, :]
  halves_BxLxHx2xDh2 = x_BxLxHxDh.reshape(*x_BxLxHxDh.shape[:-1], 2, Dh // 2)
  swapped_BxLxHxDh = jnp.flip(halves_BxLxHx2xDh2, axis=-2).reshape(x_BxLxHxDh.shape)
  return (x_BxLxHxDh * cos + swapped_BxLxHxDh * sin).astype(x_BxLxHxDh.dtype)
