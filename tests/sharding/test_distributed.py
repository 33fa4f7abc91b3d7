"""Pure helpers of multi-host runs: objects packed for array collectives, each process's
problems of a sampler call, and per-process preview statistics merged."""

import jax
import numpy as np
import pytest

from grpo_jax import sharding as shard_lib
from grpo_jax.sharding import distributed
from grpo_jax.strategy.stats import PreviewStats


def test_objects_survive_packing_as_bytes():
  items = ["plain", "ünïcödé ✓", "", None, {"index": 3, "answer": "12"}, ("a", 1.5)]
  bytes_NxW, lengths_N = distributed.encode_objects(items, 64)
  assert bytes_NxW.shape == (6, 64) and bytes_NxW.dtype == np.uint8
  assert distributed.decode_objects(bytes_NxW, lengths_N) == items
  # Rows gathered from two processes decode as one list in process order.
  more = distributed.encode_objects(["x", "y"], 64)
  got = distributed.decode_objects(
    np.concatenate([bytes_NxW, more[0]]), np.concatenate([lengths_N, more[1]])
  )
  assert got == items + ["x", "y"]


def test_problem_share_takes_whole_problems(monkeypatch):
  """Process 1 of 2 holds rows [12, 24) of 6 problems × 4 rows: problems [3, 6). Rows of 3 per
  problem would straddle the processes: an error, not a silent split."""
  assert distributed.problem_share(None, 6, 4) == (0, 6)  # one process: every problem
  monkeypatch.setattr(jax, "process_count", lambda: 2)
  monkeypatch.setattr(jax, "process_index", lambda: 1)
  monkeypatch.setattr(shard_lib, "process_rows", lambda mesh, n: (n // 2, n))
  assert distributed.problem_share(None, 6, 4) == (3, 6)
  with pytest.raises(ValueError, match="straddle"):
    distributed.problem_share(None, 5, 3)


def test_preview_stats_merge_over_processes():
  a, b = PreviewStats(), PreviewStats()
  a.add(["add first", "Guess "], [1.0, 0.0])
  b.add(["guess", "multiply"], [1.0, 1.0])
  merged = PreviewStats.merge([dict(a.counts), dict(b.counts)])
  rows = {r["preview"]: (r["rollouts"], r["success_rate"]) for r in merged.table()}
  assert rows == {"add first": (1, 1.0), "guess": (2, 0.5), "multiply": (1, 1.0)}
