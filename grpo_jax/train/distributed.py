"""Multi-host runs on JAX's multi-controller runtime: one process per host, one program.

Every process runs the same launcher command. ``initialize`` joins them
(``jax.distributed.initialize``); afterwards ``jax.devices()`` lists every device of the job and
the mesh spans all hosts. The division of labour:

  prompts     each process takes the prompts whose rows its devices hold (``process_share``;
              process p of P: prompts [p·B/P, (p+1)·B/P) when the rows split over hosts),
              samples them and grades them on its own CPU; group ids are offset so they
              equal a one-process run's;
  batch       ``grpo_jax.sharding.shard_batch`` assembles the global N-row arrays from each
              process's rows (``jax.make_array_from_process_local_data``), so advantages,
              HA-DW anchors and loss denominators inside the jitted update see the global batch;
  width       the update's width is the longest completion over every process's rows
              (``global_max``), so all processes run the same compiled update;
  files       metrics, JSON and plots are written by process 0 only (``is_primary``);
  console     progress bars and log lines come from process 0 only (``progress_bar``,
              ``primary_log``);
  checkpoints orbax saves and restores from every process (each writes its own shards).

If a process dies, the others fail within ``heartbeat_timeout_seconds`` (the coordination
service notices the missing heartbeat) instead of waiting forever in a collective; rerunning
the same command on every host resumes from the last checkpoint.
"""

from __future__ import annotations

import os

import jax
import numpy as np
from tqdm.auto import tqdm

ENV_ADDRESS, ENV_NUM, ENV_ID = "JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"


def initialize(
  coordinator_address: str = "",
  num_processes: int = 0,
  process_id: int = -1,
  auto: bool = False,
  heartbeat_timeout_seconds: int = 100,
  env=None,
) -> bool:
  """Joins the job; returns True when running multi-process, False for a single process.

  Arguments win over the environment (``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``,
  ``JAX_PROCESS_ID``). ``auto``: ``jax.distributed.initialize()`` with no cluster arguments, so
  JAX detects the cluster (TPU pods, SLURM, Open MPI); giving an address, a process count or a
  process id with it is an error. With neither, nothing happens (an ordinary one-process run).
  On CPU the cross-process collectives use gloo.
  """
  if auto and (coordinator_address or num_processes or process_id >= 0):
    raise ValueError(
      "distributed auto-detection takes no coordinator_address / num_processes / process_id "
      f"(got {coordinator_address!r}, {num_processes}, {process_id}); give either the "
      "cluster's settings or auto, not both"
    )
  env = os.environ if env is None else env
  address = coordinator_address or env.get(ENV_ADDRESS, "")
  num = int(num_processes or env.get(ENV_NUM, 0) or 0)
  pid = int(process_id if process_id >= 0 else env.get(ENV_ID, -1))
  if not (auto or address):
    return False
  # Cross-process collectives between CPU devices (tests, CPU clusters); ignored by TPU/GPU.
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  kwargs = {"heartbeat_timeout_seconds": int(heartbeat_timeout_seconds)}
  if address and not auto:
    if num < 1 or pid < 0:
      raise ValueError(
        f"coordinator {address} given but num_processes={num}, process_id={pid}; set "
        f"--num_processes/--process_id or {ENV_NUM}/{ENV_ID}"
      )
    kwargs.update(coordinator_address=address, num_processes=num, process_id=pid)
  jax.distributed.initialize(**kwargs)
  return jax.process_count() > 1


def is_primary() -> bool:
  """Process 0 writes the run directory's files (metrics, JSON, plots)."""
  return jax.process_index() == 0


def progress_bar(iterable, enabled: bool = True, **kwargs) -> tqdm:
  """A tqdm bar over ``iterable`` (``kwargs`` to tqdm), drawn when ``enabled`` and on process 0
  only: a multi-host job shows one bar, not one per host."""
  return tqdm(iterable, disable=not (enabled and is_primary()), **kwargs)


def primary_log(log):
  """``log`` on process 0 and a no-op on the others, so a multi-host job prints a line once."""
  return log if is_primary() else (lambda *args, **kwargs: None)


def id_units(cfg=None) -> dict[str, int]:
  """Ids per prompt of each id field of a rollout batch: group ids count prompts (1 each);
  subgroup ids count prompts too on the one-stage path, and preview slots b·K + k (K per
  prompt, ``strategy.layout.row_ids``; merged previews share the smallest slot of their prompt)
  on the two-stage one (``strategy.is_two_stage``, K = ``strategy.num_previews``)."""
  from grpo_jax import strategy  # noqa: PLC0415

  k = int(cfg.strategy.num_previews) if cfg is not None and strategy.is_two_stage(cfg) else 1
  return {"group_ids_N": 1, "subgroup_ids_N": k}


def offset_ids(batch, first_problem: int, units: dict[str, int]):
  """Group / subgroup ids made job-wide: a process whose prompts start at ``first_problem`` of
  the step adds ``first_problem · units[key]`` to the batch's field ``key`` for each key of
  ``units`` (the ids that field counts per prompt, :func:`id_units`), so the ids equal a
  one-process run's. Negative ids (padding) stay negative. Ids stay below the global row count
  N (segment contract of ``grpo_jax.advantages.segments``). ``batch``: a ``RolloutBatch``."""
  if first_problem == 0:
    return batch
  changes = {}
  for key, per_problem in units.items():
    ids = np.asarray(getattr(batch, key))
    base = first_problem * int(per_problem)
    changes[key] = np.where(ids >= 0, ids + base, ids).astype(ids.dtype)
  return batch.replace(**changes)


def process_share(rollout_fn, problems_fn, mesh, group_size: int, cfg=None, units=None):
  """Wraps ``(rollout_fn, problems_fn)`` of ``dynamic_sampling.sample_batch`` so each process
  samples and grades only the prompts whose G rows its devices hold
  (``grpo_jax.sharding.process_rows``), its ids offset by :func:`offset_ids` with ``units``
  (default :func:`id_units` of ``cfg``: what the rollout of that config produces). Identity
  with one process."""
  if jax.process_count() == 1:
    return rollout_fn, problems_fn
  if cfg is not None and cfg.dapo.dynamic_sampling:
    raise NotImplementedError(
      "dapo.dynamic_sampling needs a job-wide count of kept groups; not supported multi-host"
    )
  from grpo_jax import sharding as shard_lib  # noqa: PLC0415

  units = id_units(cfg) if units is None else units
  first = {}

  def local_problems(start, count):
    r0, r1 = shard_lib.process_rows(mesh, count * group_size)
    if r0 % group_size or r1 % group_size:
      raise ValueError(
        f"process {jax.process_index()} holds rows [{r0}, {r1}), not whole groups of "
        f"{group_size}; choose prompts_per_step or the mesh so groups do not straddle hosts"
      )
    first["problem"] = r0 // group_size
    return problems_fn(start + r0 // group_size, (r1 - r0) // group_size)

  def local_rollout(problems, rng):
    return offset_ids(rollout_fn(problems, rng), first.get("problem", 0), units)

  return local_rollout, local_problems


def agree(value: bool) -> bool:
  """Process 0's ``value`` on every process (e.g. "does this file exist?" on a shared disk,
  where a late process could otherwise take another branch and skip a collective)."""
  if jax.process_count() == 1:
    return bool(value)
  from jax.experimental import multihost_utils  # noqa: PLC0415

  return bool(multihost_utils.broadcast_one_to_all(np.asarray(bool(value))))


def global_max(value: int) -> int:
  """The largest of every process's ``value`` on every process (one small all-gather): a
  choice made from each process's own rows (e.g. the update's width) becomes one for all."""
  if jax.process_count() == 1:
    return int(value)
  from jax.experimental import multihost_utils  # noqa: PLC0415

  return int(np.max(multihost_utils.process_allgather(np.asarray(int(value), np.int32))))
