"""Device mesh and shardings: the one place that decides where arrays live.

Mesh axes are ``data``, ``fsdp`` and ``tensor`` (sizes from ``cfg.mesh``; -1 = all remaining
devices). Rows of a batch are split over ``data`` × ``fsdp``; parameters are replicated for now
(pure data parallelism), which keeps results identical to one device up to float reordering.
"""

from __future__ import annotations

import math

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

AXES = ("data", "fsdp", "tensor")
BATCH_AXES = ("data", "fsdp")


def mesh_shape(mesh_cfg, num_devices: int) -> tuple[int, int, int]:
  """Resolves -1 entries so the product equals ``num_devices``."""
  sizes = [int(mesh_cfg.data), int(mesh_cfg.fsdp), int(mesh_cfg.tensor)]
  if sizes.count(-1) > 1:
    raise ValueError(f"at most one mesh axis may be -1, got {dict(zip(AXES, sizes))}")
  known = math.prod(s for s in sizes if s != -1)
  if -1 in sizes:
    if num_devices % known:
      raise ValueError(f"{num_devices} devices do not divide into mesh {dict(zip(AXES, sizes))}")
    sizes[sizes.index(-1)] = num_devices // known
  if math.prod(sizes) != num_devices:
    raise ValueError(f"mesh {dict(zip(AXES, sizes))} needs {math.prod(sizes)} devices, "
                     f"{num_devices} available")
  return tuple(sizes)


def make_mesh(mesh_cfg, devices=None) -> Mesh:
  devices = jax.devices() if devices is None else devices
  shape = mesh_shape(mesh_cfg, len(devices))
  return Mesh(np.asarray(devices).reshape(shape), AXES)


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def batch_sharding(mesh: Mesh) -> NamedSharding:
  """Leading (row) dimension split over data × fsdp; the rest replicated."""
  return NamedSharding(mesh, P(BATCH_AXES))


def batch_size_multiple(mesh: Mesh) -> int:
  return mesh.shape["data"] * mesh.shape["fsdp"]


def shard_batch(batch: dict, mesh: Mesh) -> dict:
  """Places host arrays on the mesh, rows split over the batch axes."""
  sharding = batch_sharding(mesh)
  return {k: jax.device_put(np.asarray(v), sharding) for k, v in batch.items()}


def replicate(tree, mesh: Mesh):
  return jax.device_put(tree, replicated(mesh))
