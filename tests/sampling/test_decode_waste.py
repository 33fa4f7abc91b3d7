"""Decode-loop waste and the continuous sampler's slot schedule, on hand-worked lengths."""

import numpy as np
import pytest

from grpo_jax.sampling import waste


def test_waste_counts_slot_steps_after_a_row_stops():
  # Rows of 1, 3, 5 tokens: 4 decode steps; useful steps 0 + 2 + 4 of 3 · 4.
  assert waste.plain_steps([1, 3, 5]) == 4
  assert waste.decode_waste([1, 3, 5], 4) == pytest.approx(0.5)
  # The same rows through 2 slots for 5 steps: 1 − 6 / 10.
  assert waste.decode_waste([1, 3, 5], 5, num_slots=2) == pytest.approx(0.4)
  assert waste.decode_waste([4, 4], 3) == 0.0
  assert waste.decode_waste([1, 1], 0) == 0.0  # no decode step ran


def test_continuous_schedule_by_hand():
  # Lengths 5, 1, 2, 3 through two slots. Row 1 stops at its first token (the prefill's) and
  # never takes a slot: rows 0 and 2 start. Step 1: row 2 stops, row 3 takes its slot. Steps
  # 2–4: row 3 stops at step 3, row 0 at step 4.
  lengths = [5, 1, 2, 3]
  assert waste.continuous_steps(lengths, num_slots=2) == 4
  assert waste.decode_waste(lengths, 4, 2) == pytest.approx(1 - 7 / 8)
  assert waste.decode_waste(lengths, waste.plain_steps(lengths)) == pytest.approx(1 - 7 / 16)
  assert waste.continuous_steps(lengths, num_slots=1) == 4 + 1 + 2  # one row after the other


def test_blocks_run_their_own_slots():
  # Two blocks of two rows, one slot each. Block 0 (3, 2): 2 steps, then row 1's 1; block 1
  # (1, 4): row 2 needs no step, row 3 runs 3. The loop ends with the last block.
  assert waste.continuous_steps([3, 2, 1, 4], 2, blocks=2) == 3
  # (6, 6) in one block run one after the other; as one block with two slots, side by side.
  assert waste.continuous_steps([6, 6, 1, 1], 2, blocks=2) == 10
  assert waste.continuous_steps([6, 6, 1, 1], 2, blocks=1) == 5


def test_columns_follow_the_cache_buckets():
  # T = 128 in buckets of 64 and 128 columns: tokens 1–63 are drawn over 64, 64–69 over 128.
  plain = waste.plain_schedule([1, 3, 70], 128, first_bucket=64)
  assert (plain.steps, plain.slots, plain.column_steps) == (69, 3, 3 * (63 * 64 + 6 * 128))
  # One slot: rows 3 (2 steps) then 70 (69 steps); the bucket grows when row 2 draws token 64.
  cont = waste.continuous_schedule([1, 3, 70], 1, 128, first_bucket=64)
  assert (cont.steps, cont.column_steps) == (71, (2 + 63) * 64 + 6 * 128)


def test_more_slots_never_take_more_steps_than_rows_need():
  rng = np.random.default_rng(0)
  lengths = rng.integers(1, 40, 64)
  for slots in (1, 4, 16, 63):
    steps = waste.continuous_steps(lengths, slots)
    assert steps >= max(waste.plain_steps(lengths), int(np.sum(lengths - 1)) // slots)
  assert waste.continuous_steps(lengths, 1) == int(np.sum(lengths - 1))
