"""Logical axis names for every array the run keeps, and readable rules mapping them to mesh axes.

Two steps, as in flax's ``transformer_cfg.py`` / tunix's ``ShardingConfig`` / maxtext's
``logical_axis_rules``:

1. ``logical_axes(path, shape)``: the *meaning* of each dimension of a parameter, from its
   path (which mirrors the Hugging Face names, ``grpo_jax.models.transformer``):

     embed_tokens.embedding          (vocab, embed)
     lm_head.kernel                  (embed, vocab)
     self_attn.q_proj.kernel         (embed, heads)        H·Dh columns, head-major
     self_attn.{k,v}_proj.kernel     (embed, kv_heads)     Hk·Dh columns
     self_attn.o_proj.kernel         (heads, embed)
     mlp.{gate,up}_proj.kernel       (embed, mlp)
     mlp.down_proj.kernel            (mlp, embed)
     *_proj.bias                     the kernel's output axis
     every norm weight               (norm,)               tiny: always replicated
     *_proj.lora_a  (LoRA's A)       (kernel's in axis, None)    rank replicated
     *_proj.lora_b  (LoRA's B)       (None, kernel's out axis)

   The match is on the path's tail, so optimizer moments (``opt_state…mu.layers.0…``), the
   reference model (``ref_params…``) and gradients get the axes of their parameter. Anything
   else (step, RNG, HA-DW anchor, optimizer counts) has no logical axes: replicated. Stacked
   layers (``model.scan_layers``: ``layers.self_attn.q_proj.kernel`` (n, D, H·Dh)) get the
   logical name ``layers`` in front, mapped to None in every preset: each device holds its
   slice of every layer, as unrolled.

2. ``Rules``: logical name → mesh axis (or tuple of axes, or None). ``TRAIN`` is FSDP × TP
   (``embed`` over fsdp, heads / kv_heads / mlp / vocab over tensor: Megatron-style column /
   row splits, ZeRO-3-style sharding of the other dimension); ``SAMPLE`` keeps only the
   tensor split, so decoding never all-gathers weights over fsdp. Activations and the KV
   cache use the ``batch`` / ``kv_heads`` names with the same rules.

A dimension whose size the mesh axes do not divide is left unsplit (e.g. Hk = 2 kv heads on a
tensor axis of 8), and a mesh axis is used at most once per array: the spec is always valid.
"""

from __future__ import annotations

import dataclasses
import math
import re

import jax
from jax.sharding import PartitionSpec as P

# (regex on the dotted path tail, logical axes of the kernel-like leaf); first match wins.
_PARAM_PATTERNS: tuple[tuple[str, tuple[str, ...]], ...] = (
  (r"(^|\.)embed_tokens\.embedding$", ("vocab", "embed")),
  (r"(^|\.)lm_head\.kernel$", ("embed", "vocab")),
  (r"(^|\.)lm_head\.bias$", ("vocab",)),
  (r"\.q_proj\.kernel$", ("embed", "heads")),
  (r"\.q_proj\.bias$", ("heads",)),
  (r"\.[kv]_proj\.kernel$", ("embed", "kv_heads")),
  (r"\.[kv]_proj\.bias$", ("kv_heads",)),
  (r"\.o_proj\.kernel$", ("heads", "embed")),
  (r"\.o_proj\.bias$", ("embed",)),
  (r"\.(gate|up)_proj\.kernel$", ("embed", "mlp")),
  (r"\.(gate|up)_proj\.bias$", ("mlp",)),
  (r"\.down_proj\.kernel$", ("mlp", "embed")),
  (r"\.down_proj\.bias$", ("embed",)),
  (r"(norm|layernorm)\.weight$", ("norm",)),
)


@dataclasses.dataclass(frozen=True)
class Rules:
  """Logical axis name → mesh axis name, tuple of names, or None (replicated)."""

  name: str
  table: tuple[tuple[str, str | tuple[str, ...] | None], ...]

  def mesh_axes(self, logical: str | None):
    return dict(self.table).get(logical) if logical is not None else None

  def describe(self) -> str:
    return f"{self.name}: " + ", ".join(f"{k}→{v}" for k, v in self.table)


# Training: parameters, gradients and Adam moments split over fsdp × tensor (each device holds
# 1/(fsdp·tensor) of them); batch rows over data × fsdp.
TRAIN = Rules(
  "train",
  (
    ("batch", ("data", "fsdp")),
    ("layers", None),
    ("embed", "fsdp"),
    ("vocab", "tensor"),
    ("heads", "tensor"),
    ("kv_heads", "tensor"),
    ("mlp", "tensor"),
    ("head_dim", None),
    ("seq", None),
    ("norm", None),
  ),
)

# Sampling: weights split over tensor only (replicated over data and fsdp), so each decode step
# reads local weights; KV cache rows over data × fsdp and kv heads over tensor.
SAMPLE = Rules(
  "sample",
  (
    ("batch", ("data", "fsdp")),
    ("layers", None),
    ("embed", None),
    ("vocab", "tensor"),
    ("heads", "tensor"),
    ("kv_heads", "tensor"),
    ("mlp", "tensor"),
    ("head_dim", None),
    ("seq", None),
    ("norm", None),
  ),
)

# Pure data parallelism (the previous behaviour): everything but batch rows replicated.
REPLICATED = Rules("replicated", (("batch", ("data", "fsdp")), ("layers", None)))

PRESETS = {r.name: r for r in (TRAIN, SAMPLE, REPLICATED)}

# Activation layouts at layer boundaries and of the sampler's cache.
ACTIVATION = ("batch", "seq", "embed_act")  # embed_act: never split (residual stream)
KV_CACHE_KEYS = ("batch", "kv_heads", "head_dim", "seq")  # sampling/kv_cache.py's layouts
KV_CACHE_VALUES = ("batch", "kv_heads", "seq", "head_dim")


def get_rules(name: str) -> Rules:
  if name not in PRESETS:
    raise ValueError(f"unknown sharding preset '{name}'; available: {sorted(PRESETS)}")
  return PRESETS[name]


def path_str(path) -> str:
  """A jax key path as a dotted string: ('layers', 0, 'mlp') -> 'layers.0.mlp'."""
  parts = []
  for k in path:
    for attr in ("key", "name", "idx"):
      if hasattr(k, attr):
        parts.append(str(getattr(k, attr)))
        break
    else:
      parts.append(str(k))
  return ".".join(parts)


# A stacked layer leaf: ``layers.`` followed by a module name, not a layer index.
_STACKED = r"(^|\.)layers\.[A-Za-z_]"


# A LoRA adapter beside its kernel (``grpo_jax.models.lora``): A (in, r), B (r, out).
_ADAPTER = r"\.lora_([ab])$"


def logical_axes(path: str, ndim: int) -> tuple[str | None, ...]:
  """The logical axis name of each dimension of the leaf at ``path`` (None = no name)."""
  adapter = re.search(_ADAPTER, path)
  if adapter and ndim >= 2:  # A split as its kernel's rows, B as its columns, never the rank
    *lead, d_in, d_out = logical_axes(path[: adapter.start()] + ".kernel", ndim)
    return (*lead, d_in, None) if adapter.group(1) == "a" else (*lead, None, d_out)
  stacked = re.search(_STACKED, path) is not None
  for pattern, axes in _PARAM_PATTERNS:
    if re.search(pattern, path):
      if stacked and len(axes) + 1 == ndim:
        return ("layers", *axes)
      if len(axes) == ndim:
        return axes
  return (None,) * ndim


def _axis_size(mesh_shape: dict, axes) -> int:
  axes = (axes,) if isinstance(axes, str) else axes
  return math.prod(mesh_shape[a] for a in axes)


def mesh_axes_for(logical: str | None, rules: Rules, mesh) -> tuple[str, ...]:
  """The mesh axes of size > 1 that ``rules`` map one named dimension to under ``mesh``, whether
  or not their size divides it; () when none."""
  axes = rules.mesh_axes(logical)
  if axes is None:
    return ()
  mesh_shape = dict(mesh.shape)
  axes_t = (axes,) if isinstance(axes, str) else tuple(axes)
  return tuple(a for a in axes_t if a in mesh_shape and mesh_shape[a] > 1)


def spec_for(logical: tuple[str | None, ...], shape: tuple[int, ...], rules: Rules, mesh) -> P:
  """PartitionSpec for one array: each named dimension goes to its rule's mesh axes when their
  size divides it and none of them is already used by an earlier dimension."""
  mesh_shape = dict(mesh.shape)
  used: set[str] = set()
  out = []
  for name, size in zip(logical, shape):
    axes_t = mesh_axes_for(name, rules, mesh)
    if not axes_t or used & set(axes_t) or size % _axis_size(mesh_shape, axes_t):
      out.append(None)
      continue
    used |= set(axes_t)
    out.append(axes_t[0] if len(axes_t) == 1 else axes_t)
  while out and out[-1] is None:
    out.pop()
  return P(*out)


def tree_specs(tree, rules: Rules, mesh):
  """PartitionSpecs for every leaf (arrays or ShapeDtypeStructs) of a state / params tree."""

  def one(path, x):
    shape = tuple(getattr(x, "shape", ()))
    return spec_for(logical_axes(path_str(path), len(shape)), shape, rules, mesh)

  return jax.tree_util.tree_map_with_path(one, tree)


def tree_shardings(tree, rules: Rules, mesh):
  """NamedShardings for every leaf; ``mesh`` may be a Mesh or an AbstractMesh (dry runs)."""
  return jax.tree.map(
    lambda spec: jax.sharding.NamedSharding(mesh, spec),
    tree_specs(tree, rules, mesh),
    is_leaf=lambda x: isinstance(x, P),
  )


def activation_spec(shape: tuple[int, ...], logical=ACTIVATION, rules: Rules = TRAIN, mesh=None):
  """Spec of an activation (default: batch × seq × embed, rows over data × fsdp)."""
  mesh = jax.sharding.get_abstract_mesh() if mesh is None else mesh
  return spec_for(tuple(logical), tuple(shape), rules, mesh)


def constrain(x: jax.Array, logical=ACTIVATION, rules: Rules = TRAIN) -> jax.Array:
  """``with_sharding_constraint`` to the logical layout under the mesh set by
  ``grpo_jax.sharding.activate``; a no-op when no mesh is set (single-device code paths)."""
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty or mesh.size == 1 or len(logical) != x.ndim or mesh.are_all_axes_manual:
    return x  # no mesh, or inside a shard_map over all of it (every array is local)
  return jax.lax.with_sharding_constraint(x, activation_spec(x.shape, logical, rules, mesh))
