"""Row splits for minibatches and micro-batches, and exact gradient accumulation inside a jit.

Splits respect the data-parallel layout: the N rows are D contiguous device blocks, and part j
of k is the j-th contiguous sub-block of every device block. Each part then spreads evenly over
all devices, the split is a local reshape (no cross-device traffic), and whole groups stay
together whenever G divides N/(D·k). With D = 1 the parts are plain contiguous slices.

Losses divide by step-global denominators (``grpo_jax.losses.denominators``), so the
micro-batch losses, gradients and aux metrics SUM to the full-batch values (METHODS §4,
stmt 13): accumulation adds, never averages.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def num_parts(num_rows: int, part_rows: int, what: str) -> int:
  """How many parts of ``part_rows`` rows (0 = one part) ``num_rows`` splits into, exactly."""
  if part_rows <= 0 or part_rows >= num_rows:
    return 1
  if num_rows % part_rows:
    raise ValueError(f"{what} = {part_rows} must divide the {num_rows} rows it splits")
  return num_rows // part_rows


def row_blocks(num_rows: int, k: int, devices: int) -> int:
  """D if the rows split into D device blocks of k equal parts each, else 1 (plain slices)."""
  return devices if devices > 1 and num_rows % (devices * k) == 0 else 1


def split_rows(tree, k: int, blocks: int = 1):
  """[N, ...] -> [k, N/k, ...]: part j = the j-th of k sub-blocks of each of ``blocks`` blocks.

  Every leaf: reshape to [D, k, N/(D·k), ...], swap the first two axes, merge D back in.
  """

  def split(x):
    x = jnp.asarray(x)
    n = x.shape[0]
    x = x.reshape(blocks, k, n // (blocks * k), *x.shape[1:])
    return jnp.swapaxes(x, 0, 1).reshape(k, n // k, *x.shape[3:])

  return jax.tree.map(split, tree)


def merge_rows(tree, blocks: int = 1):
  """Inverse of :func:`split_rows`: [k, N/k, ...] -> [N, ...] in the original row order."""

  def merge(x):
    k, m = x.shape[:2]
    x = x.reshape(k, blocks, m // blocks, *x.shape[2:])
    return jnp.swapaxes(x, 0, 1).reshape(k * m, *x.shape[3:])

  return jax.tree.map(merge, tree)


def map_rows(fn, rows, k: int, blocks: int = 1):
  """``fn(rows)`` computed k parts at a time (forward passes without gradients); same result
  as ``fn(rows)`` for row-wise ``fn``, with 1/k of the activation memory."""
  if k == 1:
    return fn(rows)
  return merge_rows(jax.lax.map(fn, split_rows(rows, k, blocks)), blocks)


def accumulate_grads(loss_fn, params, rows, k: int, blocks: int = 1):
  """((loss, aux, per_row), grads) of Σ_j loss_fn(params, part_j), one part at a time.

  ``loss_fn(params, rows) -> (loss, (aux, per_row))``: loss and the scalars in ``aux`` are
  additive over rows; ``per_row`` is a pytree of [rows, ...] arrays returned in row order.
  Gradients accumulate in at least float32 and are cast back to the parameters' dtype. With
  k = 1 this is ``jax.value_and_grad`` of the whole batch, nothing more.
  """
  grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
  if k == 1:
    (loss, (aux, per_row)), grads = grad_fn(params, rows)
    return (loss, aux, per_row), grads

  parts = split_rows(rows, k, blocks)
  wide = lambda p: jnp.promote_types(p.dtype, jnp.float32)
  part_shapes = jax.eval_shape(grad_fn, params, jax.tree.map(lambda x: x[0], parts))
  (loss_shape, (aux_shape, _)), _ = part_shapes
  zeros = lambda s: jnp.zeros(s.shape, s.dtype)
  init = (
    zeros(loss_shape),
    jax.tree.map(zeros, aux_shape),
    jax.tree.map(lambda p: jnp.zeros(p.shape, wide(p)), params),
  )

  def body(carry, part):
    loss_sum, aux_sum, grad_sum = carry
    (loss, (aux, per_row)), grads = grad_fn(params, part)
    grad_sum = jax.tree.map(lambda a, g: a + g.astype(a.dtype), grad_sum, grads)
    return (loss_sum + loss, jax.tree.map(jnp.add, aux_sum, aux), grad_sum), per_row

  (loss, aux, grads), per_row = jax.lax.scan(body, init, parts)
  grads = jax.tree.map(lambda g, p: g.astype(p.dtype), grads, params)
  return (loss, aux, merge_rows(per_row, blocks)), grads
