"""Chunked log-probs over the vocabulary: the same numbers as the full softmax (values, entropies
and gradients), with a lower peak memory (XLA's compiled temp-buffer size, reported)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import models
from grpo_jax.models.chunked_logps import chunked_token_logps


def _setup(tie):
  cfg = models.ModelConfig(
    vocab_size=1000,
    hidden_dim=32,
    num_layers=1,
    num_heads=2,
    num_kv_heads=1,
    head_dim=16,
    mlp_dim=64,
    tie_embeddings=tie,
  )
  graphdef, params = models.init_params(cfg, 0)
  rng = np.random.default_rng(0)
  tokens = jnp.asarray(rng.integers(0, 1000, (4, 24)), jnp.int32)
  mask = jnp.asarray(np.arange(24)[None] >= rng.integers(0, 5, (4, 1)), jnp.int32)  # left pad
  return graphdef, params, tokens, mask


# 300 does not divide V = 1000 (a padded last chunk); untied uses lm_head.kernel.
@pytest.mark.slow
@pytest.mark.parametrize("tie,chunk", [(True, 300), (False, 128)])
def test_chunked_equals_full(tie, chunk):
  graphdef, params, tokens, mask = _setup(tie)
  # Each side jitted whole: one compile per program instead of one per primitive (op by op).
  full, ent_full = jax.jit(
    lambda p: models.token_logps(graphdef, p, tokens, mask, 0.7, with_entropy=True)
  )(params)
  part, ent_part = jax.jit(
    lambda p: chunked_token_logps(chunk)(graphdef, p, tokens, mask, 0.7, True)
  )(params)
  np.testing.assert_allclose(part, full, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ent_part, ent_full, rtol=1e-5, atol=1e-5)
  loss = lambda fn: lambda p: jnp.sum(fn(p) * mask)
  g_full = jax.jit(jax.grad(loss(lambda p: models.token_logps(graphdef, p, tokens, mask, 0.7))))(
    params
  )
  g_part = jax.jit(
    jax.grad(loss(lambda p: chunked_token_logps(chunk)(graphdef, p, tokens, mask, 0.7)))
  )(params)
  for a, b in zip(jax.tree.leaves(g_full), jax.tree.leaves(g_part)):
    np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


def test_chunked_lowers_peak_memory():
  cfg = models.ModelConfig(
    vocab_size=32768,
    hidden_dim=32,
    num_layers=1,
    num_heads=2,
    num_kv_heads=1,
    head_dim=16,
    mlp_dim=64,
  )
  graphdef, params = models.init_params(cfg, 0)
  tokens = jnp.zeros((8, 64), jnp.int32)
  mask = jnp.ones((8, 64), jnp.int32)

  def temp_bytes(fn):
    grad = jax.jit(jax.grad(lambda p: jnp.sum(fn(p))))
    return grad.lower(params).compile().memory_analysis().temp_size_in_bytes

  full = temp_bytes(lambda p: models.token_logps(graphdef, p, tokens, mask))
  part = temp_bytes(lambda p: chunked_token_logps(2048)(graphdef, p, tokens, mask))
  logits_bytes = 8 * 63 * 32768 * 4
  print(
    f"peak temp bytes: full vocabulary {full:,}, chunks of 2048 {part:,} "
    f"(one f32 logits tensor: {logits_bytes:,})"
  )
  assert full >= logits_bytes  # the full path holds at least one N×L×V tensor
  assert part < logits_bytes / 2 < full


@pytest.mark.parametrize("start", [1, 9])
def test_start_equals_slicing_the_full_result(start):
  """``start`` (only the completion's positions unembedded) returns exactly the full result's
  columns start … L−1, with entropies, and the same gradient as the sliced full loss; the
  chunked version agrees too."""
  graphdef, params, tokens, mask = _setup(False)
  full, ent = models.token_logps(graphdef, params, tokens, mask, 0.7, with_entropy=True)
  part, ent_part = models.token_logps(
    graphdef, params, tokens, mask, 0.7, True, models.Window(start)
  )
  assert part.shape == (4, 24 - start)
  np.testing.assert_allclose(part, full[:, start:], rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(ent_part, ent[:, start:], rtol=1e-6, atol=1e-6)
  chunked = chunked_token_logps(300)(
    graphdef, params, tokens, mask, 0.7, False, models.Window(start)
  )
  np.testing.assert_allclose(chunked, full[:, start:], rtol=1e-5, atol=1e-5)
  w = jnp.asarray(np.random.default_rng(1).normal(size=(4, 24 - start)), jnp.float32)
  sliced = lambda p: jnp.sum(models.token_logps(graphdef, p, tokens, mask, 0.7)[:, start:] * w)
  direct = lambda p: jnp.sum(
    models.token_logps(graphdef, p, tokens, mask, 0.7, window=models.Window(start)) * w
  )
  grads = [jax.tree.leaves(jax.grad(fn)(params)) for fn in (sliced, direct)]
  for a, b in zip(*grads):
    # Per leaf in norm: the two graphs sum the same terms in different orders, so a single
    # near-zero entry may differ by a few 1e-6 (one of 32,000 by 1.7e-6 under a loaded suite).
    assert np.linalg.norm(b - a) <= 1e-5 * np.linalg.norm(a), (np.linalg.norm(b - a), a.shape)
  with pytest.raises(ValueError, match="start"):
    models.token_logps(graphdef, params, tokens, mask, window=models.Window(24))


def test_token_logps_equal_the_materialised_log_softmax():
  """``token_logps`` (z_y − logsumexp z, never the B×L×V log-probs) equals NumPy's
  log_softmax(logits / τ) gathered at the next tokens, with entropies, in float64; and its
  gradient equals that of the materialised log_softmax + gather."""
  graphdef, params, tokens, mask = _setup(True)
  m = np.asarray(mask, bool)
  z = np.asarray(models.forward(graphdef, params, tokens, mask), np.float64)[:, :-1] / 0.7
  z_max = z.max(-1, keepdims=True)
  logp = z - z_max - np.log(np.exp(z - z_max).sum(-1, keepdims=True))
  picked = np.take_along_axis(logp, np.asarray(tokens)[:, 1:, None], -1)[..., 0]
  entropy = -(np.exp(logp) * logp).sum(-1)
  lead = lambda x: np.where(m, np.pad(x, ((0, 0), (1, 0))), 0.0)  # position 0 and padding: 0
  got, ent = models.token_logps(graphdef, params, tokens, mask, 0.7, with_entropy=True)
  np.testing.assert_allclose(got, lead(picked), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ent, lead(entropy), rtol=1e-5, atol=1e-5)

  w = jnp.asarray(np.random.default_rng(2).normal(size=(4, 23)), jnp.float32) * mask[:, 1:]

  def materialised(p):
    logp = jax.nn.log_softmax(models.forward(graphdef, p, tokens, mask)[:, :-1] / 0.7, axis=-1)
    return jnp.sum(jnp.take_along_axis(logp, tokens[:, 1:, None], -1)[..., 0] * w)

  direct = lambda p: jnp.sum(models.token_logps(graphdef, p, tokens, mask, 0.7)[:, 1:] * w)
  grads = [jax.tree.leaves(jax.grad(fn)(params)) for fn in (materialised, direct)]
  for a, b in zip(*grads):
    np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)
