"""model.scan_layers: the stacked layers run by lax.scan give the unrolled model's logits,
log-probs and gradients (remat, chunked vocabulary, shared prompts and packed rows included, every
family, OLMo-3's mixed sliding and full layers too) and the same sampled tokens."""

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import models, sampling
from grpo_jax.models import pack_plan
from grpo_jax.models.chunked_logps import chunked_token_logps
from grpo_jax.models.layer_stack import is_stacked, stack_layers, unstack_layers
from tests.support.models import FAMILIES, small_config

V, P, T = 97, 8, 10
IDS = [f for f, _ in FAMILIES]


def _cfg(family="qwen3", **kw):
  return small_config(family, V, **kw)


def _pair(family="qwen3", **kw):
  """((graphdef, params) unrolled, (graphdef, params) scanned) with the same weights."""
  cfg = _cfg(family, **kw)
  unrolled = models.init_params(cfg, 0)
  scanned = models.init_params(dataclasses.replace(cfg, scan_layers=True), 0)
  return unrolled, scanned


def _batch(share=1, runs=4, seed=0):
  """Runs of ``share`` rows with one left-padded prompt each, responses of 0 … T tokens."""
  rng = np.random.default_rng(seed)
  prompt_UxP = (np.arange(P)[None] >= rng.integers(0, 4, runs)[:, None]).astype(np.int32)
  prompt_mask = np.repeat(prompt_UxP, share, 0)
  lengths = rng.integers(1, T + 1, runs * share)
  response_mask = (np.arange(T)[None] < lengths[:, None]).astype(np.int32)
  mask = np.concatenate([prompt_mask, response_mask], 1)
  prompt_tokens = np.repeat(rng.integers(2, V, (runs, P)), share, 0)
  tokens = np.concatenate([prompt_tokens, rng.integers(2, V, (runs * share, T))], 1) * mask
  return tokens.astype(np.int32), mask.astype(np.int32)


def _close(a, b, atol=1e-5, rtol=1e-5):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
    np.testing.assert_allclose(np.asarray(y), np.asarray(x), atol=atol, rtol=rtol)


def test_scanned_init_is_the_stacked_unrolled_init():
  (_, flat), (_, stacked) = _pair()
  assert is_stacked(stacked) and not is_stacked(flat)
  assert stacked["layers"]["self_attn"]["q_proj"]["kernel"].shape == (3, 32, 32)
  assert stacked["layers"]["input_layernorm"]["weight"].shape == (3, 32)
  assert set(stacked) == set(flat)
  _close(stack_layers(flat), stacked, atol=0, rtol=0)
  _close(unstack_layers(stacked), flat, atol=0, rtol=0)
  assert stack_layers(stacked) is stacked and unstack_layers(flat) is flat
  # A checkpoint round trip's string layer keys stack in numeric order.
  strings = {**flat, "layers": {str(i): v for i, v in flat["layers"].items()}}
  _close(stack_layers(strings), stacked, atol=0, rtol=0)
  # abstract_params (the memory planner's layout) has the stacked shapes.
  _, abstract = models.abstract_params(_cfg(scan_layers=True))
  assert jax.tree.map(jnp.shape, abstract) == jax.tree.map(jnp.shape, stacked)


def test_compute_params_casts_the_stacked_matrices_not_the_norm_weights():
  (_, flat), (_, stacked) = _pair()
  cast = models.compute_params(stacked, "bfloat16")
  assert cast["layers"]["self_attn"]["q_proj"]["kernel"].dtype == jnp.bfloat16
  assert cast["layers"]["input_layernorm"]["weight"].dtype == jnp.float32
  assert cast["embed_tokens"]["embedding"].dtype == jnp.bfloat16
  _close(stack_layers(models.compute_params(flat, "bfloat16")), cast, atol=0, rtol=0)


@pytest.mark.parametrize("family,kw", FAMILIES, ids=IDS)
def test_scanned_logits_equal_the_unrolled(family, kw):
  (g0, p0), (g1, p1) = _pair(family, **kw)
  tokens, mask = _batch()
  logits0 = jax.jit(models.forward, static_argnums=0)(g0, p0, tokens, mask)
  logits1 = jax.jit(models.forward, static_argnums=0)(g1, p1, tokens, mask)
  assert float(jnp.max(jnp.abs(logits0))) > 0.1
  np.testing.assert_allclose(np.asarray(logits1), np.asarray(logits0), atol=1e-5, rtol=1e-5)
  # One scan over the layers: the layer's projections appear once in the program, not 3 times.
  jaxpr = str(jax.make_jaxpr(lambda p: models.forward(g1, p, tokens, mask))(p1))
  assert "scan[" in jaxpr
  dots = lambda j: len(re.findall(r"\bdot_general\[", j))
  jaxpr0 = str(jax.make_jaxpr(lambda p: models.forward(g0, p, tokens, mask))(p0))
  assert dots(jaxpr) < dots(jaxpr0)


@pytest.mark.parametrize("remat", ["none", "full"])
@pytest.mark.parametrize("family,kw", FAMILIES, ids=IDS)
def test_scanned_logps_and_gradients_equal_the_unrolled(family, kw, remat):
  (g0, p0), (g1, p1) = _pair(family, remat=remat, **kw)
  tokens, mask = _batch()
  w_NxL = jnp.asarray(np.random.default_rng(1).normal(size=tokens.shape), jnp.float32)

  def loss(graphdef):
    def f(p):
      logps, ent = models.token_logps(graphdef, p, tokens, mask, 0.9, True)
      return jnp.sum(w_NxL * logps) + 0.1 * jnp.sum(ent)

    return jax.jit(jax.value_and_grad(f))

  (l0, d0), (l1, d1) = loss(g0)(p0), loss(g1)(p1)
  np.testing.assert_allclose(float(l1), float(l0), rtol=1e-5)
  assert is_stacked(d1)
  _close(stack_layers(d0), d1)
  if remat != "none":  # the checkpoint sits inside the scan body: one region, not one per layer
    grad = jax.grad(lambda p: jnp.sum(models.token_logps(g1, p, tokens, mask)))
    jaxpr = str(jax.make_jaxpr(grad)(p1))
    assert len(re.findall(r"\b(?:checkpoint|remat2?)\[", jaxpr)) == 1


@pytest.mark.parametrize("family,kw", FAMILIES, ids=IDS)
def test_scanned_chunked_shared_and_packed_logps_equal_the_unrolled(family, kw):
  (g0, p0), (g1, p1) = _pair(family, remat="full", **kw)
  share = 3
  tokens, mask = _batch(share)
  plan = pack_plan.plan(mask, P, cell=2 * share, share=share, width=2 * tokens.shape[1])
  packed = jax.tree.map(jnp.asarray, plan.arrays(tokens, plan.rows_needed))
  chunked = chunked_token_logps(vocab_chunk=40)
  windows = {"shared": models.Window(P, share), "packed": models.Window(P, 1, packed)}

  def value_and_grad(graphdef, logps_fn, window):
    f = lambda p: jnp.sum(jnp.sin(logps_fn(graphdef, p, tokens, mask, 1.0, False, window)))
    return jax.jit(jax.value_and_grad(f))

  for fn in (models.token_logps, chunked):
    for window in windows.values():
      (l0, d0), (l1, d1) = value_and_grad(g0, fn, window)(p0), value_and_grad(g1, fn, window)(p1)
      np.testing.assert_allclose(float(l1), float(l0), rtol=1e-5)
      _close(stack_layers(d0), d1)


@pytest.mark.parametrize("family,kw", FAMILIES, ids=IDS)
@pytest.mark.parametrize("extra", [{}, {"decode_slots": 4}, {"prompt_share": 2}], ids=str)
def test_scanned_sampler_draws_the_unrolled_greedy_tokens(family, kw, extra):
  (g0, p0), (g1, p1) = _pair(family, **kw)
  tokens, mask = _batch(share=2)
  prompt, prompt_mask = jnp.asarray(tokens[:, :P]), jnp.asarray(mask[:, :P])
  decode = sampling.Decode(max_new_tokens=7, eos_id=-1, pad_id=0, temperature=0.0, **extra)
  out0 = sampling.sample(g0, p0, prompt, prompt_mask, jax.random.key(0), decode)
  out1 = sampling.sample(g1, p1, prompt, prompt_mask, jax.random.key(0), decode)
  np.testing.assert_array_equal(np.asarray(out1.tokens_NxT), np.asarray(out0.tokens_NxT))
  np.testing.assert_allclose(np.asarray(out1.logps_NxT), np.asarray(out0.logps_NxT), atol=1e-5)
  assert len(set(np.asarray(out0.tokens_NxT).ravel().tolist())) > 3
