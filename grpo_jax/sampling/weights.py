"""The sampler's copy of the policy: the train-layout masters cast to the compute dtype, then
moved to the sampler layout (``mesh.sample_rules``), as one jitted program.

Casting first halves what the move gathers and what the sampler holds (float32 masters, bf16
compute: 2 bytes a weight instead of 4); the sampler casts to the compute dtype anyway
(``sampler._sample_jit``), so its tokens and log-probs are the same. A leaf already in the
compute dtype and the sampler's layout is handed over as it is, not copied: the frozen LoRA base
an unmerged sampler reads (``model.lora.sampler``) stays one buffer.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from grpo_jax.models.transformer import compute_params


def _stays(x, target, sharding) -> bool:
  """Whether leaf ``x`` (an array, or a ShapeDtypeStruct with its sharding) is already what the
  copy would make: ``target``'s dtype, laid out as ``sharding``."""
  placed = getattr(x, "sharding", None)
  if placed is None or x.dtype != target.dtype:
    return False
  return placed.is_equivalent_to(sharding, len(x.shape))


@functools.cache
def _program(dtype: str, moving: tuple[bool, ...], treedef, out_shardings: tuple):
  def fn(moving_leaves):
    it = iter(moving_leaves)
    params = jax.tree.unflatten(treedef, [next(it) if m else None for m in moving])
    return jax.tree.leaves(compute_params(params, dtype))  # the moving leaves, cast

  return jax.jit(fn, out_shardings=list(out_shardings))


def copy_program(dtype, shardings, params) -> tuple:
  """``(program, its argument, moving)``: the jitted program :func:`sampler_copy` runs on
  ``params`` (arrays, or ShapeDtypeStructs with shardings: ``planning.programs``), the list of
  the leaves it casts and moves, and which of ``params``' leaves those are (the rest stay)."""
  leaves, treedef = jax.tree.flatten(params)
  targets = jax.tree.leaves(jax.eval_shape(lambda p: compute_params(p, dtype), params))
  places = treedef.flatten_up_to(shardings)
  moving = tuple(not _stays(*t) for t in zip(leaves, targets, places))
  out_shardings = tuple(s for s, m in zip(places, moving) if m)
  program = _program(jnp.dtype(dtype).name, moving, treedef, out_shardings)
  return program, [x for x, m in zip(leaves, moving) if m], moving


def sampler_copy(dtype, shardings, fresh: bool = False):
  """``copy(params) -> params`` in ``shardings``, matrices in ``dtype`` where that narrows them
  (``models.compute_params``); the leaves that need neither cast nor move come back as the same
  buffers, the others from one jitted program (:func:`copy_program`, compiled once per such set
  of leaves; call it for every update's parameters). ``fresh``: every leaf a new buffer (a copy
  the update may not donate away, ``train.overlap``)."""
  if fresh:
    fn = lambda params: jax.tree.map(jnp.copy, compute_params(params, dtype))
    return jax.jit(fn, out_shardings=shardings)

  def copy(params):
    program, args, moving = copy_program(dtype, shardings, params)
    if not any(moving):
      return params
    moved = iter(program(args))
    leaves, treedef = jax.tree.flatten(params)
    return jax.tree.unflatten(treedef, [next(moved) if m else x for x, m in zip(leaves, moving)])

  return copy


__all__ = ["copy_program", "sampler_copy"]
