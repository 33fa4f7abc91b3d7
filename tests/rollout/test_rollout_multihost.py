"""The rollout on a multi-host job (``grpo_jax.rollout.multihost``): each process's share of the
prompts carries the job's ids, and the share and exchange are the identity with one process.
Several processes are simulated (``jax.process_count`` and ``process_rows`` patched)."""

import jax
import numpy as np
import pytest

from grpo_jax import sharding as shard_lib
from grpo_jax.config import defaults
from grpo_jax.rollout import multihost
from grpo_jax.strategy import id_units, layout


def test_offset_ids_shift_real_rows_and_keep_padding(monkeypatch, rollout_batch):
  """Ids move by first_problem × units per field; padding (−1) stays; the first process's
  batch is returned as it is."""
  monkeypatch.setattr(jax, "process_count", lambda: 4)  # job-wide ids: below 4 × 6 rows
  ids = np.array([0, 0, 1, 1, -1, -1], np.int32)
  batch = rollout_batch(group_ids_N=ids, subgroup_ids_N=np.where(ids >= 0, 2 * ids, -1))
  assert multihost.offset_ids(batch, 0, {"group_ids_N": 1}) is batch
  got = multihost.offset_ids(batch, 3, {"group_ids_N": 1, "subgroup_ids_N": 2})
  np.testing.assert_array_equal(got.group_ids_N, [3, 3, 4, 4, -1, -1])
  np.testing.assert_array_equal(got.subgroup_ids_N, [6, 6, 8, 8, -1, -1])
  assert got.group_ids_N.dtype == np.int32


def test_one_process_is_the_identity(rollout_batch):
  rollout_fn, problems_fn = (lambda p, r: None), (lambda s, c: None)
  units = {"group_ids_N": 1}
  assert multihost.process_share(rollout_fn, problems_fn, None, 4, units) == (
    rollout_fn,
    problems_fn,
  )
  batch = rollout_batch(group_ids_N=np.arange(2))
  exchange = multihost.RowExchange()
  assert exchange.gather(batch) is batch and exchange.local(batch) is batch
  assert exchange.gather_arrays({"a": np.arange(3)})["a"].tolist() == [0, 1, 2]
  assert exchange.mean({"x": 2.0}) == {"x": 2.0}


def _strategy_rollout(texts_by_problem, group_size, num_previews, rollout_batch):
  """A rollout packing ids as the two-stage path does (``strategy.layout``), previews merged
  when identical; problems are indices into ``texts_by_problem`` (K preview texts each)."""

  def rollout_fn(problems, rng):
    texts = [t for p in problems for t in texts_by_problem[p]]
    merged = layout.preview_ids(texts, num_previews, merge_identical=True)
    group_ids, subgroup_ids, _ = layout.row_ids(merged, group_size, num_previews)
    return rollout_batch(group_ids_N=group_ids, subgroup_ids_N=subgroup_ids)

  return rollout_fn


@pytest.mark.parametrize("strategy", [False, True])
def test_process_share_ids_equal_a_one_process_run(monkeypatch, strategy, rollout_batch):
  """One prompt per process, previews merged (the second prompt's two previews are one text):
  each process's offset ids equal the one-process run's rows. Subgroup ids count preview slots
  b·K + k (K per prompt) on the two-stage path, prompts on the one-stage path."""
  G, K = 4, 2
  cfg = defaults({"strategy.enabled": strategy, "strategy.num_previews": K})
  texts = [["add first", "multiply"], ["guess", " Guess "], ["a", "b"]]
  if strategy:
    rollout_fn = _strategy_rollout(texts, G, K, rollout_batch)
  else:

    def rollout_fn(problems, rng):
      ids = np.repeat(np.arange(len(problems), dtype=np.int32), G)
      return rollout_batch(group_ids_N=ids)

  problems_fn = lambda start, count: list(range(start, start + count))
  single = rollout_fn(problems_fn(0, 3), None)
  monkeypatch.setattr(jax, "process_count", lambda: 3)
  parts = []
  for p in range(3):  # process p holds rows [p·G, (p+1)·G): one prompt
    monkeypatch.setattr(shard_lib, "process_rows", lambda mesh, n, p=p: (p * G, (p + 1) * G))
    local_rollout, local_problems = multihost.process_share(
      rollout_fn, problems_fn, None, G, id_units(cfg)
    )
    parts.append(local_rollout(local_problems(0, 3), None))
  for key in ("group_ids_N", "subgroup_ids_N"):
    got = np.concatenate([getattr(b, key) for b in parts])
    np.testing.assert_array_equal(got, getattr(single, key), key)
