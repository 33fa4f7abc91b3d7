"""The rollout on a multi-host job: each process samples its share, the rows are exchanged.

``grpo_jax.sharding.distributed`` holds the collectives; this module is what the rollout does
with them on a :class:`~grpo_jax.rollout.batch.RolloutBatch`:

  share     :func:`process_share` wraps ``(rollout_fn, problems_fn)`` so each process samples
            and grades the prompts whose rows its devices hold (process p of P: prompts
            [p·B/P, (p+1)·B/P) when the rows split over hosts); :func:`offset_ids` makes the
            group ids equal a one-process run's;
  exchange  :class:`RowExchange`: DAPO's dynamic sampling gathers each round's rows on every
            process, so all keep the same groups in prompt order and stop after the same round
            as one process; each then takes its rows of the step's batch; per-process rollout
            metrics are averaged.

Every function is the identity with one process.
"""

from __future__ import annotations

import jax
import numpy as np

from grpo_jax import sharding as shard_lib
from grpo_jax.rollout.batch import RolloutBatch
from grpo_jax.sharding import distributed


def offset_ids(batch: RolloutBatch, first_problem: int, units: dict[str, int]) -> RolloutBatch:
  """Group / subgroup ids made job-wide: a process whose prompts start at ``first_problem``
  of the step adds ``first_problem · units[key]`` to the batch's field ``key`` for each key of
  ``units`` (the ids that field counts per prompt, ``grpo_jax.strategy.id_units``), so the ids
  equal a one-process run's. Negative ids (padding) stay negative. Ids stay below the global
  row count N (segment contract of ``grpo_jax.advantages.segments``)."""
  if first_problem == 0:
    return batch
  changes = {}
  for key, per_problem in units.items():
    ids = np.asarray(getattr(batch, key))
    base = first_problem * int(per_problem)
    changes[key] = np.where(ids >= 0, ids + base, ids).astype(ids.dtype)
  return batch.replace(**changes)


def process_share(rollout_fn, problems_fn, mesh, group_size: int, units: dict[str, int]):
  """Wraps ``(rollout_fn, problems_fn)`` of ``dynamic_sampling.sample_batch`` so each process
  samples and grades only the prompts whose G rows its devices hold
  (``distributed.problem_share``), its ids offset by :func:`offset_ids` with ``units`` (what
  the run's rollout produces per prompt: ``grpo_jax.strategy.id_units``). Identity with one
  process."""
  if jax.process_count() == 1:
    return rollout_fn, problems_fn
  first = {}

  def local_problems(start, count):
    p0, p1 = distributed.problem_share(mesh, count, group_size)
    first["problem"] = p0
    return problems_fn(start + p0, p1 - p0)

  def local_rollout(problems, rng) -> RolloutBatch:
    return offset_ids(rollout_fn(problems, rng), first.get("problem", 0), units)

  return local_rollout, local_problems


class RowExchange:
  """How ``dynamic_sampling.sample_batch`` sees the other processes of the job: each process
  samples its share of a round (:func:`process_share`), ``gather`` makes the round's batch
  global on every process (so every process picks the same groups and stops after the same
  round as one process would), ``local`` takes this process's rows of the step's batch back.
  Every method is the identity with one process."""

  def __init__(self, mesh=None):
    self.mesh = mesh

  def gather(self, batch: RolloutBatch) -> RolloutBatch:
    """The job's rows of ``batch`` (job-wide ids), texts included."""
    if jax.process_count() == 1:
      return batch
    keys = [k for k in ("completions_N", "problems_N") if getattr(batch, k)]
    texts = {k: distributed.gather_objects(getattr(batch, k)) for k in keys}
    return batch.replace(**distributed.gather_rows(batch.arrays()), **texts)

  def gather_arrays(self, arrays: dict) -> dict:
    """``distributed.gather_rows``."""
    return distributed.gather_rows(arrays)

  def mean(self, values: dict) -> dict:
    """``distributed.mean_over_processes``."""
    return distributed.mean_over_processes(values)

  def local(self, batch: RolloutBatch) -> RolloutBatch:
    """This process's rows of a job-wide ``batch`` (the rows its devices hold)."""
    if jax.process_count() == 1:
      return batch
    r0, r1 = shard_lib.process_rows(self.mesh, batch.num_rows)
    return batch.take(np.arange(r0, r1), np.ones(r1 - r0, bool))


__all__ = ["RowExchange", "offset_ids", "process_share"]
