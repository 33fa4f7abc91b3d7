"""Decoder blocks in Flax NNX, numerically following transformers' ``modeling_qwen3.py``,
``modeling_llama.py`` and ``modeling_olmo3.py`` (the differences are listed in ``families.py``).

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

from grpo_jax.models.families import get_family
from grpo_jax.models.model_config import ModelConfig
from grpo_jax.models.rope import apply_rope, rope_inv_freq  # noqa: F401  (re-exported)

# A finite "minus infinity": a query whose keys are all masked (a padding position) then gets a
# uniform softmax instead of NaN, so no NaN can reach a gradient through masked positions.
MASK_VALUE = float(jnp.finfo(jnp.float32).min)


def flat_matmul(fn, x_BxLxD: jax.Array, flatten: bool = True) -> jax.Array:
  """fn applied to x reshaped to (B·L, D), the result reshaped back to (B, L, F); with
  ``flatten`` False (``ModelConfig.flatten_matmuls``), fn applied to x as it is."""
  if not flatten or x_BxLxD.ndim <= 2:
    return fn(x_BxLxD)
  lead = x_BxLxD.shape[:-1]
  y = fn(x_BxLxD.reshape(-1, x_BxLxD.shape[-1]))
  return y.reshape(*lead, y.shape[-1])


class Linear(nnx.Linear):
  """``nnx.Linear`` (same parameters: kernel (in, out), optional bias) through ``flat_matmul``;
  ``flatten`` is a static attribute: the graphdef, and every jit cache keyed on it, carries it.

  With ``lora_rank`` > 0 it also holds low-rank adapters lora_a (in, r) and lora_b (r, out),
  float32 (``lora.py``), and computes x·W + lora_scale·(x·A)·B without forming W + s·A·B: the
  unmerged LoRA forward (METHODS §9). The adapter product runs in the compute dtype, as x·W.
  """

  def __init__(self, *args, flatten: bool = True, lora_rank: int = 0, lora_scale=0.0, **kwargs):
    super().__init__(*args, **kwargs)
    self.flatten = flatten
    self.lora_scale = lora_scale
    if lora_rank:
      d_in, d_out = self.kernel.shape
      self.lora_a = nnx.Param(jnp.zeros((d_in, lora_rank), jnp.float32))
      self.lora_b = nnx.Param(jnp.zeros((lora_rank, d_out), jnp.float32))

  @property
  def has_lora(self) -> bool:
    return hasattr(self, "lora_a")

  def __call__(self, x: jax.Array) -> jax.Array:
    if not self.has_lora:
      return flat_matmul(super().__call__, x, self.flatten)

    def adapted(x_MxD):
      dtype = self.dtype or x_MxD.dtype
      x_MxD = x_MxD.astype(dtype)
      delta_MxF = (x_MxD @ self.lora_a[...].astype(dtype)) @ self.lora_b[...].astype(dtype)
      return nnx.Linear.__call__(self, x_MxD) + (self.lora_scale * delta_MxF).astype(dtype)

    return flat_matmul(adapted, x, self.flatten)


def linear(
  cfg: ModelConfig, d_in: int, d_out: int, rngs: nnx.Rngs, use_bias: bool = False, name: str = ""
) -> nnx.Linear:
  """The projection ``name`` (its HF module name, e.g. "q_proj"): with adapters when
  ``cfg.lora_targets`` names it."""
  rank = cfg.lora_rank if name and name in cfg.lora_targets else 0
  # std 1/sqrt(fan_in): unit-variance outputs for unit-variance inputs.
  return Linear(
    d_in,
    d_out,
    use_bias=use_bias,
    dtype=cfg.compute_dtype,
    param_dtype=cfg.weight_dtype,
    kernel_init=jax.nn.initializers.variance_scaling(1.0, "fan_in", "normal"),
    rngs=rngs,
    flatten=cfg.flatten_matmuls,
    lora_rank=rank,
    lora_scale=cfg.lora_scale if rank else 0.0,
  )


class RMSNorm(nnx.Module):
  """y = weight · x / sqrt(mean(x²) + eps), the statistics in float32 (HF ``Qwen3RMSNorm``).

  Qwen3/Llama cast back to the compute dtype *before* multiplying by the weight; OLMo-3
  (``weight_float32``) multiplies in float32 and casts after.
  """

  def __init__(
    self, dim: int, eps: float, dtype: jnp.dtype, param_dtype: jnp.dtype, weight_float32=False
  ):
    self.weight = nnx.Param(jnp.ones((dim,), param_dtype))
    self.eps = eps
    self.dtype = dtype
    self.weight_float32 = weight_float32

  def __call__(self, x_BxLxD: jax.Array) -> jax.Array:
    x32 = x_BxLxD.astype(jnp.float32)
    var = jnp.mean(jnp.square(x32), axis=-1, keepdims=True)
    normed = x32 * jax.lax.rsqrt(var + self.eps)
    if self.weight_float32:
      return (self.weight[...].astype(jnp.float32) * normed).astype(self.dtype)
    return self.weight[...].astype(self.dtype) * normed.astype(self.dtype)


def rms_norm(cfg: ModelConfig, dim: int) -> RMSNorm:
  weight_f32 = get_family(cfg.family).norm_weight_float32
  return RMSNorm(dim, cfg.norm_eps, cfg.compute_dtype, cfg.weight_dtype, weight_f32)


def _attention_weights(scores, mask, dtype) -> jax.Array:
  """softmax over the keys (last axis) in float32, masked keys at MASK_VALUE, cast to ``dtype``."""
  masked = jnp.where(mask, scores.astype(jnp.float32), MASK_VALUE)
  return jax.nn.softmax(masked, axis=-1).astype(dtype)


def attend(q_BxLxHxDh, k_BxSxHkxDh, v_BxSxHkxDh, mask_BxLxS, scale: float) -> jax.Array:
  """softmax(q·kᵀ·scale + mask)·v with grouped-query heads; softmax in float32.

  Query head h reads kv head h // G (HF ``repeat_kv`` order), done by a reshape, not a copy.
  """
  B, L, H, Dh = q_BxLxHxDh.shape
  Hk = k_BxSxHkxDh.shape[2]
  q_BxLxHkxGxDh = q_BxLxHxDh.reshape(B, L, Hk, H // Hk, Dh)
  scores_BxHkxGxLxS = jnp.einsum("blkgd,bskd->bkgls", q_BxLxHkxGxDh, k_BxSxHkxDh) * scale
  probs = _attention_weights(scores_BxHkxGxLxS, mask_BxLxS[:, None, None], v_BxSxHkxDh.dtype)
  out_BxLxHkxGxDh = jnp.einsum("bkgls,bskd->blkgd", probs, v_BxSxHkxDh)
  return out_BxLxHkxGxDh.reshape(B, L, H, Dh)


def attend_cached(q_BxLxHxDh, k_BxHkxDhxS, v_BxHkxSxDh, mask_BxLxS, scale: float) -> jax.Array:
  """:func:`attend` over a static cache laid out for decoding: keys (B, Hk, Dh, S), values
  (B, Hk, S, Dh), so that neither product transposes the S slots (``sampling/kv_cache.py``).

  One query position (a decode step) drops the length-1 query axis ``l`` from the batched
  products: with it, XLA:CPU swaps the operands of the (row, kv head)-batched dot and runs it
  10-15× slower (small model, 64 rows, 160 slots: 3.0 ms per product instead of ~0.2 ms;
  docs/results/2026-12-02_performance.md).
  """
  B, L, H, Dh = q_BxLxHxDh.shape
  Hk = k_BxHkxDhxS.shape[1]
  l = "l" if L > 1 else ""  # noqa: E741  (the einsum letter of the query axis, or none)
  q = q_BxLxHxDh.reshape(B, *([L] if l else []), Hk, H // Hk, Dh)
  mask = mask_BxLxS[:, None, None] if l else mask_BxLxS[:, None]  # against (B, Hk, G, [L,] S)
  scores = jnp.einsum(f"b{l}kgd,bkds->bkg{l}s", q, k_BxHkxDhxS) * scale
  probs = _attention_weights(scores, mask, v_BxHkxSxDh.dtype)
  out = jnp.einsum(f"bkg{l}s,bksd->b{l}kgd", probs, v_BxHkxSxDh)
  return out.reshape(B, L, H, Dh)


def _write_cache(k_BxHkxDhxS, v_BxHkxSxDh, k_BxHkxDhxL, v_BxHkxLxDh, cache_index):
  """The caches with the L new keys/values written from slot ``cache_index`` on: a scalar (every
  row at the same slot) or one slot per row, index_B (the continuous-batching sampler, whose
  rows are at different lengths; a batched scatter)."""
  if jnp.ndim(cache_index) == 0:
    k = jax.lax.dynamic_update_slice(k_BxHkxDhxS, k_BxHkxDhxL, (0, 0, 0, cache_index))
    return k, jax.lax.dynamic_update_slice(v_BxHkxSxDh, v_BxHkxLxDh, (0, 0, cache_index, 0))
  put_k = lambda c, x, i: jax.lax.dynamic_update_slice(c, x, (0, 0, i))
  put_v = lambda c, x, i: jax.lax.dynamic_update_slice(c, x, (0, i, 0))
  return (
    jax.vmap(put_k)(k_BxHkxDhxS, k_BxHkxDhxL, cache_index),
    jax.vmap(put_v)(v_BxHkxSxDh, v_BxHkxLxDh, cache_index),
  )


class Attention(nnx.Module):
  """Grouped-query self-attention with RoPE and the family's q/k RMSNorm (before RoPE).

  QK-norm is per head over Dh (Qwen3), over the whole projection H·Dh / Hk·Dh before the
  head split (OLMo-3), or absent (Llama). Scores are scaled by Dh^-1/2 in every family.
  """

  def __init__(self, cfg: ModelConfig, layer: int, *, rngs: nnx.Rngs):
    D, H, Hk, Dh = cfg.hidden_dim, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    bias = cfg.attention_bias
    self.q_proj = linear(cfg, D, H * Dh, rngs, bias, "q_proj")
    self.k_proj = linear(cfg, D, Hk * Dh, rngs, bias, "k_proj")
    self.v_proj = linear(cfg, D, Hk * Dh, rngs, bias, "v_proj")
    self.o_proj = linear(cfg, H * Dh, D, rngs, bias, "o_proj")
    family = get_family(cfg.family)
    self.qk_norm = family.qk_norm
    if family.qk_norm == "head":
      self.q_norm, self.k_norm = rms_norm(cfg, Dh), rms_norm(cfg, Dh)
    elif family.qk_norm == "full":
      self.q_norm, self.k_norm = rms_norm(cfg, H * Dh), rms_norm(cfg, Hk * Dh)
    self.num_heads, self.num_kv_heads, self.head_dim = H, Hk, Dh
    self.rope_theta, self.rope_scaling = cfg.layer_rope(layer)
    self.rope_float32 = family.rope_float32

  def __call__(self, x_BxLxD, positions_BxL, mask_BxLxS, kv=None, cache_index=None):
    """Returns (out_BxLxD, (k, v)).

    Without ``kv`` the keys are this call's own positions (S = L), returned (B, L, Hk, Dh).
    With ``kv = (k_BxHkxDhxS, v_BxHkxSxDh)`` (the decode layout) the new keys/values go to
    slot ``cache_index`` (a scalar, or one slot per row) of that static cache, the query
    attends over all S slots
    (``mask_BxLxS`` says which are visible) and the updated caches are returned.
    """
    B, L, _ = x_BxLxD.shape
    H, Hk, Dh = self.num_heads, self.num_kv_heads, self.head_dim
    q_BxLxHDh, k_BxLxHkDh = self.q_proj(x_BxLxD), self.k_proj(x_BxLxD)
    if self.qk_norm == "full":
      q_BxLxHDh, k_BxLxHkDh = self.q_norm(q_BxLxHDh), self.k_norm(k_BxLxHkDh)
    q_BxLxHxDh = q_BxLxHDh.reshape(B, L, H, Dh)
    k_BxLxHkxDh = k_BxLxHkDh.reshape(B, L, Hk, Dh)
    if self.qk_norm == "head":
      q_BxLxHxDh, k_BxLxHkxDh = self.q_norm(q_BxLxHxDh), self.k_norm(k_BxLxHkxDh)
    v_BxLxHkxDh = self.v_proj(x_BxLxD).reshape(B, L, Hk, Dh)
    rope = functools.partial(
      apply_rope,
      positions_BxL=positions_BxL,
      theta=self.rope_theta,
      scaling=self.rope_scaling,
      float32_tables=self.rope_float32,
    )
    q_BxLxHxDh, k_BxLxHkxDh = rope(q_BxLxHxDh), rope(k_BxLxHkxDh)
    if kv is not None:
      k_cache, v_cache = kv
      new_k_BxHkxDhxL = jnp.transpose(k_BxLxHkxDh, (0, 2, 3, 1)).astype(k_cache.dtype)
      new_v_BxHkxLxDh = jnp.swapaxes(v_BxLxHkxDh, 1, 2).astype(v_cache.dtype)
      k_BxHkxDhxS, v_BxHkxSxDh = _write_cache(
        k_cache, v_cache, new_k_BxHkxDhxL, new_v_BxHkxLxDh, cache_index
      )
      out_BxLxHxDh = attend_cached(q_BxLxHxDh, k_BxHkxDhxS, v_BxHkxSxDh, mask_BxLxS, Dh**-0.5)
      return self.o_proj(out_BxLxHxDh.reshape(B, L, H * Dh)), (k_BxHkxDhxS, v_BxHkxSxDh)
    out_BxLxHxDh = attend(q_BxLxHxDh, k_BxLxHkxDh, v_BxLxHkxDh, mask_BxLxS, Dh**-0.5)
    return self.o_proj(out_BxLxHxDh.reshape(B, L, H * Dh)), (k_BxLxHkxDh, v_BxLxHkxDh)


class MLP(nnx.Module):
  """SwiGLU: down(silu(gate(x)) · up(x))."""

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    D, F, bias = cfg.hidden_dim, cfg.mlp_dim, cfg.mlp_bias
    self.gate_proj = linear(cfg, D, F, rngs, bias, "gate_proj")
    self.up_proj = linear(cfg, D, F, rngs, bias, "up_proj")
    self.down_proj = linear(cfg, F, D, rngs, bias, "down_proj")
    # Unmerged adapters on gate or up: two GEMMs, each with its own adapter product.
    adapted = self.gate_proj.has_lora or self.up_proj.has_lora
    self.fuse_gate_up_decode = cfg.fuse_gate_up_decode and not adapted

  def __call__(self, x_BxLxD: jax.Array) -> jax.Array:
    if self.fuse_gate_up_decode and x_BxLxD.shape[1] == 1 and not self.gate_proj.use_bias:
      # One decode position: gate and up as ONE (D, 2F) GEMM. The concatenation of two
      # parameters is loop-invariant, so XLA hoists it out of the sampler's while loop.
      F = self.gate_proj.kernel.shape[1]
      dtype = self.gate_proj.dtype or x_BxLxD.dtype
      w_Dx2F = jnp.concatenate([self.gate_proj.kernel[...], self.up_proj.kernel[...]], axis=1)
      matmul = lambda x: x.astype(dtype) @ w_Dx2F.astype(dtype)
      h_Bx1x2F = flat_matmul(matmul, x_BxLxD, self.gate_proj.flatten)
      return self.down_proj(jax.nn.silu(h_Bx1x2F[..., :F]) * h_Bx1x2F[..., F:])
    return self.down_proj(jax.nn.silu(self.gate_proj(x_BxLxD)) * self.up_proj(x_BxLxD))


class DecoderLayer(nnx.Module):
  """Pre-norm x + attn(norm(x)), x + mlp(norm(x)) (Qwen3, Llama) or post-norm
  x + norm(attn(x)), x + norm(mlp(x)) (OLMo-3)."""

  def __init__(self, cfg: ModelConfig, layer: int = 0, *, rngs: nnx.Rngs):
    self.post_norm = get_family(cfg.family).post_norm
    if not self.post_norm:
      self.input_layernorm = rms_norm(cfg, cfg.hidden_dim)
    self.self_attn = Attention(cfg, layer, rngs=rngs)
    self.post_attention_layernorm = rms_norm(cfg, cfg.hidden_dim)
    self.mlp = MLP(cfg, rngs=rngs)
    if self.post_norm:
      self.post_feedforward_layernorm = rms_norm(cfg, cfg.hidden_dim)

  def __call__(self, x_BxLxD, positions_BxL, mask_BxLxS, kv=None, cache_index=None):
    if self.post_norm:
      attn_BxLxD, kv = self.self_attn(x_BxLxD, positions_BxL, mask_BxLxS, kv, cache_index)
      x_BxLxD = x_BxLxD + self.post_attention_layernorm(attn_BxLxD)
      return x_BxLxD + self.post_feedforward_layernorm(self.mlp(x_BxLxD)), kv
    attn_BxLxD, kv = self.self_attn(
      self.input_layernorm(x_BxLxD), positions_BxL, mask_BxLxS, kv, cache_index
    )
    x_BxLxD = x_BxLxD + attn_BxLxD
    x_BxLxD = x_BxLxD + self.mlp(self.post_attention_layernorm(x_BxLxD))
    return x_BxLxD, kv
