"""Device mesh and shardings: the one place that decides where arrays live.

Mesh axes are ``data``, ``fsdp`` and ``tensor`` (sizes from ``cfg.mesh``; -1 = all remaining
devices). Batch rows are split over ``data`` × ``fsdp``; parameters, optimizer moments and the
reference model follow the logical-axis rules of ``grpo_jax.sharding.rules`` (preset
``mesh.train_rules``: FSDP × tensor parallel by default; the sampler sees ``mesh.sample_rules``).
Changing the mesh changes where numbers live and the order of float sums, nothing else.

Multi-host (several processes, ``grpo_jax.sharding.distributed``): every host-side batch here is
*this process's rows*; :func:`shard_batch` assembles the global array from each process's
rows and :func:`local_rows` hands a process back its own rows of a global result.
"""

from __future__ import annotations

import functools
import math

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from grpo_jax.sharding import rules as rules_lib

AXES = ("data", "fsdp", "tensor")
BATCH_AXES = ("data", "fsdp")


def mesh_shape(mesh_cfg, num_devices: int) -> tuple[int, int, int]:
  """Resolves -1 entries so the product equals ``num_devices``."""
  sizes = [mesh_cfg.data, mesh_cfg.fsdp, mesh_cfg.tensor]
  if sizes.count(-1) > 1:
    raise ValueError(f"at most one mesh axis may be -1, got {dict(zip(AXES, sizes))}")
  known = math.prod(s for s in sizes if s != -1)
  if -1 in sizes:
    if num_devices % known:
      raise ValueError(f"{num_devices} devices do not divide into mesh {dict(zip(AXES, sizes))}")
    sizes[sizes.index(-1)] = num_devices // known
  if math.prod(sizes) != num_devices:
    raise ValueError(
      f"mesh {dict(zip(AXES, sizes))} needs {math.prod(sizes)} devices, {num_devices} available"
    )
  return tuple(sizes)


def make_mesh(mesh_cfg, devices=None) -> Mesh:
  """Devices in ``jax.devices()`` order (process-major), so each process's devices hold a
  contiguous block of batch rows whenever ``tensor`` divides its local device count."""
  devices = jax.devices() if devices is None else devices
  shape = mesh_shape(mesh_cfg, len(devices))
  return Mesh(np.asarray(devices).reshape(shape), AXES)


def abstract_mesh(shape: tuple[int, int, int]) -> jax.sharding.AbstractMesh:
  """A device-less mesh (data, fsdp, tensor) for dry runs: shardings without hardware."""
  return jax.sharding.AbstractMesh(tuple(int(s) for s in shape), AXES)


def activate(mesh: Mesh) -> None:
  """Makes ``mesh`` the current mesh (``jax.set_mesh``), so the model's activation and KV-cache
  constraints (``sharding_rules.constrain``) apply inside every jit traced afterwards."""
  jax.set_mesh(mesh)


def under_mesh(fn, mesh: Mesh):
  """``fn`` called with ``mesh`` as the current mesh (a ``jax.set_mesh`` context per call), so
  activation / KV-cache constraints traced inside apply; no global state is left behind."""

  @functools.wraps(fn)
  def wrapped(*args, **kwargs):
    with jax.set_mesh(mesh):
      return fn(*args, **kwargs)

  return wrapped


def init_sharded(init_fn, params, params_shardings, shardings):
  """``init_fn(params)`` (e.g. the train state) created directly in ``shardings``: ``params`` are
  placed by ``params_shardings`` first, so no device ever holds an unsharded optimizer state."""
  params = place(params, params_shardings)
  return jax.jit(init_fn, out_shardings=shardings)(params)


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def batch_sharding(mesh: Mesh) -> NamedSharding:
  """Leading (row) dimension split over data × fsdp; the rest replicated."""
  return NamedSharding(mesh, P(BATCH_AXES))


def batch_size_multiple(mesh: Mesh) -> int:
  return mesh.shape["data"] * mesh.shape["fsdp"]


def split_axes(shardings) -> set[str]:
  """The mesh axes (of size > 1) over which some sharding in the tree splits its array."""
  out = set()
  for s in jax.tree.leaves(shardings):
    if isinstance(s, NamedSharding):
      named = [a for e in s.spec if e for a in (e if isinstance(e, tuple) else (e,))]
      out |= {a for a in named if s.mesh.shape[a] > 1}
  return out


def rules_for(mesh_cfg, role: str = "train") -> rules_lib.Rules:
  """The preset named by ``mesh.train_rules`` (``role`` 'train') or ``mesh.sample_rules``."""
  return rules_lib.get_rules(mesh_cfg[f"{role}_rules"])


def state_shardings(state_shapes, mesh, rules: rules_lib.Rules | str = "train"):
  """NamedShardings of a train-state (or params) tree by the logical-axis rules; leaves
  without logical axes (step, RNG, anchor, optimizer counts) are replicated."""
  rules = rules_lib.get_rules(rules) if isinstance(rules, str) else rules
  return rules_lib.tree_shardings(state_shapes, rules, mesh)


def place(tree, shardings):
  """Host (or single-device) arrays → arrays with ``shardings``. Every process passes the same
  full values (e.g. a freshly initialised or loaded model); each keeps only its shards."""
  if jax.process_count() == 1:
    return jax.device_put(tree, shardings)

  def one(x, sharding):
    x = np.asarray(jax.device_get(x))
    return jax.make_array_from_callback(x.shape, sharding, lambda idx: x[idx])

  return jax.tree.map(one, tree, shardings)


def reshard(tree, shardings):
  """Device arrays → the same values with other shardings (e.g. train → sample layout)."""
  return jax.device_put(tree, shardings)


def process_rows(mesh: Mesh, num_rows: int) -> tuple[int, int]:
  """[r0, r1): the rows of a ``num_rows``-row global batch held by this process's devices (all
  rows with one process; several processes share rows when data × fsdp < process count)."""
  if jax.process_count() == 1:
    return 0, num_rows
  index_map = batch_sharding(mesh).addressable_devices_indices_map((num_rows,))
  starts = sorted({idx[0].start or 0 for idx in index_map.values()})
  stops = sorted({num_rows if idx[0].stop is None else idx[0].stop for idx in index_map.values()})
  r0, r1 = starts[0], stops[-1]
  block = num_rows // batch_size_multiple(mesh)
  if (r1 - r0) != block * len(starts):
    raise ValueError(f"process {jax.process_index()} holds non-contiguous batch rows {starts}")
  return r0, r1


def process_row_blocks(mesh: Mesh) -> int:
  """How many of a batch's ``batch_size_multiple(mesh)`` row blocks this process's devices
  hold (all of them with one process): its rows must divide by it."""
  if jax.process_count() == 1:
    return batch_size_multiple(mesh)
  index_map = batch_sharding(mesh).addressable_devices_indices_map((batch_size_multiple(mesh),))
  return len({idx[0].start for idx in index_map.values()})


def shard_batch(batch, mesh: Mesh):
  """This process's rows → global arrays, rows split over the batch axes, for every leaf of
  ``batch`` (a dict, a struct dataclass).

  One process: ``device_put``. Several: ``jax.make_array_from_process_local_data``; each
  process passes the rows its devices hold (:func:`process_rows`, contiguous, in process
  order) and the global batch is assembled from them without any host-to-host copy.
  """
  sharding = batch_sharding(mesh)
  if jax.process_count() == 1:
    return jax.tree.map(lambda v: jax.device_put(np.asarray(v), sharding), batch)

  def one(v):
    v = np.asarray(v)
    # Local rows n = (blocks held here / all blocks) · N.
    global_rows = v.shape[0] * batch_size_multiple(mesh) // process_row_blocks(mesh)
    return jax.make_array_from_process_local_data(sharding, v, (global_rows, *v.shape[1:]))

  return jax.tree.map(one, batch)


def local_rows(tree, mesh: Mesh | None = None):
  """Host numpy copies of this process's rows of global row-major arrays (all rows with one
  process). Non-row leaves (scalars, replicated values) come back whole."""
  if jax.process_count() == 1:
    return jax.tree.map(np.asarray, jax.device_get(tree))

  def one(x):
    if not isinstance(x, jax.Array) or x.ndim == 0 or x.is_fully_replicated:
      return np.asarray(x)
    if mesh is not None and x.sharding != batch_sharding(mesh):
      x = jax.jit(lambda a: a, out_shardings=batch_sharding(mesh))(x)
    blocks = {}
    for shard in x.addressable_shards:
      start = shard.index[0].start or 0
      blocks.setdefault(start, np.asarray(shard.data))
    return np.concatenate([blocks[s] for s in sorted(blocks)], axis=0)

  return jax.tree.map(one, tree)


def replicate(tree, mesh: Mesh):
  return place(tree, jax.tree.map(lambda _: replicated(mesh), tree))


def shard_bytes(tree) -> int:
  """Bytes of ``tree`` held by one device (the first): Σ_leaves shard numel · itemsize."""
  total = 0
  for x in jax.tree.leaves(tree):
    shape = x.sharding.shard_shape(x.shape) if hasattr(x, "sharding") else x.shape
    total += math.prod(shape) * np.dtype(x.dtype).itemsize
  return total
