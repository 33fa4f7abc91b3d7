"""Waste in the decode loop: how many decode slot-steps run on rows that have already finished,
and the slot schedule of the continuous-batching sampler (``continuous.py``) for given lengths.

A row of L tokens takes its first token from a prefill and L − 1 decode steps for the rest. The
plain sampler decodes all N rows until the longest stops (steps = max L − 1); the continuous one
keeps S < N slots and refills a slot once its row stops, so its steps depend on the order in
which rows finish. Both are pure functions of the lengths: no model is needed to know them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from grpo_jax.sampling.steps import cache_buckets


def decode_waste(lengths_N, decode_steps: int, num_slots: int | None = None) -> float:
  """Fraction of decode slot-steps spent on finished rows or empty slots:

    waste = 1 − Σ_n (L_n − 1) / (S · steps)

  ``lengths_N``: tokens per row (≥ 1, the stop token included); ``decode_steps``: iterations of
  the decode loop that ran; ``num_slots`` S: rows decoded per step (default N, the plain
  sampler). 0 when no decode step ran.
  """
  lengths_N = np.asarray(lengths_N, np.int64)
  slots = len(lengths_N) if num_slots is None else int(num_slots)
  if decode_steps <= 0:
    return 0.0
  useful = int(np.sum(np.maximum(lengths_N - 1, 0)))
  return 1.0 - useful / (slots * int(decode_steps))


@dataclasses.dataclass(frozen=True)
class Schedule:
  """What a decode loop runs for given lengths: ``steps`` decode steps of ``slots`` rows, and
  ``column_steps`` = Σ_steps slots · cache columns past the prompt (the cache grows in buckets,
  ``steps.cache_buckets``): the keys/values each step reads, in units of one row's column."""

  steps: int
  slots: int
  column_steps: int


def _bucket(t: int, limits: list[int]) -> int:
  """Cache columns past the prompt while token t is drawn: the first limit above t."""
  return next(limit for limit in limits if limit > t)


def plain_schedule(lengths_N, max_new_tokens: int, first_bucket: int = 64) -> Schedule:
  """The plain sampler: all N rows until the longest stops (max L − 1 steps)."""
  limits = cache_buckets(max_new_tokens, first_bucket)
  steps = plain_steps(lengths_N)
  columns = sum(_bucket(t, limits) for t in range(1, steps + 1))
  return Schedule(steps, len(lengths_N), len(lengths_N) * columns)


def plain_steps(lengths_N) -> int:
  """Decode steps of the plain sampler: until its longest row stops (max L − 1)."""
  return int(np.max(lengths_N)) - 1


def continuous_steps(lengths_N, num_slots: int, blocks: int = 1) -> int:
  """Decode steps of the continuous-batching sampler (``continuous_schedule``)."""
  return continuous_schedule(lengths_N, num_slots, max(lengths_N), blocks).steps


def continuous_schedule(
  lengths_N, num_slots: int, max_new_tokens: int, blocks: int = 1, first_bucket: int = 64
) -> Schedule:
  """The continuous-batching sampler with S = ``num_slots`` slots, its N rows split into
  ``blocks`` equal consecutive blocks, each served by S / blocks slots of its own.

  The schedule (``continuous.py``): a row emits its first token from the prefill and one more
  per decode step, and frees its slot after its L-th; rows of one token never take a slot.
  Before the first step and after every step, each block's free slots take its next waiting
  rows, in row order, the lowest free slot first. The loop runs until the last block is done;
  all blocks share the cache bucket, which grows when a live slot's next token reaches it.
  """
  lengths_KxR = np.asarray(lengths_N, np.int64).reshape(blocks, -1)
  S = num_slots // blocks
  limits = cache_buckets(max_new_tokens, first_bucket)
  queues = [list(row[row > 1]) for row in lengths_KxR]  # rows that need a decode step
  left_KxS = np.zeros((blocks, S), np.int64)  # tokens the slot's row still has to emit
  t_KxS = np.zeros((blocks, S), np.int64)  # its next token's index
  nxt = [0] * blocks

  def admit():
    for k, queue in enumerate(queues):
      free = np.flatnonzero(left_KxS[k] == 0)[: len(queue) - nxt[k]]
      left_KxS[k, free] = queue[nxt[k] : nxt[k] + len(free)]
      left_KxS[k, free] -= 1
      t_KxS[k, free] = 1
      nxt[k] += len(free)

  admit()
  steps = columns = bucket = 0
  while np.any(left_KxS > 0):
    max_t = int(np.max(np.where(left_KxS > 0, t_KxS, 0)))
    bucket = max(bucket, _bucket(max_t, limits))
    columns += num_slots * bucket
    live = left_KxS > 0
    left_KxS -= live
    t_KxS += 1
    steps += 1
    admit()
  return Schedule(steps, num_slots, columns)
