"""Hugging Face checkpoints in and out: ``load_hf`` → :class:`HFModel`, ``save_hf``.

Loading streams tensor by tensor: each safetensors tensor is read into host memory, put on
the device(s) of its target sharding, transposed (torch ``Linear.weight`` is (out, in), our
``kernel`` is (in, out)) and cast there, and the host buffers are dropped before the next tensor
is read, so peak host memory is about the largest single tensor, not the model. On a mesh each
process reads only the slices its own devices hold (``read_slice``), so the hosts of a pod
share the reading instead of each reading the whole checkpoint. Saving fetches one parameter
at a time the same way. Names follow the table in ``transformer.py``; stacked layers
(``scan_layers``, ``layer_stack.py``) are read per layer and stacked, written one layer at a time.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from grpo_jax.models import hf_config
from grpo_jax.models.layer_stack import LAYERS, is_stacked, stack_layers
from grpo_jax.models.model_config import ModelConfig
from grpo_jax.models.safetensors_io import CheckpointReader, write_checkpoint
from grpo_jax.models.transformer import Transformer, forward

# A parameter's key path in the pure dict, e.g. ("layers", 0, "mlp", "up_proj", "kernel").
Path = tuple


@dataclasses.dataclass
class HFModel:
  """A loaded model: ``model(tokens_BxL[, mask_BxL]) -> logits_BxLxV`` (float32).

  ``graphdef``/``params`` are what ``models.forward``, ``token_logps`` and ``sampling.sample``
  take; ``hf_config`` is the transformers config it was read from (token ids are kept on save).
  """

  graphdef: nnx.GraphDef
  params: dict
  config: ModelConfig
  tokenizer: Any = None
  hf_config: Any = None

  def __call__(self, tokens_BxL, mask_BxL=None) -> jax.Array:
    tokens_BxL = jnp.asarray(tokens_BxL, jnp.int32)
    mask_BxL = jnp.ones_like(tokens_BxL) if mask_BxL is None else jnp.asarray(mask_BxL)
    return _logits(self.graphdef, self.params, tokens_BxL, mask_BxL)


@functools.partial(jax.jit, static_argnums=0)
def _logits(graphdef, params, tokens_BxL, mask_BxL):
  return forward(graphdef, params, tokens_BxL, mask_BxL).astype(jnp.float32)


def abstract_params(cfg: ModelConfig) -> tuple[nnx.GraphDef, dict]:
  """(graphdef, dict of ShapeDtypeStruct): the parameter layout, no memory allocated."""
  graphdef, state = nnx.split(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0))))
  return graphdef, nnx.to_pure_dict(state)


def _key(k) -> Any:
  return getattr(k, "key", getattr(k, "idx", k))


def hf_name(path: Path) -> tuple[str, bool]:
  """(Hugging Face tensor name, whether it is stored transposed) of one of our parameters."""
  *modules, leaf = (str(p) for p in path)
  prefix = "" if modules[0] == "lm_head" else "model."
  hf_leaf = {"kernel": "weight", "embedding": "weight"}.get(leaf, leaf)
  return prefix + ".".join(modules) + "." + hf_leaf, leaf == "kernel"


def hf_names(params: dict) -> dict[str, tuple[Path, bool]]:
  """HF name → (our unrolled key path, transposed) for every parameter (one per layer of a
  stacked leaf, ``layer_stack.py``)."""
  out = {}
  for path, _ in _flat(params):
    name, transposed = hf_name(path)
    out[name] = (path, transposed)
  return out


@functools.cache
def _converter(transpose: bool, dtype: str, sharding):
  # jnp.copy keeps the output a fresh buffer, so the host buffer it came from can be freed.
  fn = (lambda x: x.T.astype(dtype)) if transpose else (lambda x: jnp.copy(x).astype(dtype))
  return jax.jit(fn) if sharding is None else jax.jit(fn, out_shardings=sharding)


def _source_sharding(target, transpose: bool):
  """The raw (transposed) tensor's sharding: the target's spec reversed, so no reshuffle."""
  if isinstance(target, NamedSharding) and transpose:
    spec = tuple(target.spec) + (None,) * (2 - len(target.spec))
    return NamedSharding(target.mesh, P(*spec[::-1]))
  return target


def resolve_checkpoint(path: str) -> pathlib.Path:
  """A checkpoint directory, or a hub id downloaded (config, safetensors, tokenizer files)."""
  if os.path.isdir(path):
    return pathlib.Path(path)
  try:  # a hub id, where a hub is reachable
    from huggingface_hub import snapshot_download

    patterns = ["*.json", "*.safetensors", "tokenizer*", "*.model", "*.txt"]
    return pathlib.Path(snapshot_download(repo_id=path, allow_patterns=patterns))
  except Exception as e:
    raise FileNotFoundError(f"'{path}' is not a directory and could not be downloaded: {e}") from e


def load_hf(
  path: str,
  dtype: str = "float32",
  param_dtype: str | None = None,
  mesh: jax.sharding.Mesh | None = None,
  shardings: dict | None = None,
  tokenizer: bool = True,
) -> HFModel:
  """Loads a Qwen3 / Llama / OLMo-3 checkpoint directory (or hub id) as an :class:`HFModel`.

  ``dtype`` is the compute dtype, ``param_dtype`` the storage dtype (default ``dtype``).
  Each tensor lands in its sharding from ``shardings`` (a pytree like the params), else
  replicated over ``mesh``, else on the default device. A tensor missing from the checkpoint
  or with a shape other than config.json implies raises an error naming it.
  """
  directory = resolve_checkpoint(path)
  cfg, hf = hf_config.load_hf_config(str(directory), dtype, param_dtype)
  graphdef, params = load_params(cfg, CheckpointReader(directory), str(directory), mesh, shardings)
  tok = None
  if tokenizer and any(directory.glob("tokenizer*")):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(directory))
  return HFModel(graphdef, params, cfg, tok, hf)


def load_params(
  cfg: ModelConfig,
  source,
  where: str,
  mesh: jax.sharding.Mesh | None = None,
  shardings: dict | None = None,
) -> tuple[nnx.GraphDef, dict]:
  """(graphdef, params) of ``cfg`` with every tensor read from ``source`` by its HF name.

  ``source`` has ``name in source``, ``source.shape(name)``, ``source.read(name)`` (a host
  array in torch layout) and ``source.read_slice(name, index)`` (``read(name)[index]`` for a
  tuple of slices, reading no more than it needs); ``where`` names it in errors. Placement as
  in :func:`load_hf`: with no sharding a tensor is read whole, else each process reads the
  slices its addressable devices hold.
  """
  if cfg.scan_layers:  # read unrolled (HF's per-layer tensors), then stack
    unrolled = dataclasses.replace(cfg, scan_layers=False)
    _, params = load_params(unrolled, source, where, mesh, _per_layer(shardings, cfg.num_layers))
    params = stack_layers(params)
    graphdef = abstract_params(cfg)[0]
    return graphdef, params if shardings is None else jax.device_put(params, shardings)
  graphdef, abstract = abstract_params(cfg)
  if shardings is None:
    target = NamedSharding(mesh, P()) if mesh is not None else None
    shardings = jax.tree.map(lambda _: target, abstract)
  sharding_of = dict(jax.tree_util.tree_flatten_with_path(shardings, is_leaf=_is_sharding)[0])

  def load_one(kp, leaf):
    path = tuple(_key(k) for k in kp)
    name, transposed = hf_name(path)
    if name not in source:
      raise KeyError(f"checkpoint {where} is missing tensor '{name}'")
    want = tuple(leaf.shape[::-1] if transposed else leaf.shape)
    if source.shape(name) != want:
      raise ValueError(
        f"tensor '{name}' has shape {source.shape(name)} in {where}, but the config implies {want}"
      )
    target = sharding_of.get(kp)
    raw = _read_raw(source, name, _source_sharding(target, transposed))
    # Waiting here keeps one tensor's host buffers alive at a time: with asynchronous dispatch
    # a busy host would otherwise read ahead and hold many tensors' bytes at once.
    return _converter(transposed, str(leaf.dtype), target)(raw).block_until_ready()

  return graphdef, jax.tree_util.tree_map_with_path(load_one, abstract)


def _per_layer(shardings: dict | None, num_layers: int) -> dict | None:
  """Unrolled shardings from stacked ones: each layer's leaf drops the stacked leading axis."""
  if shardings is None:
    return None

  def drop_first(sharding):
    if isinstance(sharding, NamedSharding):
      return NamedSharding(sharding.mesh, P(*tuple(sharding.spec)[1:]))
    return sharding

  layer = jax.tree.map(drop_first, shardings[LAYERS], is_leaf=_is_sharding)
  return {**shardings, LAYERS: dict.fromkeys(range(num_layers), layer)}


def _read_raw(source, name: str, sharding) -> jax.Array:
  """Tensor ``name`` of ``source`` (torch layout) as an array with ``sharding``: read whole onto
  the default device when ``sharding`` is None, else built shard by shard from this process's
  slices, each distinct slice read once (devices replicating a shard share the read)."""
  if sharding is None:
    return jax.device_put(source.read(name), None)
  slices = {}

  def shard(index: tuple[slice, ...]):
    key = tuple((s.start, s.stop, s.step) for s in index)
    if key not in slices:
      slices[key] = source.read_slice(name, index)
    return slices[key]

  return jax.make_array_from_callback(source.shape(name), sharding, shard)


def _is_sharding(x) -> bool:
  return x is None or isinstance(x, jax.sharding.Sharding)


def save_hf(
  model: HFModel,
  path: str | pathlib.Path,
  dtype: str | None = None,
  max_shard_bytes: int = 5 * 2**30,
  tokenizer: Any = None,
) -> pathlib.Path:
  """Writes ``model`` as a Hugging Face checkpoint: config.json, safetensors (sharded with an
  index above ``max_shard_bytes``) and the tokenizer (``tokenizer`` or ``model.tokenizer``).

  Tensors keep the parameter dtype unless ``dtype`` is given; a tied model writes no
  ``lm_head.weight``. Parameters are fetched from the device(s) one at a time.
  """
  path = pathlib.Path(path)
  path.mkdir(parents=True, exist_ok=True)
  cfg = model.config
  hf = hf_config.to_hf_config(cfg, like=model.hf_config)
  names = hf_names(model.params)
  leaves = dict(_flat(model.params))
  specs = {}
  for name, (p, transposed) in names.items():
    x = leaves[p]
    shape = tuple(x.shape[::-1] if transposed else x.shape)
    specs[name] = (shape, np.dtype(dtype or x.dtype))
  if dtype:
    hf.dtype = str(np.dtype(dtype))

  def fetch(name):
    p, transposed = names[name]
    return _host(leaves[p], transposed)

  write_checkpoint(path, specs, fetch, max_shard_bytes)
  hf.save_pretrained(str(path))
  tok = tokenizer if tokenizer is not None else model.tokenizer
  if tok is not None:
    tok.save_pretrained(str(path))
  return path


def hf_arrays(params: dict):
  """(Hugging Face name, host array in HF layout) for every parameter, fetched one at a time:
  what ``save_hf`` writes and what an external engine loads (``sampling.vllm_engine``)."""
  leaves = dict(_flat(params))
  for name, (p, transposed) in hf_names(params).items():
    yield name, _host(leaves[p], transposed)


def _host(x, transposed: bool) -> np.ndarray:
  x = np.asarray(jax.device_get(x.get() if isinstance(x, _LayerSlice) else x))
  return x.T if transposed else x


@dataclasses.dataclass(frozen=True)
class _LayerSlice:
  """Layer ``i`` of a stacked leaf, sliced only when fetched (one layer's bytes at a time)."""

  stacked: Any
  i: int

  @property
  def shape(self) -> tuple[int, ...]:
    return tuple(self.stacked.shape[1:])

  @property
  def dtype(self):
    return self.stacked.dtype

  def get(self):
    return self.stacked[self.i]


def _flat(params: dict):
  """(unrolled key path, leaf) of every parameter: a stacked leaf gives one lazy slice per layer."""
  stacked = is_stacked(params)
  for kp, x in jax.tree_util.tree_flatten_with_path(params)[0]:
    path = tuple(_key(k) for k in kp)
    if stacked and path[0] == LAYERS:
      for i in range(x.shape[0]):
        yield (LAYERS, i, *path[1:]), _LayerSlice(x, i)
    else:
      yield path, x
