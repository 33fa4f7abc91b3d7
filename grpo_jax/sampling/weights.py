"""The sampler's copy of the policy: the train-layout masters cast to the compute dtype, then
moved to the sampler layout (``mesh.sample_rules``), as one jitted program.

Casting first halves what the move gathers and what the sampler holds (float32 masters, bf16
compute: 2 bytes a weight instead of 4); the sampler casts to the compute dtype anyway
(``sampler._sample_jit``), so its tokens and log-probs are the same.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from grpo_jax.models.transformer import compute_params


def sampler_copy(dtype, shardings, fresh: bool = False):
  """``copy(params) -> params`` in ``shardings``, matrices in ``dtype`` where that narrows them
  (``models.compute_params``); jitted once (call it for every update's parameters). A leaf that
  needs neither cast nor move may come back as the same buffer; ``fresh``: never (a copy the
  update may not donate away, ``train.overlap``)."""
  if fresh:
    fn = lambda params: jax.tree.map(jnp.copy, compute_params(params, dtype))
  else:
    fn = lambda params: compute_params(params, dtype)
  return jax.jit(fn, out_shardings=shardings)


__all__ = ["sampler_copy"]
