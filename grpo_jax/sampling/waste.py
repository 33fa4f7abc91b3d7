"""Waste in the decode loop: how many decode slot-steps run on rows that have already finished,
and the slot schedule of the continuous-batching sampler (``continuous.py``) for given lengths.

A row of L tokens takes its first token from a prefill and L − 1 decode steps for the rest. The
plain sampler decodes all N rows until the longest stops (steps = max L − 1); the continuous one
keeps S < N slots and refills a slot once its row stops, so its steps depend on the order in
which rows finish. Both are pure functions of the lengths: no model is needed to know them.
"""

from __future__ import annotations

import numpy as np


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


def plain_steps(lengths_N) -> int:
  """Decode steps of the plain sampler: until its longest row stops (max L − 1)."""
  return int(np.max(lengths_N)) - 1


def continuous_steps(lengths_N, num_slots: int, refill_rows: int, blocks: int = 1) -> int:
  """Decode steps of the continuous-batching sampler with S = ``num_slots`` slots refilled in
  chunks of C = ``refill_rows`` (at most S / blocks), its N rows split into ``blocks`` equal
  consecutive blocks, each served by S / blocks slots of its own (the loop runs until the last
  block is done).

  The schedule (``continuous.py``): the first S/blocks rows of a block fill its slots; a row emits
  its first token when it is admitted and one more per decode step, and frees its slot after
  its L-th. Whenever a block has W > 0 waiting rows and at least min(C, W) free slots, its next
  min(C, W) rows are admitted, in row order, into its lowest free slots (repeated until the rule
  no longer holds, so a row that stops at its first token frees its slot at once).
  """
  lengths_N = np.asarray(lengths_N, np.int64)
  rows = len(lengths_N) // blocks
  slots = num_slots // blocks
  chunk = min(refill_rows, slots)  # as ``continuous.refill_chunk``
  if chunk < 1:
    raise ValueError(f"refill_rows must be >= 1, got {refill_rows}")
  return max(
    _block_steps(lengths_N[b * rows : (b + 1) * rows], slots, chunk) for b in range(blocks)
  )


def _block_steps(lengths_R: np.ndarray, slots: int, chunk: int) -> int:
  rows = len(lengths_R)
  left = np.zeros(slots, np.int64)  # tokens the slot's row still has to emit; 0 = free
  nxt = 0

  def admit(count):
    nonlocal nxt
    free = np.flatnonzero(left == 0)[:count]
    left[free] = lengths_R[nxt : nxt + count] - 1  # the first token comes with the admission
    nxt += count

  admit(min(slots, rows))
  steps = 0
  while True:
    while nxt < rows and np.sum(left == 0) >= min(chunk, rows - nxt):
      admit(min(chunk, rows - nxt))
    if not np.any(left > 0):
      return steps
    left = np.maximum(left - 1, 0)
    steps += 1
