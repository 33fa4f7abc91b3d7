"""Multi-host runs on JAX's multi-controller runtime: one process per host, one program.

Every process runs the same launcher command. ``initialize`` joins them
(``jax.distributed.initialize``); afterwards ``jax.devices()`` lists every device of the job and
the mesh spans all hosts. This module holds the collectives the layers above share; what each
does with them:

  prompts     each process samples and grades the prompts whose rows its devices hold
              (``problem_share``; ``grpo_jax.rollout.multihost.process_share`` offsets the
              group ids so they equal a one-process run's);
  batch       ``grpo_jax.sharding.shard_batch`` assembles the global N-row arrays from each
              process's rows (``jax.make_array_from_process_local_data``), so advantages,
              HA-DW anchors and loss denominators inside the jitted update see the global batch;
  width       the update's width is the longest completion over every process's rows
              (``global_max``), so all processes run the same compiled update;
  DAPO        dynamic sampling gathers each round's rows on every process
              (``grpo_jax.rollout.multihost.RowExchange`` over ``gather_rows`` and
              ``gather_objects``); per-process rollout metrics are averaged
              (``mean_over_processes``);
  previews    strategy previews, online or presampled, are drawn by each process for its own
              prompts; ``--mode=presample`` runs on every process, each drawing its part of
              every chunk (``problem_share``), the chunk is gathered and process 0 writes it;
              the per-preview success counts are merged before process 0 writes them;
  warm start  every process draws the SFT batch and feeds the rows its devices hold;
  evaluation  each process samples and grades its problems of every chunk (``problem_share``;
              chunks the same shape everywhere, so the sampler sees the one-process chunk), the
              graded rows and texts are gathered (``gather_rows``, ``gather_objects``), every
              process returns the same summary and process 0 writes ``eval/``;
  files       metrics, JSON and plots are written by process 0 only (``is_primary``);
  console     progress bars and log lines come from process 0 only
              (``grpo_jax.train.console``);
  checkpoints orbax saves and restores from every process (each writes its own shards).

If a process dies, the others fail within ``heartbeat_timeout_seconds`` (the coordination
service notices the missing heartbeat) instead of waiting forever in a collective; rerunning
the same command on every host resumes from the last checkpoint.
"""

from __future__ import annotations

import os
import pickle

import jax
import numpy as np

from grpo_jax.sharding import ports

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
  On CPU the cross-process collectives use gloo. Process 0 first checks that the coordinator's
  port is free on this host (``ports.is_free``): jax would crash on a taken one.
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
    port = ports.port_of(address)
    if pid == 0 and not ports.is_free(port):  # jax would crash on it (ports.py)
      raise RuntimeError(
        f"the coordinator's port {port} is taken on this host (process 0 serves {address} on "
        "every address); give --coordinator_address another port"
      )
  jax.distributed.initialize(**kwargs)
  return jax.process_count() > 1


def is_primary() -> bool:
  """Process 0 writes the run directory's files (metrics, JSON, plots)."""
  return jax.process_index() == 0


def problem_share(mesh, num_problems: int, rows_per_problem: int) -> tuple[int, int]:
  """[p0, p1): the problems of a ``num_problems``-problem sampler call (``rows_per_problem``
  consecutive rows each) whose rows this process's devices hold; (0, num_problems) with one
  process. Raises when a problem's rows would straddle two processes."""
  if jax.process_count() == 1:
    return 0, num_problems
  from grpo_jax import sharding as shard_lib  # noqa: PLC0415

  r0, r1 = shard_lib.process_rows(mesh, num_problems * rows_per_problem)
  if r0 % rows_per_problem or r1 % rows_per_problem:
    raise ValueError(
      f"process {jax.process_index()} holds rows [{r0}, {r1}), not whole groups of "
      f"{rows_per_problem}; choose the batch or the mesh so groups do not straddle hosts"
    )
  return r0 // rows_per_problem, r1 // rows_per_problem


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


def barrier(name: str) -> None:
  """Waits until every process reaches ``name`` (e.g. process 0 has written a file the others
  read next). A no-op with one process."""
  if jax.process_count() > 1:
    from jax.experimental import multihost_utils  # noqa: PLC0415

    multihost_utils.sync_global_devices(name)


def gather_rows(arrays: dict) -> dict:
  """Every process's rows of each host array of ``arrays``, concatenated in process order, on
  every process: the global rows when each process holds its contiguous block of equal size
  (``grpo_jax.sharding.process_rows``). The input itself with one process."""
  if jax.process_count() == 1:
    return dict(arrays)
  from jax.experimental import multihost_utils  # noqa: PLC0415

  out = {}
  for key, value in arrays.items():
    value = np.asarray(value)
    wire = value.astype(np.uint8) if value.dtype == np.bool_ else value  # collectives: no bool
    got = np.asarray(multihost_utils.process_allgather(wire, tiled=True))
    out[key] = got.astype(value.dtype)
  return out


def encode_objects(items: list, width: int) -> tuple[np.ndarray, np.ndarray]:
  """Pickled ``items`` as uint8 rows ``[n, width]`` (zero-padded) and their byte counts: Python
  objects (texts, problems) in a form that array collectives carry."""
  blobs = [pickle.dumps(x) for x in items]
  bytes_NxW = np.zeros((len(blobs), width), np.uint8)
  for i, blob in enumerate(blobs):
    bytes_NxW[i, : len(blob)] = np.frombuffer(blob, np.uint8)
  return bytes_NxW, np.asarray([len(b) for b in blobs], np.int32)


def decode_objects(bytes_NxW: np.ndarray, lengths_N: np.ndarray) -> list:
  """The objects :func:`encode_objects` packed."""
  return [pickle.loads(row[:n].tobytes()) for row, n in zip(bytes_NxW, lengths_N)]


def gather_objects(items: list) -> list:
  """Every process's ``items`` (the same count on each), concatenated in process order, on
  every process: :func:`gather_rows` for picklable objects. ``items`` with one process."""
  if jax.process_count() == 1:
    return list(items)
  width = global_max(max((len(pickle.dumps(x)) for x in items), default=0))
  bytes_NxW, lengths_N = encode_objects(items, max(width, 1))
  got = gather_rows({"bytes_NxW": bytes_NxW, "lengths_N": lengths_N})
  return decode_objects(got["bytes_NxW"], got["lengths_N"])


def mean_over_processes(values: dict[str, float]) -> dict[str, float]:
  """Each float of ``values`` (the same keys on every process) averaged over the processes:
  per-process statistics of equal shares (e.g. a rollout's decode waste) made job-wide."""
  if jax.process_count() == 1 or not values:
    return dict(values)
  keys = sorted(values)
  got = gather_rows({"v": np.asarray([[float(values[k]) for k in keys]], np.float32)})["v"]
  return dict(zip(keys, (float(x) for x in got.mean(0))))
