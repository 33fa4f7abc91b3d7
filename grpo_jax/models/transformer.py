"""The decoder, its parameter initialisation and the pure ``forward`` the trainer uses.

Parameters live outside the module as a pure nested dict (``init_params``), which the trainer
shards, differentiates and checkpoints; ``forward`` merges them with the static graph def.
The dict mirrors the Hugging Face ``{Qwen3,Llama,Olmo3}ForCausalLM`` state dict: drop HF's
``model.`` prefix, and a ``kernel`` here is the transposed ``weight`` of the torch Linear of the
same name (``hf_io.hf_names`` is the executable form of this table).

  ours                                           Hugging Face
  embed_tokens.embedding (V, D)                  model.embed_tokens.weight
  layers.{i}.self_attn.{q,k,v,o}_proj.kernel     model.layers.{i}.self_attn.{q,k,v,o}_proj.weight.T
  layers.{i}.self_attn.{q,k,v,o}_proj.bias      model.layers.{i}.self_attn.{q,k,v,o}_proj.bias
  layers.{i}.self_attn.{q,k}_norm.weight         model.layers.{i}.self_attn.{q,k}_norm.weight
      (Dh,) in qwen3; (H·Dh,), (Hk·Dh,) in olmo3; absent in llama
  layers.{i}.mlp.{gate,up,down}_proj.kernel      model.layers.{i}.mlp.{gate,up,down}_proj.weight.T
  layers.{i}.input_layernorm.weight              model.layers.{i}.input_layernorm.weight (not olmo3)
  layers.{i}.post_attention_layernorm.weight     model.layers.{i}.post_attention_layernorm.weight
  layers.{i}.post_feedforward_layernorm.weight   model.layers.{i}.post_feedforward_layernorm.weight
      (olmo3 only)
  norm.weight (D,)                               model.norm.weight
  lm_head.kernel (D, V), only if untied          lm_head.weight.T

``layers`` is keyed by int; a checkpoint round trip may turn the keys into strings, which
``nnx.merge`` accepts as well. With ``ModelConfig.scan_layers`` the layers are one subtree
``layers.<name>`` of leaves stacked along a leading num_layers axis, run by ``jax.lax.scan``
(``layer_stack.py``: the layout, ``stack_layers`` / ``unstack_layers``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from flax import nnx

from grpo_jax.models import layer_stack
from grpo_jax.models.layers import DecoderLayer, flat_matmul, linear, rms_norm
from grpo_jax.models.model_config import ModelConfig
from grpo_jax.models.remat import named_input, remat_policy
from grpo_jax.sharding.rules import constrain


class Transformer(nnx.Module):
  """Token embedding → num_layers × DecoderLayer → final RMSNorm → (tied) lm_head."""

  def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
    self.cfg = cfg
    D = cfg.hidden_dim
    # std D^-1/2: with tied embeddings the initial logits then have unit scale.
    self.embed_tokens = nnx.Embed(
      cfg.vocab_size,
      D,
      dtype=cfg.compute_dtype,
      param_dtype=cfg.weight_dtype,
      embedding_init=jax.nn.initializers.normal(D**-0.5),
      rngs=rngs,
    )
    layers = [DecoderLayer(cfg, i, rngs=rngs) for i in range(cfg.num_layers)]
    # Scanned: one DecoderLayer whose parameters have a leading num_layers axis (layer_stack.py).
    self.layers = layer_stack.stack_modules(layers) if cfg.scan_layers else nnx.List(layers)
    self.norm = rms_norm(cfg, D)
    self.lm_head = None if cfg.tie_embeddings else linear(cfg, D, cfg.vocab_size, rngs)

  def __call__(self, tokens_BxL, positions_BxL, mask_BxLxS, kv_caches=None, cache_index=None):
    """Final-norm hidden states and the per-layer (k, v) pairs.

    ``mask_BxLxS`` is the boolean attention mask (query l may read key s). With ``kv_caches``
    (one (k_BxHkxDhxS, v_BxHkxSxDh) pair per layer, ``sampling/kv_cache.py``) the new keys
    are written at ``cache_index`` (a scalar, or index_B: one slot per row) and the returned
    pairs are the updated caches.
    Sliding-window layers further hide keys W or more slots behind the query (HF's
    ``kv_idx > q_idx - W`` over cache positions).
    """
    x_BxLxD = constrain(self.embed_tokens(tokens_BxL))
    # Rematerialised when differentiated: uncached, or cached at a static slot (the shared-prompt
    # forward, ``shared_prompt.py``); never in the sampler's decode loop (a traced slot).
    remat = self.cfg.remat != "none" and (kv_caches is None or isinstance(cache_index, int))
    if self.cfg.scan_layers and kv_caches is None:
      x_BxLxD, kvs = self._scanned(x_BxLxD, positions_BxL, mask_BxLxS, remat)
      return self.norm(x_BxLxD), kvs
    layers = self.layers
    if self.cfg.scan_layers:  # cached: layer i's slice of the stacked params, one after another
      layers = [self._layer(i) for i in range(self.cfg.num_layers)]
    new_kvs = []
    for i, layer in enumerate(layers):
      kv = None if kv_caches is None else kv_caches[i]
      # Uncached, the window is over RoPE positions: a packed row's segments restart them.
      positions = positions_BxL if kv_caches is None else None
      mask_i = window_mask(mask_BxLxS, self.cfg.window(i), cache_index, positions)
      if remat:
        call = _remat_layer(self.cfg.remat, cache_index)
        x_BxLxD, kv = call(layer, x_BxLxD, positions_BxL, mask_i, kv)
      else:
        x_BxLxD, kv = layer(x_BxLxD, positions_BxL, mask_i, kv, cache_index)
      # Layer boundary: rows over (data, fsdp) under a training mesh; a no-op without one.
      x_BxLxD = constrain(x_BxLxD)
      new_kvs.append(kv)
    return self.norm(x_BxLxD), tuple(new_kvs)

  def _layer(self, i: int) -> DecoderLayer:
    """Layer i of the stacked layers, with its own RoPE (a sliding layer's may differ)."""
    return _with_rope(layer_stack.layer_at(self.layers, i), self.cfg.layer_rope(i))

  def _scanned(self, x_BxLxD, positions_BxL, mask_BxLxS, remat: bool):
    """The uncached layers as one ``lax.scan``, the per-layer (k, v) pairs unstacked from its
    outputs. Layers of different kinds (window, RoPE: ``ModelConfig.layer_kinds``) take their
    branch of a ``lax.switch`` on the scanned kind index."""
    kinds = self.cfg.layer_kinds()
    masks = [window_mask(mask_BxLxS, w, None, positions_BxL) for w, _ in kinds]

    def layer_fn(layer, x_BxLxD, kind):
      # One copy of the layer per kind, its RoPE set here (a switch branch may not mutate it).
      graphdef, state = nnx.split(layer)
      per_kind = [_with_rope(nnx.merge(graphdef, state), rope) for _, rope in kinds]

      def branch(k: int):
        return lambda x: per_kind[k](x, positions_BxL, masks[k])

      if remat:
        x_BxLxD = named_input(x_BxLxD)
      if len(kinds) == 1:
        x_BxLxD, kv = branch(0)(x_BxLxD)
      else:
        x_BxLxD, kv = jax.lax.switch(kind, [branch(k) for k in range(len(kinds))], x_BxLxD)
      return constrain(x_BxLxD), kv

    kind_n = jnp.array([self.cfg.layer_kind(i) for i in range(self.cfg.num_layers)], jnp.int32)
    policy = remat_policy(self.cfg.remat) if remat else None
    x_BxLxD, kvs = layer_stack.scan(layer_fn, self.layers, x_BxLxD, kind_n, policy, remat)
    return x_BxLxD, layer_stack.unstack_kvs(kvs)

  def logits(self, h_BxLxD: jax.Array) -> jax.Array:
    """logits_BxLxV = h·W (W the tied embedding's transpose or lm_head's kernel), operands in
    the compute dtype, products accumulated and returned in float32.

    HF's bf16 models round the logits to bf16 before their float32 log-softmax: a logit near 10
    then moves by up to 1/32, and so does every log-prob. Returned in float32, the log-softmax
    of the sampler and the trainer sees the unrounded sums (same values in float32).
    """
    dtype = self.cfg.compute_dtype
    if self.lm_head is None:
      w_DxV = self.embed_tokens.embedding[...].T
    else:
      w_DxV = self.lm_head.kernel[...]

    def unembed(h_MxD):
      return jnp.matmul(
        h_MxD.astype(dtype), w_DxV.astype(dtype), preferred_element_type=jnp.float32
      )

    return flat_matmul(unembed, h_BxLxD, self.cfg.flatten_matmuls)


def _with_rope(layer: DecoderLayer, rope: tuple[float, tuple]) -> DecoderLayer:
  """``layer`` with RoPE (theta, scaling pairs) ``rope``: a stacked layer carries layer 0's."""
  layer.self_attn.rope_theta, layer.self_attn.rope_scaling = rope
  return layer


def _remat_layer(name: str, cache_index: int | None = None):
  """A decoder-layer call whose activations are recomputed in the backward pass (``remat.py``);
  a static ``cache_index`` (or none) is closed over."""
  policy = remat_policy(name)

  def call(layer, x_BxLxD, positions_BxL, mask_BxLxS, kv):
    return layer(named_input(x_BxLxD), positions_BxL, mask_BxLxS, kv, cache_index)

  return nnx.remat(call, policy=policy)


def window_mask(
  mask_BxLxS: jax.Array, window: int, cache_index=None, positions_BxL=None
) -> jax.Array:
  """mask ∧ (q_slot − k_slot < W); query l sits at slot cache_index + l (0 + l uncached;
  ``cache_index`` a scalar or one slot per row).

  Slots, as HF does; within a padded row real tokens occupy consecutive slots, so slots and RoPE
  positions agree wherever the mask is on. ``positions_BxL`` (uncached, L = S): the distance is
  q_pos − k_pos instead, which a packed row needs (``packing.py``: its segments restart the
  positions) and which equals the slot distance on a padded row's real tokens. ``window == 0``
  returns the mask unchanged.
  """
  if window <= 0:
    return mask_BxLxS
  if positions_BxL is not None:
    distance_BxLxS = positions_BxL[:, :, None] - positions_BxL[:, None, :]
    return mask_BxLxS & (distance_BxLxS < window)
  L, S = mask_BxLxS.shape[-2:]
  index = 0 if cache_index is None else cache_index
  if jnp.ndim(index) == 1:  # one slot per row (index_B): a per-row window
    q_slot_BxL = index[:, None] + jnp.arange(L)[None]
    return mask_BxLxS & (q_slot_BxL[:, :, None] - jnp.arange(S)[None, None] < window)
  q_slot_L = jnp.arange(L) + index
  near_LxS = q_slot_L[:, None] - jnp.arange(S)[None, :] < window
  return mask_BxLxS & near_LxS[None]


def init_params(cfg: ModelConfig, seed: int) -> tuple[nnx.GraphDef, dict]:
  """Random parameters as (graphdef, pure nested dict of arrays); created under one jit that is
  compiled once per config (the key is traced)."""
  graphdef, _ = nnx.split(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0))))
  return graphdef, _make_params(cfg, jax.random.key(seed))


@functools.partial(jax.jit, static_argnums=0)
def _make_params(cfg: ModelConfig, key: jax.Array) -> dict:
  return nnx.to_pure_dict(nnx.state(Transformer(cfg, rngs=nnx.Rngs(key)), nnx.Param))


def compute_params(params: dict, dtype) -> dict:
  """The parameters as the matmuls read them: every floating matrix (kernels, embeddings; ndim
  ≥ 2) cast to the compute ``dtype`` where that narrows it (float32 masters → bfloat16), the
  vectors (norm weights, biases) and already-narrow leaves as they are.

  The layers cast their matmul operands to the compute dtype themselves, so a forward pass
  computes the same numbers from either tree; the cast one is what a decode step or the
  reference model reads, half the bytes of float32 masters. Stacked layers (``scan_layers``)
  count their leaves' dimensions without the leading layer axis: norm weights stay as they are.
  """
  dtype = jnp.dtype(dtype)

  def cast(x, stacked: bool = False):
    narrows = jnp.issubdtype(x.dtype, jnp.floating) and x.dtype.itemsize > dtype.itemsize
    return x.astype(dtype) if narrows and x.ndim - stacked >= 2 else x

  if layer_stack.is_stacked(params):
    layers = jax.tree.map(lambda x: cast(x, True), params[layer_stack.LAYERS])
    rest = {k: v for k, v in params.items() if k != layer_stack.LAYERS}
    return {**jax.tree.map(cast, rest), layer_stack.LAYERS: layers}
  return jax.tree.map(cast, params)


def positions_from_mask(mask_BxL: jax.Array) -> jax.Array:
  """RoPE positions cumsum(mask) − 1, clamped at 0: real tokens count 0, 1, 2 … whatever the
  padding, so a left-padded row sees the same positions as its unpadded version."""
  return jnp.maximum(jnp.cumsum(mask_BxL.astype(jnp.int32), axis=-1) - 1, 0)


def causal_mask(mask_BxL: jax.Array) -> jax.Array:
  """mask_BxLxL[b, q, k] = (k ≤ q) ∧ token k is real."""
  L = mask_BxL.shape[-1]
  causal_LxL = jnp.tril(jnp.ones((L, L), dtype=bool))
  return causal_LxL[None] & mask_BxL.astype(bool)[:, None, :]


def real_tokens(tokens_BxL: jax.Array, mask_BxL: jax.Array) -> jax.Array:
  """Token 0 at padding. A pad id outside [0, V) (e.g. -1) would embed as NaN, and a NaN value
  at a masked key still leaks through 0·NaN in the attention product."""
  return jnp.where(mask_BxL.astype(bool), tokens_BxL, 0)


def forward(
  graphdef: nnx.GraphDef, params: dict, tokens_BxL: jax.Array, mask_BxL: jax.Array
) -> jax.Array:
  """logits_BxLxV of a padded batch (mask 1 = real token; padding left and/or right).

  Causal attention that ignores padded keys; positions from ``positions_from_mask``. Logits at
  padded positions are finite but meaningless. Pure: jit it and differentiate w.r.t. params.
  """
  model = nnx.merge(graphdef, params)
  tokens_BxL = real_tokens(tokens_BxL, mask_BxL)
  h_BxLxD, _ = model(tokens_BxL, positions_from_mask(mask_BxL), causal_mask(mask_BxL))
  return model.logits(h_BxLxD)
