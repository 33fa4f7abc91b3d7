"""Prompt batches shared by the sampler tests."""

import jax.numpy as jnp
import numpy as np


def left_padded_prompts(N: int, P: int, vocab: int, pad: int, seed: int = 0):
  """(tokens_NxP, mask_NxP): left-padded prompts with 1..P real tokens per row (row 0 full),
  real tokens drawn from [1, vocab)."""
  rng = np.random.default_rng(seed)
  lengths = rng.integers(1, P + 1, N)
  lengths[0] = P
  mask = (np.arange(P)[None] >= P - lengths[:, None]).astype(np.int32)
  tokens = np.where(mask == 1, rng.integers(1, vocab, (N, P)), pad).astype(np.int32)
  return jnp.asarray(tokens), jnp.asarray(mask)
