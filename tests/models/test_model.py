"""The Qwen3 decoder: shapes, an independent NumPy forward pass, padding/causality invariances."""

import dataclasses
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import config as config_lib
from grpo_jax import models

CFG = models.PRESETS["test"]  # vocab 64, hidden 64, 2 layers, 4 heads, 2 kv heads, head_dim 16
forward = jax.jit(models.forward, static_argnums=0)
token_logps = jax.jit(models.token_logps, static_argnums=(0, 4, 5))


def _perturbed_params(cfg, seed):
  """Random params with the RMSNorm weights moved off 1 so a skipped norm shows up."""
  graphdef, params = models.init_params(cfg, seed)
  rng = np.random.default_rng(seed)
  params = jax.tree_util.tree_map_with_path(
    lambda path, x: (
      x + 0.3 * rng.standard_normal(x.shape).astype(x.dtype) if path[-1].key == "weight" else x
    ),
    params,
  )
  return graphdef, params


def _tokens(B, L, seed=0, vocab=64):
  return jnp.asarray(np.random.default_rng(seed).integers(0, vocab, (B, L)), jnp.int32)


# ---------------------------------------------------------------- independent NumPy reference


def _np_rmsnorm(x, w, eps):
  return x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + eps) * w


def _np_rope(x_LxHxDh, theta):
  L, _, Dh = x_LxHxDh.shape
  inv = 1.0 / theta ** (np.arange(0, Dh, 2) / Dh)
  ang = np.arange(L)[:, None] * inv[None]  # L x Dh/2
  cos = np.cos(np.concatenate([ang, ang], -1))[:, None]
  sin = np.sin(np.concatenate([ang, ang], -1))[:, None]
  rot = np.concatenate([-x_LxHxDh[..., Dh // 2 :], x_LxHxDh[..., : Dh // 2]], -1)
  return x_LxHxDh * cos + rot * sin


def _np_forward(cfg, params, tokens_L):
  """Qwen3ForCausalLM for one unpadded sequence, float64, HF-style (repeat_kv, rotate_half)."""
  p = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
  H, Hk, Dh, eps = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.norm_eps
  L = len(tokens_L)
  x = p["embed_tokens"]["embedding"][np.asarray(tokens_L)]
  for i in range(cfg.num_layers):
    lp = p["layers"][i]
    a = lp["self_attn"]
    h = _np_rmsnorm(x, lp["input_layernorm"]["weight"], eps)
    q = _np_rmsnorm((h @ a["q_proj"]["kernel"]).reshape(L, H, Dh), a["q_norm"]["weight"], eps)
    k = _np_rmsnorm((h @ a["k_proj"]["kernel"]).reshape(L, Hk, Dh), a["k_norm"]["weight"], eps)
    v = (h @ a["v_proj"]["kernel"]).reshape(L, Hk, Dh)
    q, k = _np_rope(q, cfg.rope_theta), _np_rope(k, cfg.rope_theta)
    k, v = np.repeat(k, H // Hk, axis=1), np.repeat(v, H // Hk, axis=1)  # HF repeat_kv
    s = np.einsum("lhd,shd->hls", q, k) * Dh**-0.5
    s = np.where(np.tril(np.ones((L, L), bool))[None], s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    o = np.einsum("hls,shd->lhd", w, v).reshape(L, H * Dh)
    x = x + o @ a["o_proj"]["kernel"]
    m = lp["mlp"]
    h = _np_rmsnorm(x, lp["post_attention_layernorm"]["weight"], eps)
    g = h @ m["gate_proj"]["kernel"]
    x = x + (g / (1 + np.exp(-g)) * (h @ m["up_proj"]["kernel"])) @ m["down_proj"]["kernel"]
  x = _np_rmsnorm(x, p["norm"]["weight"], eps)
  if cfg.tie_embeddings:
    return x @ p["embed_tokens"]["embedding"].T
  return x @ p["lm_head"]["kernel"]


@pytest.mark.parametrize("tie", [True, False])
def test_forward_matches_numpy_reference(tie):
  cfg = dataclasses.replace(CFG, tie_embeddings=tie, rope_theta=500.0)
  graphdef, params = _perturbed_params(cfg, seed=1)
  tokens_BxL = _tokens(2, 11, seed=2)
  logits_BxLxV = forward(graphdef, params, tokens_BxL, jnp.ones_like(tokens_BxL))
  for b in range(2):
    ref_LxV = _np_forward(cfg, params, tokens_BxL[b])
    np.testing.assert_allclose(np.asarray(logits_BxLxV[b]), ref_LxV, atol=1e-5, rtol=0)


# ---------------------------------------------------------------- shapes, params, dtypes


def test_shapes_gqa_and_param_count():
  graphdef, params = models.init_params(CFG, 0)
  attn = params["layers"][0]["self_attn"]
  D, H, Hk, Dh = CFG.hidden_dim, CFG.num_heads, CFG.num_kv_heads, CFG.head_dim
  assert attn["q_proj"]["kernel"].shape == (D, H * Dh)
  assert attn["k_proj"]["kernel"].shape == (D, Hk * Dh)
  assert attn["v_proj"]["kernel"].shape == (D, Hk * Dh)
  assert attn["q_norm"]["weight"].shape == (Dh,)
  assert set(params) == {"embed_tokens", "layers", "norm"}
  assert sum(x.size for x in jax.tree.leaves(params)) == CFG.num_params
  tokens_BxL = _tokens(3, 7)
  logits_BxLxV = forward(graphdef, params, tokens_BxL, jnp.ones_like(tokens_BxL))
  assert logits_BxLxV.shape == (3, 7, CFG.vocab_size)
  assert logits_BxLxV.dtype == jnp.float32
  assert bool(jnp.all(jnp.isfinite(logits_BxLxV)))


def test_tied_vs_untied_param_count():
  _, tied = models.init_params(CFG, 0)
  _, untied = models.init_params(dataclasses.replace(CFG, tie_embeddings=False), 0)
  n_tied = sum(x.size for x in jax.tree.leaves(tied))
  n_untied = sum(x.size for x in jax.tree.leaves(untied))
  assert n_untied - n_tied == CFG.vocab_size * CFG.hidden_dim
  assert untied["lm_head"]["kernel"].shape == (CFG.hidden_dim, CFG.vocab_size)


def test_init_is_deterministic_in_seed():
  _, a = models.init_params(CFG, 3)
  _, b = models.init_params(CFG, 3)
  _, c = models.init_params(CFG, 4)
  assert all(jax.tree.leaves(jax.tree.map(lambda x, y: bool(jnp.all(x == y)), a, b)))
  assert not np.allclose(
    a["layers"][0]["self_attn"]["q_proj"]["kernel"], c["layers"][0]["self_attn"]["q_proj"]["kernel"]
  )


def test_bfloat16_params_and_compute():
  cfg16 = dataclasses.replace(CFG, dtype="bfloat16", param_dtype="bfloat16")
  graphdef16, params16 = models.init_params(cfg16, 0)
  assert {x.dtype for x in jax.tree.leaves(params16)} == {jnp.dtype(jnp.bfloat16)}
  graphdef32, params32 = models.init_params(CFG, 0)
  tokens_BxL = _tokens(2, 9)
  mask_BxL = jnp.ones_like(tokens_BxL)
  logits16 = forward(graphdef16, params16, tokens_BxL, mask_BxL)
  assert logits16.dtype == jnp.float32  # bf16 operands, float32 sums (Transformer.logits)
  # Same weights (rounded to bf16) in float32: close, not equal.
  params32 = jax.tree.map(lambda x: x.astype(jnp.float32), params16)
  logits32 = forward(graphdef32, params32, tokens_BxL, mask_BxL)
  np.testing.assert_allclose(np.asarray(logits16, np.float32), logits32, atol=0.1)
  logps = token_logps(graphdef16, params16, tokens_BxL, mask_BxL, 1.0, False)
  assert logps.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(logps)))


def test_from_config_reads_model_group():
  cfg = config_lib.defaults()
  mc = models.ModelConfig.from_config(cfg.model, vocab_size=40)
  assert mc.vocab_size == 40 and mc.hidden_dim == cfg.model.hidden_dim
  assert mc.num_kv_heads == cfg.model.num_kv_heads and mc.tie_embeddings
  assert dataclasses.replace(models.PRESETS["tiny"], vocab_size=40) == mc
  with pytest.raises(ValueError):
    models.ModelConfig.from_config(cfg.model)  # vocab 0 and none given
  with pytest.raises(ValueError, match="model.family = 'gpt2' is not one of"):
    config_lib.defaults({"model.family": "gpt2"})  # at load; from_config trusts the group
  with pytest.raises(ValueError, match="multiple"):
    dataclasses.replace(CFG, num_kv_heads=3)


# ---------------------------------------------------------------- padding and causality


def test_positions_from_mask():
  mask = jnp.array([[0, 0, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0]])
  np.testing.assert_array_equal(
    models.positions_from_mask(mask), [[0, 0, 0, 1, 2, 2], [0, 1, 2, 3, 3, 3]]
  )


def test_left_and_right_padding_do_not_change_real_logits():
  graphdef, params = _perturbed_params(CFG, seed=5)
  tokens_1xL = _tokens(1, 8, seed=6)
  ref_LxV = forward(graphdef, params, tokens_1xL, jnp.ones_like(tokens_1xL))[0]
  # Row 0: 3 left pads + 1 right; row 1: 4 right pads; row 2: 2 + 2. Pad ids are arbitrary,
  # even outside the vocabulary.
  lefts = (3, 0, 2)
  rows = [[9] * n + list(np.asarray(tokens_1xL[0])) + [-1] * (4 - n) for n in lefts]
  masks = [[0] * n + [1] * 8 + [0] * (4 - n) for n in lefts]
  logits_BxLxV = forward(graphdef, params, jnp.array(rows), jnp.array(masks))
  for b, n in enumerate(lefts):
    np.testing.assert_allclose(logits_BxLxV[b, n : n + 8], ref_LxV, atol=1e-5)
  assert bool(jnp.all(jnp.isfinite(logits_BxLxV)))


def test_causal_later_tokens_do_not_change_earlier_logits():
  graphdef, params = _perturbed_params(CFG, seed=7)
  tokens_1xL = _tokens(1, 10, seed=8)
  changed = tokens_1xL.at[0, 6].set((tokens_1xL[0, 6] + 1) % CFG.vocab_size)
  mask = jnp.ones_like(tokens_1xL)
  a, b = forward(graphdef, params, tokens_1xL, mask), forward(graphdef, params, changed, mask)
  np.testing.assert_array_equal(a[0, :6], b[0, :6])
  assert float(jnp.max(jnp.abs(a[0, 6:] - b[0, 6:]))) > 1e-3


# ---------------------------------------------------------------- token log-probs


def test_token_logps_and_entropy_match_tempered_softmax():
  graphdef, params = _perturbed_params(CFG, seed=9)
  tokens_BxL = _tokens(2, 7, seed=10)
  mask_BxL = jnp.array([[0, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0]])
  tau = 0.7
  logps, ent = token_logps(graphdef, params, tokens_BxL, mask_BxL, tau, True)
  logits = np.asarray(forward(graphdef, params, tokens_BxL, mask_BxL), np.float64) / tau
  logp_all = (
    logits
    - np.log(np.sum(np.exp(logits - logits.max(-1, keepdims=True)), -1, keepdims=True))
    - logits.max(-1, keepdims=True)
  )
  for b in range(2):
    for t in range(7):
      if t == 0 or not mask_BxL[b, t]:
        assert logps[b, t] == 0 and ent[b, t] == 0
        continue
      np.testing.assert_allclose(logps[b, t], logp_all[b, t - 1, tokens_BxL[b, t]], atol=1e-5)
      p = np.exp(logp_all[b, t - 1])
      np.testing.assert_allclose(ent[b, t], -np.sum(p * logp_all[b, t - 1]), atol=1e-5)
  assert logps.dtype == jnp.float32 and ent.dtype == jnp.float32


def test_token_logps_gradient_is_finite_with_padding():
  graphdef, params = models.init_params(CFG, 0)
  tokens_BxL = _tokens(2, 6, seed=11)
  mask_BxL = jnp.array([[0, 0, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
  tokens_BxL = jnp.where(mask_BxL == 1, tokens_BxL, -1)  # an out-of-vocabulary pad id
  loss = lambda p: jnp.sum(models.token_logps(graphdef, p, tokens_BxL, mask_BxL))
  grads = jax.jit(jax.grad(loss))(params)
  leaves = jax.tree.leaves(grads)
  assert all(bool(jnp.all(jnp.isfinite(g))) for g in leaves)
  assert float(jnp.abs(grads["layers"][1]["mlp"]["down_proj"]["kernel"]).sum()) > 0
