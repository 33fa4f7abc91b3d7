"""The offset-shuffle permutation (METHODS §1 statement 5): in-block, uniform, re-centring."""

from __future__ import annotations

import collections

import jax
import jax.numpy as jnp
import numpy as np

from grpo_jax import advantages as adv_lib

# Slots 0..9: subgroups 1, 4, 7 belong to group 0; 2, 5 to group 3; 9 alone in group 8.
GROUP_OF = np.array([-1, 0, 3, -1, 0, 3, -1, 0, -1, 8], np.int32)
VALID = GROUP_OF >= 0


def perm(key, scope):
  return np.asarray(
    adv_lib.offset_permutation(key, jnp.asarray(GROUP_OF), jnp.asarray(VALID), scope)
  )


def test_prompt_scope_permutes_within_each_prompt_uniformly():
  counts = collections.Counter()
  for i in range(600):
    src = perm(jax.random.key(i), "prompt")
    assert sorted(src) == list(range(10))  # a permutation
    np.testing.assert_array_equal(GROUP_OF[src], GROUP_OF)  # never leaves its prompt
    np.testing.assert_array_equal(src[~VALID], np.flatnonzero(~VALID))  # empty slots fixed
    assert src[9] == 9  # K = 1: no-op
    counts[tuple(src[[1, 4, 7]])] += 1
  assert len(counts) == 6  # all 3! orders of group 0 occur, roughly equally often
  assert min(counts.values()) > 600 / 6 * 0.6


def test_batch_scope_mixes_prompts_and_keeps_the_multiset():
  crossed = 0
  for i in range(50):
    src = perm(jax.random.key(i), "batch")
    assert sorted(src[VALID]) == sorted(np.flatnonzero(VALID))
    crossed += int(np.any(GROUP_OF[src] != GROUP_OF))
  assert crossed > 40


def test_recenter_restores_zero_sum_per_prompt():
  offset = jnp.array([0.5, 0.5, -0.25, -0.25, -0.25, 1.0, -1.0, 0.0])
  gid = jnp.array([0, 0, 0, 0, 0, 2, 2, -1])
  valid = gid >= 0
  out = np.asarray(adv_lib.recenter_offsets(offset, gid, valid))
  np.testing.assert_allclose(out[:5].sum(), 0.0, atol=1e-7)
  np.testing.assert_allclose(out[:5], np.asarray(offset[:5]) - 0.05, atol=1e-7)
  np.testing.assert_allclose(out[5:7], [1.0, -1.0], atol=1e-7)
  assert out[7] == 0.0
