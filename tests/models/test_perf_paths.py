"""The fast paths give the plain paths' results (no timing is asserted anywhere):

* KV-cache sampling draws the same tokens, for the same RNG, as a plain loop that reruns the
  full forward pass over prompt + completion-so-far at every step, with the same log-probs;
* 2-D GEMMs (``ModelConfig.flatten_matmuls``) give the 3-D dot_general's logits, log-probs,
  gradients and sampled tokens, and the decode step's fused gate/up GEMM
  (``ModelConfig.fuse_gate_up_decode``) the two GEMMs' tokens; each switch reaches the traced
  program;
* a jitted update and the sampler compile once: steps 2 and 3 trigger no compilation.
"""

import dataclasses
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import models, sampling
from grpo_jax.sampling import sampler as sampler_lib
from tests.support.sampling import left_padded_prompts

CFG = models.PRESETS["test"]  # vocab 64, hidden 64, 2 layers, 4 heads, 2 kv heads
V, PAD, NO_EOS = CFG.vocab_size, 0, CFG.vocab_size + 5


@pytest.fixture(scope="module")
def model():
  return models.init_params(CFG, 0)


def _prompts(N=4, P=6, seed=0):
  return left_padded_prompts(N, P, V, PAD, seed)


def _sample(graphdef, params, prompt, mask, rng, T, **kw):
  return sampling.sample(
    graphdef,
    params,
    prompt,
    mask,
    rng,
    sampling.Decode(max_new_tokens=T, eos_id=NO_EOS, pad_id=PAD, **kw),
  )


@pytest.mark.slow
@pytest.mark.parametrize("kw", [dict(temperature=1.0), dict(temperature=0.7, top_k=9)])
def test_cached_sampling_equals_plain_recompute_loop(model, kw):
  """Token t: the plain loop's full forward over [prompt, y_<t] then ``sample_next_token`` with
  the uniforms of fold_in(rng, t) — the sampler's key schedule, whose draws it makes before the
  decode loop — must pick the sampler's token."""
  graphdef, params = model
  prompt, mask = _prompts()
  rng, T = jax.random.key(3), 7
  out = _sample(graphdef, params, prompt, mask, rng, T, **kw)
  tokens, full_mask = prompt, mask
  settings = (kw["temperature"], kw.get("top_k", 0), kw.get("top_p", 1.0))
  for t in range(T):
    logits_NxV = models.forward(graphdef, params, tokens, full_mask)[:, -1]
    uniform_N = sampling.row_uniforms(jax.random.fold_in(rng, t), logits_NxV.shape[0])
    token_N, logp_N = sampling.sample_next_token(uniform_N, logits_NxV, *settings)
    np.testing.assert_array_equal(np.asarray(out.tokens_NxT[:, t]), np.asarray(token_N))
    np.testing.assert_allclose(np.asarray(out.logps_NxT[:, t]), np.asarray(logp_N), atol=2e-5)
    tokens = jnp.concatenate([tokens, token_N[:, None]], axis=1)
    full_mask = jnp.concatenate([full_mask, jnp.ones_like(token_N)[:, None]], axis=1)


def test_growing_cache_equals_one_static_cache(model):
  """Caches of P+2, P+4, P+8, P+13 slots (first_bucket=2) against one of P+13: same tokens,
  same log-probs, same stop bookkeeping; also with an EOS that stops rows early."""
  graphdef, params = model
  prompt, mask = _prompts(N=6, P=5, seed=4)
  assert sampler_lib.cache_buckets(13, 2) == [2, 4, 8, 13]
  assert sampler_lib.cache_buckets(13, 0) == [13] == sampler_lib.cache_buckets(13, 64)
  for eos in (NO_EOS, 3):
    kw = dict(max_new_tokens=13, eos_id=eos, pad_id=PAD, temperature=1.0)
    one = sampling.sample(
      graphdef, params, prompt, mask, jax.random.key(8), sampling.Decode(first_bucket=0, **kw)
    )
    grown = sampling.sample(
      graphdef, params, prompt, mask, jax.random.key(8), sampling.Decode(first_bucket=2, **kw)
    )
    np.testing.assert_array_equal(np.asarray(grown.tokens_NxT), np.asarray(one.tokens_NxT))
    np.testing.assert_array_equal(np.asarray(grown.mask_NxT), np.asarray(one.mask_NxT))
    np.testing.assert_allclose(np.asarray(grown.logps_NxT), np.asarray(one.logps_NxT), atol=1e-5)
  assert np.any(np.asarray(one.truncated_N) == 0)  # the EOS case did stop some rows


def _with(**layout):
  """The test model (same parameters) built with the ``ModelConfig`` layout fields ``layout``."""
  return models.init_params(dataclasses.replace(CFG, **layout), 0)


def _decode_jaxpr(graphdef, params) -> str:
  """The jaxpr of one decode step's MLP input: a (B, 1, D) forward through the model."""
  tokens, mask = _prompts(N=2, P=1, seed=9)
  return str(jax.make_jaxpr(lambda p: models.forward(graphdef, p, tokens, mask))(params))


def test_fused_gate_up_decode_same_tokens_and_logps(model):
  """The decode-step MLP with gate/up as one GEMM samples the two-GEMM path's tokens, and the
  switch changes the traced program (the graphdef carries it)."""
  prompt, mask = _prompts(N=5, P=7, seed=6)
  outs, jaxprs = [], []
  for fused in (False, True):
    graphdef, params = _with(fuse_gate_up_decode=fused)
    outs.append(_sample(graphdef, params, prompt, mask, jax.random.key(2), 12, temperature=1.0))
    jaxprs.append(_decode_jaxpr(graphdef, params))
  plain, fused = outs
  np.testing.assert_array_equal(np.asarray(fused.tokens_NxT), np.asarray(plain.tokens_NxT))
  np.testing.assert_allclose(np.asarray(fused.logps_NxT), np.asarray(plain.logps_NxT), atol=1e-5)
  assert jaxprs[0] != jaxprs[1]
  assert jaxprs[1].count("concatenate") > jaxprs[0].count("concatenate")


@pytest.fixture
def plain_and_flat():
  """Runs ``fn(graphdef, params)`` with 3-D matmuls and with 2-D GEMMs (same parameters)."""

  def run(fn):
    return [fn(*_with(flatten_matmuls=flat)) for flat in (False, True)]

  return run


def test_flat_matmuls_reach_the_program(plain_and_flat):
  """3-D dot_generals without the flag, none with it: the graphdef carries the layout."""
  tokens, mask = _prompts(N=3, P=10, seed=1)
  jaxprs = plain_and_flat(
    lambda g, p: str(jax.make_jaxpr(lambda q: models.forward(g, q, tokens, mask))(p))
  )
  assert jaxprs[0] != jaxprs[1]
  assert models.init_params(CFG, 0)[0] == _with(flatten_matmuls=True)[0]  # the default


def test_flat_matmuls_same_logits_logps_and_gradients(plain_and_flat):
  tokens, mask = _prompts(N=3, P=10, seed=1)

  def compute(graphdef, params):
    logits = jax.jit(lambda p: models.forward(graphdef, p, tokens, mask))(params)
    loss = lambda p: jnp.sum(models.token_logps(graphdef, p, tokens, mask, 0.9) ** 2)
    logps = jax.jit(lambda p: models.token_logps(graphdef, p, tokens, mask, 0.9))(params)
    return logits, logps, jax.jit(jax.grad(loss))(params)

  (logits0, logps0, grads0), (logits1, logps1, grads1) = plain_and_flat(compute)
  np.testing.assert_allclose(np.asarray(logits1), np.asarray(logits0), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.asarray(logps1), np.asarray(logps0), rtol=1e-5, atol=1e-5)
  flat0, flat1 = jax.tree.leaves(grads0), jax.tree.leaves(grads1)
  assert len(flat0) == len(flat1) > 10
  for g0, g1 in zip(flat0, flat1):
    scale = float(jnp.max(jnp.abs(g0))) + 1e-6
    np.testing.assert_allclose(np.asarray(g1), np.asarray(g0), atol=1e-5 * scale, rtol=1e-4)
  assert any(float(jnp.max(jnp.abs(g))) > 1e-3 for g in flat0)  # the gradients are not all 0


def test_flat_matmuls_same_sampled_tokens(plain_and_flat):
  prompt, mask = _prompts(N=5, P=7, seed=2)
  outs = plain_and_flat(
    lambda g, p: _sample(g, p, prompt, mask, jax.random.key(5), 12, temperature=1.0)
  )
  np.testing.assert_array_equal(np.asarray(outs[0].tokens_NxT), np.asarray(outs[1].tokens_NxT))
  np.testing.assert_allclose(
    np.asarray(outs[0].logps_NxT), np.asarray(outs[1].logps_NxT), atol=1e-5
  )


class _Compiles:
  """Counts backend compilations while registered."""

  EVENT = "/jax/core/compile/backend_compile_duration"

  def __init__(self):
    self.count = 0

  def __call__(self, event, duration, **kw):
    self.count += event == self.EVENT

  def __enter__(self):
    jax.monitoring.register_event_duration_secs_listener(self)
    return self

  def __exit__(self, *exc):
    jax.monitoring.unregister_event_duration_listener(self)


def test_update_and_sampler_compile_once(update_setup, synthetic_batch, fresh):
  cfg, mesh, task, graphdef, state, update = update_setup()
  batch = synthetic_batch(cfg, task)
  state = fresh(state)
  state, m = update(
    state, batch.to_device(mesh)
  )  # step 1 compiles (or reuses another test's program)
  jax.block_until_ready(m)
  prompt, mask = _prompts()
  params = state.params
  kw = dict(max_new_tokens=5, eos_id=NO_EOS, pad_id=PAD)
  g2, p2 = models.init_params(CFG, 0)
  sampling.sample(
    g2, p2, prompt, mask, jax.random.key(0), sampling.Decode(**kw)
  ).tokens_NxT.block_until_ready()
  with _Compiles() as compiles:
    for step in (2, 3):
      state, m = update(state, synthetic_batch(cfg, task, seed=step).to_device(mesh))
      jax.block_until_ready(m)
      out = sampling.sample(g2, p2, prompt, mask, jax.random.key(step), sampling.Decode(**kw))
      out.tokens_NxT.block_until_ready()
  assert compiles.count == 0
  assert int(state.step) == 3 and params is not state.params
