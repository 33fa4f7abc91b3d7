"""Per-device memory of a run, from shapes alone: params, optimizer, reference, KV cache.

Bytes per device for a mesh (data, fsdp, tensor). Parameters are replicated by default, as
``grpo_jax.sharding`` places them today; ``shard_params=True`` divides them over fsdp × tensor
(what an FSDP/tensor-parallel placement would reach). Batch rows (the sampler's KV cache, the
trainer's logits) are split over data × fsdp. Activations other than the float32 logits of one
micro-batch are not counted.

  params     = Σ_tensors numel · itemsize(param_dtype) / shards
  optimizer  = 2 · params                     (AdamW first and second moments, param dtype)
  gradients  = params                         (one gradient tree, param dtype)
  reference  = params if a KL reference model is kept, else 0
  kv_cache   = 2 · layers · ⌈N / (data·fsdp)⌉ · S · Hk · Dh · itemsize(dtype)
  logits     = ⌈rows / (data·fsdp)⌉ · L · V · 4
"""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np

from grpo_jax.models.model_config import ModelConfig


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
  params: int
  optimizer: int
  gradients: int
  reference: int
  kv_cache: int
  logits: int

  @property
  def total(self) -> int:
    return sum(dataclasses.asdict(self).values())

  def gib(self) -> dict[str, float]:
    out = {k: v / 2**30 for k, v in dataclasses.asdict(self).items()}
    out["total"] = self.total / 2**30
    return out


def _mesh_sizes(mesh_shape) -> tuple[int, int, int]:
  if isinstance(mesh_shape, dict):
    return tuple(int(mesh_shape.get(k, 1)) for k in ("data", "fsdp", "tensor"))
  sizes = tuple(int(s) for s in mesh_shape)
  return sizes + (1,) * (3 - len(sizes))


def param_bytes(cfg: ModelConfig) -> int:
  """Exact bytes of the parameter tree (from ``jax.eval_shape``, no allocation)."""
  from grpo_jax.models.hf_io import abstract_params  # noqa: PLC0415 (avoids an import cycle)

  _, shapes = abstract_params(cfg)
  return sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(shapes))


def memory_estimate(
  cfg: ModelConfig,
  mesh_shape=(1, 1, 1),
  *,
  sample_rows: int = 0,
  cache_len: int = 0,
  train_rows: int = 0,
  seq_len: int = 0,
  reference: bool = False,
  shard_params: bool = False,
) -> MemoryEstimate:
  """Per-device bytes; ``sample_rows`` × ``cache_len`` size the sampler's KV cache (N rows,
  S = prompt + new tokens), ``train_rows`` × ``seq_len`` one micro-batch's float32 logits."""
  data, fsdp, tensor = _mesh_sizes(mesh_shape)
  shards = fsdp * tensor if shard_params else 1
  params = -(-param_bytes(cfg) // shards)
  batch = data * fsdp
  kv_itemsize = np.dtype(cfg.dtype).itemsize
  kv_rows = -(-sample_rows // batch)
  kv = 2 * cfg.num_layers * kv_rows * cache_len * cfg.num_kv_heads * cfg.head_dim * kv_itemsize
  logits = -(-train_rows // batch) * seq_len * cfg.vocab_size * 4
  return MemoryEstimate(
    params=params,
    optimizer=2 * params,
    gradients=params,
    reference=params if reference else 0,
    kv_cache=kv,
    logits=logits,
  )
