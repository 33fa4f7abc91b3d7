"""The update on the batch cut to its longest completion, at one of a few widths
(``loss.length_buckets``).

A step's completions are right-padded to the T response slots that were sampled, most of them
far shorter (SmolLM2-135M-Instruct on arithmetic at T = 64: 8–11 tokens on average). The
update's log-probs of slots [0, W) read tokens [0, P + W) only (causal attention), and the slots
after every row's last completion token lie outside every mask that the loss and its metrics
read. So for W ≥ the longest completion, the update of tokens_Nx(P+W), input_mask_Nx(P+W) and
the response arrays' first W slots equals the full-width one up to float rounding, with every
pass (old log-probs, reference, policy) over P + W positions instead of P + T. The one
normaliser that counts slots, Dr.GRPO's T_max with ``loss.norm_length`` = 0, keeps the sampled
T (``update.UpdateSpec.completion_len``); lengths (DAPO's overlong penalty) are the
rollout's, before any cut.

W is the longest completion rounded up to the nearest of n widths ceil(T / 2^k), k < n
(:func:`bucket_widths`), so the jitted update compiles once per width it meets, at most n times.
The cut is made on the host, before the batch is put on the devices: the rows stay split over
data × fsdp as before. Multi-host, each process holds its own rows, so the longest completion is
the maximum over processes (``distributed.global_max``) and every process runs one program.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from grpo_jax import sharding as shard_lib
from grpo_jax.rollout.batch import UpdateBatch
from grpo_jax.sharding import distributed


def bucket_widths(T: int, count: int) -> tuple[int, ...]:
  """The distinct widths ceil(T / 2^k) for k < ``count``, ascending; (T,) for count ≤ 1 (off).
  E.g. T = 64, count 4: (8, 16, 32, 64); T = 12, count 4: (2, 3, 6, 12)."""
  return tuple(sorted({-(-int(T) // 2**k) for k in range(max(int(count), 1))}))


def longest_completion(mask_NxT) -> int:
  """1 + the last slot where any row's mask is 1 (0 when none is): the slots the loss reads."""
  used_T = np.any(np.asarray(mask_NxT) > 0, axis=0)
  return int(np.flatnonzero(used_T)[-1]) + 1 if used_T.any() else 0


def bucket_width(longest: int, widths) -> int:
  """The smallest of ``widths`` (ascending) that holds ``longest`` slots (at least one slot: the
  shared prompt pass needs a completion slot to predict)."""
  for w in widths:
    if w >= max(longest, 1):
      return int(w)
  raise ValueError(f"{longest} completion slots exceed the widest bucket {widths[-1]}")


def cut(batch: UpdateBatch, width: int) -> UpdateBatch:
  """The update's arrays (``RolloutBatch.device_batch``) cut to ``width`` response slots: every
  ``*_NxT`` to its first W slots, every ``*_NxL`` (L = P + T) to its first P + W; per-row ``*_N``
  arrays as they are. W = T returns the arrays unchanged."""
  T = batch.completion_mask_NxT.shape[1]
  if not 0 < width <= T:
    raise ValueError(f"a cut width must lie in [1, T = {T}], got {width}")
  drop = T - width
  if not drop:
    return batch
  changes = {}
  for field in dataclasses.fields(batch):
    x = getattr(batch, field.name)
    if field.name.endswith("_NxT"):
      changes[field.name] = np.ascontiguousarray(x[:, :width])
    elif field.name.endswith("_NxL"):
      changes[field.name] = np.ascontiguousarray(x[:, : x.shape[1] - drop])
  return batch.replace(**changes)


@dataclasses.dataclass
class Prepared:
  """A batch ready for the update: ``batch`` its ``UpdateBatch`` on the mesh, ``T`` the sampled
  response slots (which compiled update runs it), ``metrics`` ``update/width``,
  ``update/compiled_widths`` and, packed, ``pack/*``."""

  batch: UpdateBatch
  T: int
  metrics: dict


class LengthAwareUpdate:
  """``update(state, batch) -> (state, metrics)`` for a host ``RolloutBatch``: the jitted update
  ``make_step(T)`` (built once per sampled width T: its ``completion_len``) run on the batch cut
  to its bucket width W (:func:`cut`), on ``mesh``.

  Adds ``update/width`` (W) and ``update/compiled_widths`` (the distinct (T, W) run so far,
  one compilation of the update each) to the metrics, and ``log``s each new width once.
  ``buckets`` = ``loss.length_buckets`` (0 or 1: always W = T). ``pack``: a
  ``grpo_jax.train.packing.Packer`` that packs the cut batch's real tokens (``loss.pack``; its
  packed rows R are then part of the shape: ``update/compiled_widths`` counts (T, W, R)).
  ``compiled``: {T: ``train.fit.Fitted``}, updates compiled ahead (at load, to check they fit),
  run instead of ``make_step(T)`` on a batch of the shapes they were compiled for.
  """

  def __init__(self, make_step, mesh, buckets: int, log=None, pack=None, compiled=None):
    self.make_step, self.mesh, self.buckets, self.log = make_step, mesh, int(buckets), log
    self.pack, self.compiled = pack, dict(compiled or {})
    self.steps: dict[int, object] = {}  # T -> jitted update
    self.shapes: list[tuple[int, ...]] = []  # (T, W[, R]) in the order first run

  def width(self, batch) -> tuple[int, int]:
    """(T, W) of a ``RolloutBatch``: W from the longest completion of every process's rows."""
    mask_NxT = batch.completion_mask_NxT
    T = mask_NxT.shape[1]
    longest = distributed.global_max(longest_completion(mask_NxT))
    return T, bucket_width(longest, bucket_widths(T, self.buckets))

  def prepare(self, batch) -> Prepared:
    """A host ``RolloutBatch`` as the update reads it: cut to its bucket width, packed (with a
    ``pack``), its rows sharded over the mesh; logs each new shape once."""
    T, W = self.width(batch)
    arrays, metrics = cut(batch.device_batch(), W), {}
    shape = (T, W)
    if self.pack is not None:
      arrays, metrics = self.pack(arrays)
      shape = (T, W, int(metrics["pack/rows"]))
    if shape not in self.shapes:
      self.shapes.append(shape)
      if self.log is not None:
        widths = bucket_widths(T, self.buckets)
        packed = f", {shape[2]} packed rows" if self.pack is not None else ""
        self.log(f"update: width {W} of {T} response slots (buckets {list(widths)}){packed}")
    metrics.update({"update/width": W, "update/compiled_widths": len(self.shapes)})
    return Prepared(shard_lib.shard_batch(arrays, self.mesh), T, metrics)

  def run(self, state, prepared: Prepared):
    """The update compiled for ``prepared``'s T (ahead, at load, when it accepts these shapes)
    on its batch: ``(state, metrics)``."""
    T = prepared.T
    ahead = self.compiled.get(T)
    if ahead is not None and ahead.accepts(prepared.batch):
      return ahead.compiled(state, prepared.batch)
    if T not in self.steps:
      self.steps[T] = self.make_step(T)
    return self.steps[T](state, prepared.batch)

  def __call__(self, state, batch):
    """``run(state, prepare(batch))``, the prepared batch's metrics added."""
    prepared = self.prepare(batch)
    state, metrics = self.run(state, prepared)
    return state, {**metrics, **prepared.metrics}


__all__ = [
  "LengthAwareUpdate",
  "Prepared",
  "bucket_width",
  "bucket_widths",
  "cut",
  "longest_completion",
]
