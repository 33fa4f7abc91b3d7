"""Qwen3 decoder blocks in Flax NNX, numerically following transformers' ``modeling_qwen3.py``.

Submodule and parameter names mirror the Hugging Face checkpoint (``self_attn.q_proj``,
``mlp.gate_proj``, ``input_layernorm`` ...). Linear kernels are stored ``(in, out)``, i.e. the
transpose of a torch ``nn.Linear.weight``; RMSNorm weights are stored as ``weight``.

Shape letters: B batch rows, L query positions, S key positions (cache slots), D model width,
H query heads, Hk key/value heads, G = H / Hk query heads per kv head, Dh head width, F MLP width.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from flax import nnx

from grpo_jax.models.model_config import ModelConfig

# A finite "minus infinity": a query whose keys are all masked (a padding position) then gets a
# uniform softmax instead of NaN, so no NaN can reach a gradient through masked positions.
MASK_VALUE = float(jnp.finfo(jnp.float32).min)


def linear(cfg: ModelConfig, d_in: int, d_out: int, rngs: nnx.Rngs) -> nnx.Linear:
  # std 1/sqrt(fan_in): unit-variance outputs for unit-variance inputs.
  return nnx.Linear(
    d_in,
    d_out,
    use_bias=False,
    dtype=cfg.compute_dtype,
    param_dtype=cfg.weight_dtype,
    kernel_init=jax.nn.initializers.variance_scaling(1.0, "fan_in", "normal"),
    rngs=rngs,
  )


class RMSNorm(nnx.Module):
  """y = weight · x / sqrt(mean(x²) + eps), the statistics in float32 (HF ``Qwen3RMSNorm``)."""

  def __init__(self, dim: int, eps: float, dtype: jnp.dtype, param_dtype: jnp.dtype):
    self.weight = nnx.Param(jnp.ones((dim,), param_dtype))
    self.eps = eps
    self.dtype = dtype

  def __call__(self, x_BxLxD: jax.Array) -> jax.Array:
    x32 = x_BxLxD.astype(jnp.float32)
    var = jnp.mean(jnp.square(x32), axis=-1, keepdims=True)
    normed = (x32 * jax.lax.rsqrt(var + self.eps)).astype(self.dtype)
    # HF casts back to the input dtype *before* multiplying by the weight.
    return self.weight[...].astype(self.dtype) * normed


def rope_inv_freq(head_dim: int, theta: float) -> jax.Array:
  """inv_freq_j = 1 / theta^(2j / Dh), j < Dh/2, in float32 (HF default rope)."""
  return 1.0 / (theta ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))


def apply_rope(x_BxLxHxDh: jax.Array, positions_BxL: jax.Array, theta: float) -> jax.Array:
  """x·cos(pθ) + rotate_half(x)·sin(pθ), rotate_half(x) = [-x₂, x₁] over the two halves of Dh.

  The angles are computed in float32 and cast to x's dtype, as HF's ``Qwen3RotaryEmbedding``.
  """
  Dh = x_BxLxHxDh.shape[-1]
  freqs_BxLxDh2 = positions_BxL.astype(jnp.float32)[..., None] * rope_inv_freq(Dh, theta)
  emb_BxLxDh = jnp.concatenate([freqs_BxLxDh2, freqs_BxLxDh2], axis=-1)
  cos = jnp.cos(emb_BxLxDh).astype(x_BxLxHxDh.dtype)[:, :, None, :]
  sin = jnp.sin(emb_BxLxDh).astype(x_BxLxHxDh.dtype)[:, :, None, :]
  x1, x2 = x_BxLxHxDh[..., : Dh // 2], x_BxLxHxDh[..., Dh // 2 :]
  rotated = jnp.concatenate([-x2, x1], axis=-1)
  return x_BxLxHxDh * cos + rotated * sin


def attend(q_BxLxHxDh, k_BxSxHkxDh, v_BxSxHkxDh, mask_BxLxS, scale: float) -> jax.Array:
  """softmax(q·kᵀ·scale + mask)·v with grouped-query heads; softmax in float32.

  Query head h reads kv head h // G (HF ``repeat_kv`` order), done by a reshape, not a copy.
  """
  B, L, H, Dh = q_BxLxHxDh.shape
  Hk = k_BxSxHkxDh.shape[2]
  q_BxLxHkxGxDh = q_BxLxHxDh.reshape(B, L, Hk, H // Hk, Dh)
  scores_BxHkxGxLxS = jnp.einsum("blkgd,bskd->bkgls", q_BxLxHkxGxDh, k_BxSxHkxDh) * scale
  scores_BxHkxGxLxS = jnp.where(
    mask_BxLxS[:, None, None], scores_BxHkxGxLxS.astype(jnp.float32), MASK_VALUE
  )
  probs = jax.nn.softmax(scores_BxHkxGxLxS, axis=-1).astype(v_BxSxHkxDh.dtype)
  out_BxLxHkxGxDh = jnp.einsum("bkgls,bskd->blkgd", probs, v_BxSxHkxDh)
  return out_BxLxHkxGxDh.reshape(B, L, H, Dh)


class Attention(nnx.Module):
  """Grouped-query self-attention with per-head q/k RMSNorm applied before RoPE (Qwen3)."""

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    D, H, Hk, Dh = cfg.hidden_dim, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    self.q_proj = linear(cfg, D, H * Dh, rngs)
    self.k_proj = linear(cfg, D, Hk * Dh, rngs)
    self.v_proj = linear(cfg, D, Hk * Dh, rngs)
    self.o_proj = linear(cfg, H * Dh, D, rngs)
    norm = functools.partial(RMSNorm, Dh, cfg.norm_eps, cfg.compute_dtype, cfg.weight_dtype)
    self.q_norm = norm()
    self.k_norm = norm()
    self.num_heads, self.num_kv_heads, self.head_dim = H, Hk, Dh
    self.rope_theta = cfg.rope_theta

  def __call__(self, x_BxLxD, positions_BxL, mask_BxLxS, kv=None, cache_index=None):
    """Returns (out_BxLxD, (k, v)).

    Without ``kv`` the keys are this call's own positions (S = L). With ``kv = (k_BxSxHkxDh,
    v_BxSxHkxDh)`` the new keys/values are written at slot ``cache_index`` of that static
    cache and the query attends over all S slots (``mask_BxLxS`` says which are visible).
    """
    B, L, _ = x_BxLxD.shape
    H, Hk, Dh = self.num_heads, self.num_kv_heads, self.head_dim
    q_BxLxHxDh = self.q_norm(self.q_proj(x_BxLxD).reshape(B, L, H, Dh))
    k_BxLxHkxDh = self.k_norm(self.k_proj(x_BxLxD).reshape(B, L, Hk, Dh))
    v_BxLxHkxDh = self.v_proj(x_BxLxD).reshape(B, L, Hk, Dh)
    q_BxLxHxDh = apply_rope(q_BxLxHxDh, positions_BxL, self.rope_theta)
    k_BxLxHkxDh = apply_rope(k_BxLxHkxDh, positions_BxL, self.rope_theta)
    if kv is not None:
      k_cache, v_cache = kv
      start = (0, cache_index, 0, 0)
      k_BxLxHkxDh = jax.lax.dynamic_update_slice(k_cache, k_BxLxHkxDh.astype(k_cache.dtype), start)
      v_BxLxHkxDh = jax.lax.dynamic_update_slice(v_cache, v_BxLxHkxDh.astype(v_cache.dtype), start)
    out_BxLxHxDh = attend(q_BxLxHxDh, k_BxLxHkxDh, v_BxLxHkxDh, mask_BxLxS, Dh**-0.5)
    return self.o_proj(out_BxLxHxDh.reshape(B, L, H * Dh)), (k_BxLxHkxDh, v_BxLxHkxDh)


class MLP(nnx.Module):
  """SwiGLU: down(silu(gate(x)) · up(x))."""

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    self.gate_proj = linear(cfg, cfg.hidden_dim, cfg.mlp_dim, rngs)
    self.up_proj = linear(cfg, cfg.hidden_dim, cfg.mlp_dim, rngs)
    self.down_proj = linear(cfg, cfg.mlp_dim, cfg.hidden_dim, rngs)

  def __call__(self, x_BxLxD: jax.Array) -> jax.Array:
    return self.down_proj(jax.nn.silu(self.gate_proj(x_BxLxD)) * self.up_proj(x_BxLxD))


class DecoderLayer(nnx.Module):
  """Pre-norm block: x + attn(norm(x)), then x + mlp(norm(x))."""

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    norm = functools.partial(
      RMSNorm, cfg.hidden_dim, cfg.norm_eps, cfg.compute_dtype, cfg.weight_dtype
    )
    self.input_layernorm = norm()
    self.self_attn = Attention(cfg, rngs=rngs)
    self.post_attention_layernorm = norm()
    self.mlp = MLP(cfg, rngs=rngs)

  def __call__(self, x_BxLxD, positions_BxL, mask_BxLxS, kv=None, cache_index=None):
    attn_BxLxD, kv = self.self_attn(
      self.input_layernorm(x_BxLxD), positions_BxL, mask_BxLxS, kv, cache_index
    )
    x_BxLxD = x_BxLxD + attn_BxLxD
    x_BxLxD = x_BxLxD + self.mlp(self.post_attention_layernorm(x_BxLxD))
    return x_BxLxD, kv
