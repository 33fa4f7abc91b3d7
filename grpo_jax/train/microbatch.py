"""Row splits for minibatches and micro-batches, and exact gradient accumulation inside a jit.

Splits respect the data-parallel layout: the N rows are D contiguous device blocks, and part j
of k is the j-th contiguous sub-block of every device block. Each part then spreads evenly over
all devices, the split is a local reshape (no cross-device traffic), and whole groups stay
together whenever G divides N/(D·k). With D = 1 the parts are plain contiguous slices.

With replicated parameters (pure data parallelism) each device accumulates the gradient of
its own rows and the sums are all-reduced once, after the last part (:func:`accumulate_grads`
with ``mesh``): one all-reduce per optimizer step instead of the one per part that the
partitioner would otherwise put inside the loop.

Losses divide by step-global denominators (``grpo_jax.losses.denominators``), so the
micro-batch losses, gradients and aux metrics SUM to the full-batch values (METHODS §4
statement 13): accumulation adds, never averages.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from grpo_jax import sharding as shard_lib


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


def accumulate_grads(loss_fn, params, rows, k: int, blocks: int = 1, mesh=None):
  """((loss, aux, per_row), grads) of Σ_j loss_fn(params, part_j), one part at a time.

  ``loss_fn(params, rows) -> (loss, (aux, per_row))``: loss and the scalars in ``aux`` are
  additive over rows; ``per_row`` is a pytree of [rows, ...] arrays returned in row order.
  Gradients accumulate in at least float32 and are cast back to the parameters' dtype. With
  k = 1 this is ``jax.value_and_grad`` of the whole batch, nothing more.

  ``mesh``: the rows' mesh, given when the parameters are replicated on it. With k > 1 and the
  rows in one block per device, each device then accumulates over its own rows' parts and the
  sums are reduced once at the end (:func:`reduce_once`): the same sums in another order.
  None: the partitioner reduces every part's gradient inside the loop.
  """
  if k > 1 and reduce_once_applies(mesh, blocks):
    return reduce_once(lambda p, r: accumulate_grads(loss_fn, p, r, k), mesh)(params, rows)
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


def reduce_once_applies(mesh, blocks: int) -> bool:
  """Whether the rows sit in ``blocks`` = one block per device of ``mesh``'s batch axes (more
  than one), so each device can accumulate its own parts."""
  devices = 1 if mesh is None else shard_lib.batch_size_multiple(mesh)
  return devices > 1 and blocks == devices


def reduce_once(grad_step, mesh):
  """``grad_step(params, rows) -> ((loss, aux, per_row), grads)`` run by every device on its
  own rows (a ``shard_map`` over the whole mesh, rows split over the batch axes data × fsdp),
  loss, aux and grads summed over the batch axes once (one ``psum``), ``per_row`` left split
  like the rows.

  The parameters must be replicated (pure data parallelism, the default mesh): with
  parameters split over fsdp or tensor the partitioner's reductions are kept, as a reduction
  per part there is a reduce-scatter that keeps the gradient sharded, and XLA's partitioner
  rejects the model's gather under a shard_map manual over ``data`` alone. ``check_vma`` is
  off because the accumulation's zero-initialised carry is the same on every device while its
  parts are not; the ``psum`` makes the results equal, as the ``P()`` out-specs state.
  """
  axes = shard_lib.BATCH_AXES

  def local(params, rows):
    (loss, aux, per_row), grads = grad_step(params, rows)
    loss, aux, grads = jax.lax.psum((loss, aux, grads), axes)
    return (loss, aux, per_row), grads

  return jax.shard_map(
    local,
    mesh=mesh,
    in_specs=(P(), P(axes)),
    out_specs=((P(), P(), P(axes)), P()),
    check_vma=False,
  )
