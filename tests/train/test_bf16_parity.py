"""bf16 compute over float32 master weights (``model.dtype = bfloat16``, ``model.param_dtype =
float32``) against float32 compute on the same weights: the sampler's log-probs, the trainer's
token log-probs, the update's loss, gradient (one SGD step) and AdamW moments agree within bf16
tolerances, and differ by more than float32 rounding (so the compute really is bf16). The
parameters, gradients and optimizer moments stay float32; the KV cache and the reference
model's matrices are bf16.

Tolerances: bf16 keeps 8 significant bits (relative rounding 2^-9 ≈ 0.002 per operation); over
the tiny model's two layers the log-probs move by a few hundredths at most, so 0.05 (log-probs)
and 5% (relative gradient / first-moment difference) bound it, while float32 rounding (~1e-6)
stays far below the 1e-4 floor.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from grpo_jax import models, sampling
from grpo_jax.models.chunked_logps import chunked_token_logps

BF16 = ("model.dtype=bfloat16",)
LOGP_ATOL = 0.05
REL_TOL = 0.05
FP32_FLOOR = 1e-4


def _models():
  cfg32 = dataclasses.replace(models.PRESETS["test"], vocab_size=300)
  cfg16 = dataclasses.replace(cfg32, dtype="bfloat16")  # param_dtype stays float32
  graphdef32, params = models.init_params(cfg32, 0)
  graphdef16, params16 = models.init_params(cfg16, 0)
  return graphdef32, graphdef16, params, params16


def _max_diff(a, b) -> float:
  return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def test_bf16_compute_keeps_float32_masters_and_bf16_cache():
  graphdef32, graphdef16, params, params16 = _models()
  assert {x.dtype for x in jax.tree.leaves(params16)} == {jnp.dtype(jnp.float32)}
  for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(params16)):
    np.testing.assert_array_equal(a, b)  # the compute dtype does not change the init
  prompt = jnp.ones((2, 5), jnp.int32)

  def prefill(graphdef):
    model = nnx.merge(graphdef, params)
    return sampling.prefill(model, prompt, jnp.ones_like(prompt), 8)

  logits16, cache16 = jax.eval_shape(lambda: prefill(graphdef16))
  _, cache32 = jax.eval_shape(lambda: prefill(graphdef32))
  assert logits16.dtype == jnp.float32
  assert {k.dtype for k in cache16.k_NxHkxDhxS + cache16.v_NxHkxSxDh} == {jnp.dtype(jnp.bfloat16)}
  assert {k.dtype for k in cache32.k_NxHkxDhxS} == {jnp.dtype(jnp.float32)}
  # The matrices the compute reads: bf16 kernels and embeddings, float32 norm weights.
  cast = models.compute_params(params, "bfloat16")
  for path, x in jax.tree_util.tree_flatten_with_path(cast)[0]:
    assert x.dtype == (jnp.bfloat16 if x.ndim >= 2 else jnp.float32), path
  assert models.compute_params(params, "float32") == params  # nothing to narrow


def test_token_logps_bf16_close_to_float32_and_cast_weights_exact():
  graphdef32, graphdef16, params, _ = _models()
  rng = np.random.default_rng(0)
  tokens = jnp.asarray(rng.integers(0, 300, (4, 12)), jnp.int32)
  mask = jnp.asarray(np.arange(12)[None] >= rng.integers(0, 4, (4, 1)), jnp.int32)
  logps_fn = jax.jit(models.token_logps, static_argnums=0)
  ref = logps_fn(graphdef32, params, tokens, mask)
  lp16 = logps_fn(graphdef16, params, tokens, mask)
  assert lp16.dtype == jnp.float32
  diff = _max_diff(lp16, ref)
  assert FP32_FLOOR < diff < LOGP_ATOL, diff
  # Pre-cast weights (what the sampler and the reference read) give the bf16 path's numbers.
  cast = models.compute_params(params, "bfloat16")
  np.testing.assert_allclose(logps_fn(graphdef16, cast, tokens, mask), lp16, atol=1e-5)
  # The vocabulary-chunked path too (float32 sums of bf16 products).
  chunked = jax.jit(lambda p: chunked_token_logps(128)(graphdef16, p, tokens, mask))(params)
  np.testing.assert_allclose(chunked, lp16, atol=1e-4)


def test_sampler_logps_bf16_close_to_float32():
  graphdef32, graphdef16, params, _ = _models()
  N, P, T = 8, 4, 10
  prompt = jnp.asarray(np.random.default_rng(1).integers(3, 300, (N, P)), jnp.int32)
  kw = dict(max_new_tokens=T, eos_id=-1, pad_id=0)
  out = sampling.sample(
    graphdef16, params, prompt, jnp.ones_like(prompt), jax.random.key(0), sampling.Decode(**kw)
  )
  tokens = jnp.concatenate([prompt, out.tokens_NxT], axis=1)
  mask = jnp.ones_like(tokens)
  logps_fn = jax.jit(models.token_logps, static_argnums=0)
  trainer16 = logps_fn(graphdef16, params, tokens, mask)[:, P:]
  truth32 = logps_fn(graphdef32, params, tokens, mask)[:, P:]
  # The sampler's bf16 log-probs: what the bf16 trainer recomputes (cached decode vs one full
  # forward pass round differently, within bf16), and near the float32 model's.
  np.testing.assert_allclose(out.logps_NxT, trainer16, atol=LOGP_ATOL)
  diff = _max_diff(out.logps_NxT, truth32)
  assert FP32_FLOOR < diff < LOGP_ATOL, diff


def _update(update_setup, synthetic_batch, run_update, overrides, sgd):
  """(state before, state after, metrics) of one update of the shared synthetic batch."""
  cfg, mesh, task, _, state, update = update_setup(overrides, sgd=sgd)
  new_state, metrics = run_update(update, state, synthetic_batch(cfg, task), mesh)
  return jax.device_get(state), new_state, metrics


def _float_dtypes(tree) -> set:
  return {x.dtype for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.floating)}


def test_update_gradient_bf16_close_to_float32(update_setup, synthetic_batch, run_update, rel_diff):
  """SGD at rate 1 from the same float32 weights: θ0 − θ1 is the gradient. (float32 gradients
  at the weights rounded to bf16 already differ by ~1% on this model.)"""
  grads = {}
  for name, overrides in (("32", ()), ("16", BF16)):
    before, after, metrics = _update(update_setup, synthetic_batch, run_update, overrides, True)
    assert _float_dtypes(after.params) == {jnp.dtype(jnp.float32)}
    grads[name] = (jax.tree.map(lambda a, b: a - b, before.params, after.params), metrics)
  (g32, m32), (g16, m16) = grads["32"], grads["16"]
  diff = rel_diff(g32, g16)
  assert FP32_FLOOR < diff < REL_TOL, diff
  for key in ("loss/total", "loss/entropy", "grad/norm"):
    assert m16[key] == pytest.approx(m32[key], rel=REL_TOL), key
  assert abs(m16["loss/entropy"] - m32["loss/entropy"]) > FP32_FLOOR  # bf16 log-probs


def _adam_moments(opt_state):
  (adam,) = [
    s for s in jax.tree_util.tree_leaves(opt_state, is_leaf=lambda x: hasattr(x, "mu"))
    if hasattr(s, "mu")
  ]  # fmt: skip
  return adam.mu, adam.nu


def test_adamw_moments_float32_and_close(update_setup, synthetic_batch, run_update, rel_diff):
  """The config's AdamW on float32 masters: parameters and both moments float32; the first
  moment (1 − β1)·g agrees with float32 compute as the gradient does. (The first step itself,
  ≈ −lr·sign(g), flips on the coordinates whose gradient is near 0, so it is not compared.)"""
  _, after32, _ = _update(update_setup, synthetic_batch, run_update, (), False)
  before16, after16, _ = _update(update_setup, synthetic_batch, run_update, BF16, False)
  assert _float_dtypes(after16.params) == _float_dtypes(after16.opt_state)
  assert _float_dtypes(after16.params) == {jnp.dtype(jnp.float32)}
  mu32, _ = _adam_moments(after32.opt_state)
  mu16, nu16 = _adam_moments(after16.opt_state)
  diff = rel_diff(mu32, mu16)
  assert FP32_FLOOR < diff < REL_TOL, diff
  assert rel_diff(before16.params, after16.params) > 0  # the parameters moved


def test_reference_model_is_bf16_and_matches_the_policy(update_setup, synthetic_batch, run_update):
  """With KL on, the frozen reference keeps its matrices in bf16: its log-probs equal the
  policy's (KL 0 at the first step), at half the bytes."""
  cfg, mesh, task, _, state, update = update_setup((*BF16, "loss.kl_coef=0.1"))
  ref = state.ref_params
  for path, x in jax.tree_util.tree_flatten_with_path(ref)[0]:
    assert x.dtype == (jnp.bfloat16 if x.ndim >= 2 else jnp.float32), path
  new_state, metrics = run_update(update, state, synthetic_batch(cfg, task), mesh)
  assert abs(metrics["loss/kl"]) < 1e-6
  assert {x.dtype for x in jax.tree.leaves(new_state.params)} == {jnp.dtype(jnp.float32)}


def test_memory_plan_counts_the_bf16_reference_and_sampler_copy():
  from grpo_jax.planning import memory as memory_plan

  cfg = dataclasses.replace(models.PRESETS["test"], dtype="bfloat16")
  _, params = models.init_params(cfg, 0)
  nbytes = lambda tree: sum(x.nbytes for x in jax.tree.leaves(tree))
  cast = nbytes(models.compute_params(params, "bfloat16"))
  work = memory_plan.Workload(prompts=2, group_size=2, prompt_tokens=4, response_tokens=4)
  est = memory_plan.plan(cfg, (1, 1, 1), work, memory_plan.H100_X8)
  assert est["params"] == nbytes(params) == 4 * cfg.num_params
  assert est["reference"] == est["sampler_params"] == cast < 0.6 * nbytes(params)
