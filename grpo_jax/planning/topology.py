"""Compile targets: a named TPU slice (``v5p-128``), a topology (``v5p:4x4x8``), or this host.

A TPU target needs only libtpu (the ``[tpu]`` extra): ``jax.experimental.topologies`` then gives
the slice's devices on a CPU host, with no TPU attached, and ``jax.jit(f).lower(...).compile()``
compiles for them. The default install never imports libtpu: :func:`tpu_devices` imports it on
demand and names the extra when it is missing.

Slice names follow Cloud TPU's: v5p and v4 count TensorCores (two per chip, one JAX device per
chip), v5e and v6e count chips. Per-chip numbers (bf16 dense FLOP/s, HBM bytes and bandwidth)
are the published ones (``grpo_jax.planning.memory``).
"""

from __future__ import annotations

import dataclasses
import os
import re

from grpo_jax.planning import memory

# Chips of a slice -> its topology, per generation (Cloud TPU's default shapes).
_V5P = {4: "2x2x1", 8: "2x2x2", 16: "2x2x4", 32: "2x4x4", 64: "4x4x4", 128: "4x4x8", 256: "4x8x8"}
_2D = {4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16", 256: "16x16"}


@dataclasses.dataclass(frozen=True)
class Generation:
  name: str  # the topology prefix: v5p, v5e, v6e
  chip: memory.Hardware  # per-chip numbers (``chips`` filled in per slice)
  cores_per_chip: int  # in the slice name (v5p-128 = 64 chips)
  shapes: dict  # chips -> topology


GENERATIONS = {
  "v5p": Generation("v5p", memory.TPU_V5P_64, 2, _V5P),
  "v5e": Generation("v5e", memory.TPU_V5E_8, 1, _2D),
  "v6e": Generation("v6e", memory.TPU_V6E_8, 1, _2D),
}


def slice_names() -> list[str]:
  """Every named slice, e.g. ``v5p-128`` (64 chips, ``v5p:4x4x4``)."""
  return [
    f"{g.name}-{chips * g.cores_per_chip}" for g in GENERATIONS.values() for chips in g.shapes
  ]


@dataclasses.dataclass(frozen=True)
class Target:
  """Where the programs are compiled for: ``topology`` (a TPU topology name) or None for this
  host's own devices; ``hardware``: per-chip numbers for the report."""

  name: str
  topology: str | None
  hardware: memory.Hardware


def _unknown(what: str) -> ValueError:
  return ValueError(
    f"unknown compile target {what!r}: a slice ({', '.join(slice_names())}), a topology "
    f"GENERATION:SHAPE with GENERATION one of {sorted(GENERATIONS)} (e.g. v5p:4x4x8, v5e:2x4), "
    "'cpu', or 'auto' (this host's devices)"
  )


def resolve(target: str = "auto", topology: str = "") -> Target:
  """The :class:`Target` of ``--target`` / ``--topology`` (topology wins when given); raises a
  ValueError listing the valid names for anything else. Imports nothing."""
  if topology:
    m = re.fullmatch(r"(v5p|v5e|v6e):(\d+(?:x\d+){1,2})", topology)
    if not m:
      raise _unknown(topology)
    gen = GENERATIONS[m.group(1)]
    chips = 1
    for d in m.group(2).split("x"):
      chips *= int(d)
    hw = dataclasses.replace(gen.chip, name=f"TPU {topology}", chips=chips)
    return Target(topology, topology, hw)
  if target in ("auto", "cpu"):
    return Target(target, None, memory.cpu_host())
  m = re.fullmatch(r"(v5p|v5e|v6e)-(\d+)", target)
  if not m:
    raise _unknown(target)
  gen, cores = GENERATIONS[m.group(1)], int(m.group(2))
  chips = cores // gen.cores_per_chip
  if cores % gen.cores_per_chip or chips not in gen.shapes:
    raise _unknown(target)
  topo = f"{gen.name}:{gen.shapes[chips]}"
  hw = dataclasses.replace(gen.chip, name=f"TPU {target} ({topo})", chips=chips)
  return Target(target, topo, hw)


def tpu_devices(topology: str) -> list:
  """The devices of a TPU ``topology``, compiled for from this host (needs libtpu)."""
  try:
    import libtpu  # noqa: F401, PLC0415
  except ImportError as e:
    raise RuntimeError(
      f"compiling for {topology} needs libtpu: pip install -e '.[tpu]' (the [tpu] extra; "
      "on a CPU host run with JAX_PLATFORMS=cpu)"
    ) from e
  from jax.experimental import topologies  # noqa: PLC0415

  # Compiling needs no TPU, so no exclusive hold on one: without this, a second process that
  # compiles at the same time (a test worker, a sweep's plan) fails on libtpu's lockfile.
  os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
  return list(topologies.get_topology_desc(platform="tpu", topology_name=topology).devices)


def local_hardware(num_devices: int) -> memory.Hardware:
  """This host's devices as the target ('auto' / 'cpu'): a detected TPU or GPU's numbers, else
  the CPU host's."""
  import jax  # noqa: PLC0415

  device = jax.devices()[0]
  name = memory.detect(device.device_kind, device.platform)
  return memory.hardware(name, num_devices)[0]


__all__ = ["GENERATIONS", "Target", "local_hardware", "resolve", "slice_names", "tpu_devices"]
