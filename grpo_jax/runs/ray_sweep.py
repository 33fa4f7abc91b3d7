"""Sweeps on a Ray cluster (``launch.py --sweep --launcher=ray``), the way levanter and marin run
TPU slices: Ray places the work, the launcher trains.

Each unfinished member is a gang of ``processes`` launcher processes (one per host of a slice),
placed together on a placement group of that many bundles (``bundle``: the resources of one
process, e.g. ``{"TPU": 4}`` or ``{"CPU": 1}``; ``strategy="STRICT_SPREAD"`` puts each on its own
node). Process 0's node address and a free port there become the ``jax.distributed``
coordinator of the others (``--coordinator_address --num_processes --process_id``); one process
runs plainly. Every process writes its output to ``<run>/logs/attempt<k>.process<i>.log``.

When a process of a member exits non-zero (or its node dies) the member's other processes are
ended and the member is started again, up to ``max_retries`` times; a new attempt resumes from
the member's last checkpoint, as any rerun of the launcher does. Members run concurrently as the
cluster's resources allow, at most ``max_concurrent`` at a time. The bookkeeping is
:func:`grpo_jax.runs.sweep.run_local`'s: every member's config is loaded before any starts,
finished members are skipped, a member that fails every attempt gets ``error.txt`` (the tail of
its logs) and the sweep goes on, and ``<root>/sweep.json`` lists every member's status.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time

from etils import epath

from grpo_jax.rundir import names, paths, write
from grpo_jax.runs import sweep

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOG_TAIL = 4000  # characters of each process's log kept in error.txt


class MemberProcess:
  """One launcher process of a member, inside a Ray actor (two threads: ``run`` blocks while
  ``stop`` may end it). The process gets its own session, so ending it ends its children."""

  def __init__(self):
    self._proc = None
    self._stopped = False

  def address(self) -> tuple[str, int]:
    """This node's address and a free port on it (the coordinator, when this is process 0):
    below the kernel's ephemeral range, where no other process's connection takes it before
    process 0 binds it (``sharding.ports.coordinator_port``)."""
    import ray

    from grpo_jax.sharding import ports

    return ray.util.get_node_ip_address(), ports.coordinator_port()

  def run(self, argv: list[str], log_path: str, env: dict, cwd: str) -> int:
    """Runs ``argv`` to its end; returns its exit status (negative: the signal that ended it)."""
    if self._stopped:
      return -signal.SIGTERM
    with open(log_path, "ab") as log:
      self._proc = subprocess.Popen(
        argv,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **env},
        cwd=cwd,
        start_new_session=True,
      )
      return self._proc.wait()

  def stop(self, grace_s: float = 10.0) -> None:
    """SIGTERM (the launcher checkpoints and exits), SIGKILL after ``grace_s``."""
    self._stopped = True
    proc = self._proc
    if proc is None or proc.poll() is not None:
      return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
      proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()

  def pid(self) -> int | None:
    return None if self._proc is None else self._proc.pid


def local_log_dir(run_dir) -> str:
  """Where a member's processes write their logs: ``<run>/logs``, or for a ``gs://`` run
  directory a local folder (a log is appended line by line), copied into the bucket after each
  attempt."""
  if paths.is_uri(run_dir):
    return paths.local_staging(run_dir, "logs")
  return os.path.join(str(run_dir), names.LOGS)


def process_argv(base: list[str], rank: int, count: int, coordinator: str) -> list[str]:
  """The launcher argv of process ``rank`` of ``count`` (no distributed flags when alone)."""
  if count == 1:
    return list(base)
  return [
    *base,
    f"--coordinator_address={coordinator}",
    f"--num_processes={count}",
    f"--process_id={rank}",
  ]


@dataclasses.dataclass(frozen=True)
class Gang:
  """How each member runs: ``processes`` launcher processes, one per Ray ``bundle`` (default
  one CPU), placed together with ``strategy``; at most ``max_concurrent`` members at once (0: as
  many as the cluster fits); a failed gang restarted up to ``max_retries`` times. Each process
  runs ``python script`` in ``cwd`` with ``env`` added to its environment."""

  processes: int = 1
  bundle: dict | None = None
  strategy: str = "PACK"
  max_concurrent: int = 0
  max_retries: int = 2
  env: dict | None = None
  cwd: str = REPO
  python: str = sys.executable
  script: str = os.path.join(REPO, "experiments", "launch.py")


class RaySweep:
  """Runs a sweep's members on the Ray cluster ``ray`` is connected to; see the module doc."""

  def __init__(
    self, spec: str, root, overrides=(), gang: Gang | None = None, log=print,
    allow_config_change: bool = False,
  ):  # fmt: skip
    import ray

    gang = gang or Gang()
    processes, max_retries = gang.processes, gang.max_retries

    if processes < 1:
      raise ValueError(f"processes per member must be >= 1, got {processes}")
    if max_retries < 0:
      raise ValueError(f"max_retries must be >= 0, got {max_retries}")
    self.spec, self.root, self.overrides = spec, epath.Path(root), list(overrides)
    self.processes, self.bundle = processes, dict(gang.bundle or {"CPU": 1})
    self.strategy, self.max_retries = gang.strategy, max_retries
    self.max_concurrent = gang.max_concurrent
    self.env, self.cwd = dict(gang.env or {}), gang.cwd
    self.python, self.script = gang.python, gang.script
    self.log, self.allow_config_change = log, allow_config_change
    self._actor_cls = ray.remote(num_cpus=0, max_concurrency=2)(MemberProcess)
    self._lock = threading.Lock()

  # -- one member ------------------------------------------------------------------------------

  def _argv(self, run: sweep.SweepRun, run_dir) -> list[str]:
    python, _, *flags = sweep.member_argv(self.spec, run_dir, run, self.overrides, self.python)
    argv = [python, self.script, *(f for f in flags if f != "--distributed_auto")]
    if self.allow_config_change:
      argv.append("--allow_config_change")
    return argv

  def _attempt(self, run: sweep.SweepRun, run_dir, attempt: int) -> tuple[bool, str, list]:
    """One gang start of ``run``: (every process exited 0, the tail of the failing log, the
    [start, end] wall times from the gang's placement to its last process's exit)."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    n = self.processes
    pg = placement_group([dict(self.bundle) for _ in range(n)], strategy=self.strategy)
    ray.get(pg.ready())  # waits until the cluster has room for the whole gang
    span = [time.time(), None]
    actors = [
      self._actor_cls.options(
        scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i)
      ).remote()
      for i in range(n)
    ]
    logs = local_log_dir(run_dir)
    os.makedirs(logs, exist_ok=True)
    log_paths = [os.path.join(logs, f"attempt{attempt}.process{i}.log") for i in range(n)]
    try:
      host, port = ray.get(actors[0].address.remote())
      base = self._argv(run, run_dir)
      futures = {
        actors[i].run.remote(
          process_argv(base, i, n, f"{host}:{port}"), log_paths[i], self.env, self.cwd
        ): i
        for i in range(n)
      }
      failed = None
      pending = list(futures)
      while pending and failed is None:
        done, pending = ray.wait(pending, num_returns=1)
        try:
          code = ray.get(done[0])
        except ray.exceptions.RayError as e:  # the actor or its node died
          code = f"lost: {type(e).__name__}"
        if code != 0:
          failed = (futures[done[0]], code)
      if failed is not None:  # end the gang: the others would wait on the dead process
        ray.get([a.stop.remote() for a in actors], timeout=120)
        rank, code = failed
        self.log(f"[ray] {run.name}: attempt {attempt} process {rank} exited {code}")
        return False, _tail(log_paths[rank]), span
      return True, "", span
    finally:
      span[1] = time.time()
      for a in actors:
        ray.kill(a)
      remove_placement_group(pg)
      if paths.is_uri(run_dir):  # the local logs into the bucket
        for p in map(epath.Path, log_paths):
          if p.exists():
            (epath.Path(run_dir) / names.LOGS / p.name).write_bytes(p.read_bytes())

  def run_member(self, run: sweep.SweepRun) -> dict:
    """Trains (or resumes, or skips) ``run`` with retries; returns its sweep.json entry."""
    run_dir = self.root / run.name
    entry = {"name": run.name, "overrides": run.overrides}
    if sweep.run_status(run_dir) == "done":
      return {**entry, "status": "skipped"}
    t0 = time.time()
    try:
      sweep.prepare_run_dir(self.spec, run_dir, run, self.overrides, self.allow_config_change)
    except Exception as e:  # noqa: BLE001 (recorded, the sweep goes on)
      sweep.record_failure(run_dir, repr(e))
      return {**entry, "status": "failed", "seconds": time.time() - t0, "error": repr(e)}
    tails, spans = [], []  # spans: (start, end) wall times of each attempt
    for attempt in range(1 + self.max_retries):
      self.log(f"[ray] {run.name}: attempt {attempt} on {self.processes} process(es)")
      ok, tail, span = self._attempt(run, run_dir, attempt)
      spans.append(span)
      entry["attempt_spans"] = spans
      if ok:
        return {**entry, "status": "done", "seconds": time.time() - t0, "attempts": attempt + 1}
      tails.append(f"--- attempt {attempt} ---\n{tail}")
    sweep.record_failure(run_dir, "\n".join(tails))
    return {
      **entry,
      "status": "failed",
      "seconds": time.time() - t0,
      "attempts": 1 + self.max_retries,
      "error": f"failed {1 + self.max_retries} attempt(s); see {run_dir}/{names.ERROR}",
    }

  # -- the sweep -------------------------------------------------------------------------------

  def run(self, only=None) -> list[dict]:
    """Every member, concurrently as resources allow; entries in the sweep's order."""
    runs = [r for r in sweep.expand(self.spec, self.root) if only is None or only in r.name]
    sweep.validate(self.spec, runs, self.overrides)
    self.root.mkdir(parents=True, exist_ok=True)
    entries: dict[str, dict] = {}
    workers = self.max_concurrent or len(runs)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
      futures = {pool.submit(self.run_member, r): r for r in runs}
      for future in concurrent.futures.as_completed(futures):
        run = futures[future]
        entries[run.name] = future.result()
        self.log(f"[ray] {run.name}: {entries[run.name]['status']}")
        self._write_summary(runs, entries)
    return [entries[r.name] for r in runs]

  def _write_summary(self, runs, entries: dict) -> None:
    summary = {
      "spec": self.spec,
      "cli_overrides": self.overrides,
      "launcher": "ray",
      "runs": [entries[r.name] for r in runs if r.name in entries],
    }
    with self._lock:
      write.sweep_info(self.root, summary)


def _tail(path: str) -> str:
  if not os.path.exists(path):
    return f"(no log at {path})"
  with open(path, "rb") as f:
    f.seek(max(0, os.path.getsize(path) - LOG_TAIL))
    return f.read().decode(errors="replace")


__all__ = ["Gang", "MemberProcess", "RaySweep", "local_log_dir", "process_argv"]
