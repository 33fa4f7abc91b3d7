"""Decoder layers stacked along a leading ``layers`` axis and run with ``jax.lax.scan``
(``ModelConfig.scan_layers``): the layer is traced and compiled once instead of num_layers times.

Layout. Unrolled, the params hold ``layers.{i}.<name>`` for i < num_layers (the HF table in
``transformer.py``); scanned, one subtree ``layers.<name>`` whose every leaf has the unrolled
leaf's shape with num_layers in front, layer i at index i:

  layers.{i}.self_attn.q_proj.kernel (D, H·Dh)   →   layers.self_attn.q_proj.kernel (n, D, H·Dh)
  layers.{i}.input_layernorm.weight (D,)         →   layers.input_layernorm.weight (n, D)

Everything outside ``layers`` is the same. :func:`stack_layers` / :func:`unstack_layers` convert
between the two (HF import stacks, export unstacks); the sharding rules give the stacked axis the
logical name ``layers`` (never split).

Only the uncached pass (training, log-probs, the sampler's prefill, packed rows) scans; a model
mixing sliding and full layers picks each layer's window and RoPE with ``lax.switch`` on the
layer's kind, a scanned input. A cached pass (decode, the shared prompt's completion pass)
indexes layer i's slice of the stacked params and runs the layers one after another, so the
sampler's per-layer KV cache keeps its layout (and its decode loop is still unrolled).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

LAYERS = "layers"


def _is_index(key) -> bool:
  return isinstance(key, int) or (isinstance(key, str) and key.isdigit())


def is_stacked(params: dict) -> bool:
  """Whether ``params`` holds the scanned layout (``layers.<name>``, no layer index keys)."""
  layers = params.get(LAYERS) if isinstance(params, dict) else None
  return isinstance(layers, dict) and bool(layers) and not any(map(_is_index, layers))


def stack_layers(params: dict) -> dict:
  """The scanned layout of unrolled ``params`` (a no-op on stacked ones); string layer keys (a
  checkpoint round trip's) are ordered as ints. Both layouts are alive until the caller drops
  the unrolled one."""
  if is_stacked(params):
    return params
  layers = params[LAYERS]
  per_layer = [layers[k] for k in sorted(layers, key=int)]
  return {**params, LAYERS: jax.tree.map(lambda *xs: jnp.stack(xs), *per_layer)}


def unstack_layers(params: dict) -> dict:
  """The unrolled layout of stacked ``params`` (a no-op on unrolled ones), int layer keys."""
  if not is_stacked(params):
    return params
  stacked = params[LAYERS]
  n = jax.tree.leaves(stacked)[0].shape[0]
  return {**params, LAYERS: {i: jax.tree.map(lambda x, i=i: x[i], stacked) for i in range(n)}}


def stack_modules(layers: list[nnx.Module]) -> nnx.Module:
  """One module of the layers' structure whose every parameter is the layers' stacked; its
  static attributes are layer 0's (the same parameter structure is required)."""
  graphdef, _ = nnx.split(layers[0])
  states = [nnx.state(layer) for layer in layers]
  return nnx.merge(graphdef, jax.tree.map(lambda *xs: jnp.stack(xs), *states))


def layer_at(stacked: nnx.Module, i: int) -> nnx.Module:
  """Layer i of a stacked module: its params sliced at index i of the leading axis (static
  attributes are layer 0's: the caller sets any that differ per layer)."""
  graphdef, state = nnx.split(stacked)
  return nnx.merge(graphdef, jax.tree.map(lambda x: x[i], state))


def scan(layer_fn, stacked: nnx.Module, x, xs, remat_policy=None, remat: bool = False):
  """``x, ys = lax.scan`` of ``layer_fn(layer, x, xs_i) -> (x, y)`` over the layers of
  ``stacked`` and the leading axis of ``xs``; with ``remat`` the body is ``jax.checkpoint``-ed
  under ``remat_policy``, so the backward pass keeps only each layer's input (plus what the
  policy saves) and recomputes the rest."""
  graphdef, state = nnx.split(stacked)

  def body(x, inputs):
    layer_state, xs_i = inputs
    return layer_fn(nnx.merge(graphdef, layer_state), x, xs_i)

  if remat:
    body = jax.checkpoint(body, policy=remat_policy, prevent_cse=False)
  return jax.lax.scan(body, x, (state, xs))


def unstack_kvs(kvs) -> tuple:
  """Per-layer (k, v) pairs from the scan's stacked (k_nx…, v_nx…)."""
  k, v = kvs
  return tuple((k[i], v[i]) for i in range(k.shape[0]))
