"""The inverse-CDF categorical draw behind every sampled token (sampling/next_token.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import sampling


def draw(logits_V, n, block, seed=0):
  logits_NxV = jnp.tile(jnp.asarray(logits_V, jnp.float32)[None], (n, 1))
  fn = jax.jit(sampling.categorical, static_argnums=2)
  token_N, logp_N = fn(jax.random.key(seed), logits_NxV, block)
  return np.asarray(token_N), np.asarray(logp_N)


@pytest.mark.parametrize("block", [1, 3, 4, 128])
def test_frequencies_match_softmax_over_blocks_and_zero_mass(block):
  """Unequal masses across several blocks (V = 11 is no multiple of 3 or 4), masked entries
  inside and at the edges of blocks, a whole masked block; chi-square against softmax."""
  with np.errstate(divide="ignore"):
    logits_V = np.log(np.array([0.0, 0.2, 0.05, 0.0, 0.0, 0.0, 0.0, 0.3, 0.15, 0.3, 0.0]))
  n = 40_000
  token_N, logp_N = draw(logits_V, n, block)
  probs_V = np.exp(logits_V)
  counts_V = np.bincount(token_N, minlength=11)
  assert np.all(counts_V[probs_V == 0] == 0)
  live = probs_V > 0
  expected = n * probs_V[live]
  chi2 = float(np.sum((counts_V[live] - expected) ** 2 / expected))
  assert chi2 < 20.5  # χ²(4 dof) 0.9996 quantile: a wrong sampler fails by hundreds
  np.testing.assert_allclose(logp_N, logits_V[token_N], atol=1e-6)


def test_logp_is_the_log_softmax_and_draws_follow_the_key():
  logits_NxV = jax.random.normal(jax.random.key(1), (64, 1000)) * 4
  token_N, logp_N = sampling.categorical(jax.random.key(2), logits_NxV)
  want = jax.nn.log_softmax(logits_NxV, -1)[jnp.arange(64), token_N]
  np.testing.assert_allclose(logp_N, want, atol=2e-6)
  again, _ = sampling.categorical(jax.random.key(2), logits_NxV)
  other, _ = sampling.categorical(jax.random.key(3), logits_NxV)
  np.testing.assert_array_equal(token_N, again)
  assert np.any(np.asarray(token_N) != np.asarray(other))


def test_one_live_entry_and_extreme_logits_are_always_picked():
  """A single finite logit (the rest −inf) anywhere, including the last slot of a padded block;
  huge logit gaps never overflow the mass or pick a zero-mass entry."""
  for live in (0, 5, 129, 130):
    logits_V = np.full(131, -np.inf, np.float32)
    logits_V[live] = 3.0
    token_N, logp_N = draw(logits_V, 256, 128, seed=live)
    assert np.all(token_N == live) and np.all(logp_N == 0.0)
  logits_V = np.array([1e4, -1e4, 0.0, 1e4 - 30.0], np.float32)
  token_N, _ = draw(logits_V, 4096, 2)
  assert set(np.unique(token_N)) <= {0, 3}


def test_first_argmax_is_argmax_with_ties_and_infinities():
  """Greedy's argmax as a max and a min reduction: NumPy's argmax on random rows, the first of
  tied maxima, rows of −inf with one finite entry; and over repeated rows (the shared
  prefill's logits), where the variadic-reduce argmax compiled for minutes, it compiles."""
  from grpo_jax.sampling.next_token import first_argmax

  rng = np.random.default_rng(0)
  x_NxV = rng.normal(size=(64, 37)).astype(np.float32)
  x_NxV[1, [3, 20, 30]] = 9.0  # ties: the first wins
  x_NxV[2] = -np.inf
  x_NxV[2, 36] = -1e30
  x_NxV[3] = np.round(x_NxV[3])  # many ties
  np.testing.assert_array_equal(jax.jit(first_argmax)(x_NxV), np.argmax(x_NxV, axis=-1))
  run_UxV = jnp.asarray(x_NxV[:8])
  repeated = jax.jit(lambda u: first_argmax(jnp.repeat(u, 4, axis=0)))(run_UxV)
  np.testing.assert_array_equal(repeated, np.repeat(np.argmax(x_NxV[:8], -1), 4))
