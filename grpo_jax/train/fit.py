"""Does the run's update fit its devices? Compiled at load, before the first rollout.

The update (``train.update.make_update_step``) at its widest batch, the sampled T with every
row's prompt and response real (:func:`widest_batch`), is lowered with abstract arguments on the
run's mesh and shardings and compiled; XLA's ``memory_analysis()`` then gives its bytes per
device, argument + output + temp − alias (the state it takes donated counts once). A run whose
update needs more than :func:`device_budget` stops there with :class:`DoesNotFit`, naming the
program and both byte counts, instead of failing (or being killed) mid-step. The compiled
executable is what the loop then runs at width T (``LengthAwareUpdate``'s ``compiled``): the
check costs no second compile.

Budget per device: ``memory_stats()["bytes_limit"]`` where the backend reports it (GPU, TPU);
on the CPU, the host's RAM over its local devices; times :data:`FIT_FRACTION`, the headroom
``grpo_jax.planning.compiled`` also keeps. On the CPU an external rollout engine (vLLM in this
process) holds part of that RAM: its measured memory leaves the budget (:func:`host_share`).

Shape letters: N = B·G rows, P prompt slots, R response slots (the sampled T), L = P + R.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os

import jax
import numpy as np

from grpo_jax import sharding as shard_lib
from grpo_jax.config.experiment import Experiment
from grpo_jax.rollout.batch import RolloutBatch
from grpo_jax.train.packing import Packer

FIT_FRACTION = 0.9  # the share of a device's memory a program may use (planning.compiled's)


class DoesNotFit(RuntimeError):
  """The run's update needs more memory per device than the device has."""


def device_budget(mesh, fraction: float = FIT_FRACTION) -> float:
  """Bytes per device a program may use: ``fraction`` of the first device's ``bytes_limit``,
  or on the CPU (no memory stats) of the host's RAM over this process's local devices."""
  limit = _bytes_limit(mesh)
  if limit:
    return fraction * limit
  ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  return fraction * ram / max(jax.local_device_count(), 1)


def host_share(mesh, host_bytes: float) -> float:
  """Bytes per device that ``host_bytes`` of host memory held outside XLA's programs (an
  external rollout engine's, ``sampling.engine``) take from :func:`device_budget`: where that
  budget is the host's RAM (the CPU), ``host_bytes`` over this process's local devices; 0 where
  the devices have memory of their own."""
  if _bytes_limit(mesh):
    return 0.0
  return host_bytes / max(jax.local_device_count(), 1)


def _bytes_limit(mesh) -> float:
  """The first local device's ``bytes_limit``; 0 where the backend reports none (CPU)."""
  try:
    stats = _local_device(mesh).memory_stats()
  except Exception:  # noqa: BLE001 (a backend without the query)
    stats = None
  return float(stats["bytes_limit"]) if stats and stats.get("bytes_limit") else 0.0


@dataclasses.dataclass(frozen=True)
class Fitted:
  """One compiled program and its bytes per device (XLA's ``memory_analysis``)."""

  name: str
  compiled: object  # jax.stages.Compiled: called with concrete arrays of the abstract shapes
  batch: object  # the abstract batch it was compiled for (ShapeDtypeStructs)
  memory: dict  # argument, output, alias, temp -> bytes

  @property
  def bytes(self) -> float:
    """argument + output + temp − alias: the program's peak per device."""
    m = self.memory
    return m["argument"] + m["output"] + m["temp"] - m["alias"]

  def accepts(self, batch) -> bool:
    """True if ``batch`` (host or device arrays) has the shapes and dtypes compiled for."""
    key = lambda tree: [(tuple(x.shape), np.dtype(x.dtype)) for x in jax.tree.leaves(tree)]
    return key(batch) == key(self.batch)


def abstract(shapes, shardings):
  """ShapeDtypeStructs carrying ``shardings`` (trees of the same structure)."""
  return jax.tree.map(
    lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), shapes, shardings
  )


def response_slots(cfg: Experiment) -> int:
  """T, the update batch's response slots: the new tokens, after the previews (two-stage)."""
  previews = cfg.strategy.enabled and cfg.strategy.num_previews > 1
  return cfg.sampling.max_new_tokens + (cfg.strategy.max_preview_tokens if previews else 0)


def widest_batch(cfg: Experiment, mesh, prompt: int, response: int):
  """The update's batch at its widest: N rows of ``prompt`` + ``response`` real tokens, so
  packing (loss.pack) needs its most rows; abstract, rows over the batch axes."""
  B, G = cfg.sampling.prompts_per_step, cfg.sampling.group_size
  N, L = B * G, prompt + response
  zeros_N = np.zeros(N, np.float32)
  ids_N = np.repeat(np.arange(B, dtype=np.int32), G)
  batch = RolloutBatch(
    tokens_NxL=np.zeros((N, L), np.int32),
    input_mask_NxL=np.ones((N, L), np.int32),
    completion_mask_NxT=np.ones((N, response), np.int32),
    sample_logps_NxT=np.zeros((N, response), np.float32),
    rewards_N=zeros_N,
    group_ids_N=ids_N,
    subgroup_ids_N=ids_N,
    truncated_N=np.zeros(N, bool),
    lengths_N=np.full(N, response, np.int32),
  ).device_batch()
  if cfg.loss.pack:
    batch, _ = Packer(cfg.loss, G, shard_lib.batch_size_multiple(mesh))(batch)
  sharding = shard_lib.batch_sharding(mesh)
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), batch)


def compile_program(name: str, jitted, args: tuple, mesh=None) -> Fitted:
  """``jitted`` lowered with the abstract ``args`` (under ``mesh`` as the current mesh when
  given, as ``sharding.under_mesh`` runs it) and compiled."""
  with jax.set_mesh(mesh) if mesh is not None else contextlib.nullcontext():
    compiled = jitted.lower(*args).compile()
  return Fitted(name, compiled, args[-1], memory_bytes(compiled))


def memory_bytes(compiled) -> dict:
  """XLA's ``memory_analysis()`` per device: argument, output, alias, temp and code bytes."""
  mem = compiled.memory_analysis()
  return {
    "argument": mem.argument_size_in_bytes,
    "output": mem.output_size_in_bytes,
    "alias": mem.alias_size_in_bytes,
    "temp": mem.temp_size_in_bytes,
    "code": mem.generated_code_size_in_bytes,
  }


def gib(num_bytes: float) -> str:
  return f"{num_bytes / 2**30:.2f} GiB"


def check(fitted: Fitted, budget: float, device: str, hint: str = "") -> None:
  """Raises :class:`DoesNotFit` if ``fitted`` needs more than ``budget`` bytes per device."""
  if fitted.bytes <= budget:
    return
  m = fitted.memory
  raise DoesNotFit(
    f"program '{fitted.name}' needs {fitted.bytes:,.0f} bytes ({gib(fitted.bytes)}) per device "
    f"(XLA: argument {gib(m['argument'])} + output {gib(m['output'])} + temp "
    f"{gib(m['temp'])} - alias {gib(m['alias'])}), more than the {budget:,.0f} bytes "
    f"({gib(budget)}) of {device}{hint}"
  )


def _local_device(mesh):
  """One of this process's devices on ``mesh`` (multi-host: another's cannot be queried)."""
  local = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
  return local[0] if local else mesh.devices.flat[0]


def device_name(mesh, fraction: float = FIT_FRACTION) -> str:
  d = _local_device(mesh)
  return f"{fraction:.0%} of one {d.platform} device's memory ({d.device_kind})"


__all__ = [
  "FIT_FRACTION",
  "DoesNotFit",
  "Fitted",
  "abstract",
  "response_slots",
  "check",
  "compile_program",
  "device_budget",
  "device_name",
  "host_share",
  "widest_batch",
]
