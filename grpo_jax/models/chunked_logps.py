"""Per-token log-probs over vocabulary chunks: the N×L×V logits are never materialised.

Same contract as ``grpo_jax.models.token_logps`` (logps_BxL[:, t] = log softmax(logits[:, t−1]
/ τ)[tokens[:, t]], 0 at t = 0 and at padding; optional entropies), computed from the final
hidden states h_BxLxD and the unembedding W (D×V; the embedding table's transpose when tied)
one vocabulary chunk of C columns at a time with an online logsumexp (Milakov & Gimelshein 2018):

  m ← max(m, max_c z),  s ← s·e^{m_old−m} + Σ_c e^{z−m},  u ← u·e^{m_old−m} + Σ_c e^{z−m}·z
  lse = m + log s,   log p(y) = z_y − lse,   entropy = lse − u/s

with z = (h·W_c)/τ in float32. Each chunk's body is rematerialised, so the backward pass keeps
only the B×L running statistics per chunk: peak memory O(B·L·C) instead of O(B·L·V).

Under a mesh that splits W's vocabulary over t devices (tensor parallelism, ``sharding.rules``)
chunk k holds the k-th piece of C/t columns of every device's slice, not V's k-th run of C
columns: each device's slice is padded and cut in place, so the chunks stay split like W and
no device gathers another's rows (padding V to K·C and cutting it would move rows across the
slices' boundaries: on Qwen3-8B under tensor 8 that was an all-gather of W per micro-batch).
Columns only change order, and the sums above do not depend on it; off a mesh (t = 1) the
chunks are V's runs of C columns. Where t does not divide V (OLMo-3's 100,278 entries under
tensor 4) W stays whole over the tensor axis (``sharding.rules``); its rows are then padded to
t·⌈V/t⌉ and cut the same way, and the chunks are constrained to the split, so each device
computes its own C/t columns of every chunk from its copy of W instead of all C of them.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import PartitionSpec as P

from grpo_jax.models.logprobs import Window, predicting_hidden, scored_window
from grpo_jax.sharding import rules


def hidden_and_unembedding(graphdef: nnx.GraphDef, params: dict, tokens_BxL, mask_BxL, window):
  """(hidden states h_BxTxD that predict positions first … L−1, unembedding W_VxD as rows, its
  dtype) of the padded batch; ``window`` = (first, share, packed) as in ``predicting_hidden``."""
  model, h_BxTxD = predicting_hidden(graphdef, params, tokens_BxL, mask_BxL, *window)
  if model.lm_head is None:
    return h_BxTxD, model.embed_tokens.embedding[...], model.embed_tokens.dtype
  return h_BxTxD, model.lm_head.kernel[...].T, model.lm_head.dtype


def vocab_shards(V: int) -> tuple[tuple[str, ...], int]:
  """(axes, t): the mesh axes ``sharding.rules.TRAIN`` splits the vocabulary over under the
  current mesh and their size t; ((), 1) off a mesh. t need not divide V (module doc); any t
  gives the same log-probs: it orders the columns within the chunks."""
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty:
    return (), 1
  axes = rules.mesh_axes_for("vocab", rules.TRAIN, mesh)
  return axes, math.prod(dict(mesh.shape)[a] for a in axes)


def chunk_unembedding(w_VxD, vocab_chunk: int, t: int = 1):
  """(w_KxCxD, ids_KxC, valid_KxC): W's rows, padded to t slices of Vs = ⌈V/t⌉, in K chunks of
  C = t·⌈min(vocab_chunk, V)/t⌉ columns, chunk k the k-th piece of every one of the t slices
  (module doc); ``ids`` the vocabulary id of each column, ``valid`` False on the padding."""
  V, D = w_VxD.shape
  Vs = -(-V // t)  # one slice's rows
  Cs = -(-min(int(vocab_chunk), V) // t)  # one slice's columns of a chunk
  K = -(-Vs // Cs)
  w_txVsxD = jnp.pad(w_VxD, ((0, t * Vs - V), (0, 0))).reshape(t, Vs, D)
  w_txKxCsxD = jnp.pad(w_txVsxD, ((0, 0), (0, K * Cs - Vs), (0, 0)))
  w_KxCxD = w_txKxCsxD.reshape(t, K, Cs, D).swapaxes(0, 1).reshape(K, t * Cs, D)
  row_KxCs = jnp.arange(K)[:, None] * Cs + jnp.arange(Cs)[None, :]  # within a slice
  ids_KxtxCs = jnp.arange(t)[None, :, None] * Vs + row_KxCs[:, None, :]
  valid_KxtxCs = (row_KxCs < Vs)[:, None, :] & (ids_KxtxCs < V)
  return w_KxCxD, ids_KxtxCs.reshape(K, t * Cs), valid_KxtxCs.reshape(K, t * Cs)


def chunked_token_logps(vocab_chunk: int = 8192):
  """``token_logps`` computed ``vocab_chunk`` vocabulary entries at a time (see module doc): a
  function with ``token_logps``'s arguments and results (only the window's positions are
  unembedded and returned)."""
  if vocab_chunk < 1:
    raise ValueError(f"vocab_chunk must be >= 1, got {vocab_chunk}")

  def logps(
    graphdef: nnx.GraphDef,
    params: dict,
    tokens_BxL,
    mask_BxL,
    temperature: float = 1.0,
    with_entropy: bool = False,
    window: Window | None = None,
  ):
    start, share, packed = window or Window()
    first, targets_BxL1, place = scored_window(tokens_BxL, mask_BxL, start, share)
    h_BxLxD, w_VxD, dtype = hidden_and_unembedding(
      graphdef, params, tokens_BxL, mask_BxL, Window(first, share, packed)
    )
    V = w_VxD.shape[0]
    # Padded columns get logit −inf (weight 0 in every sum).
    axes, t = vocab_shards(V)
    w_KxCxD, ids_KxC, valid_KxC = chunk_unembedding(w_VxD, vocab_chunk, t)
    if t > 1:  # the chunks' columns over the vocabulary's axes, even where W is whole there
      spec = P(None, axes if len(axes) > 1 else axes[0], P.UNCONSTRAINED)
      w_KxCxD = jax.lax.with_sharding_constraint(w_KxCxD, spec)
    B, L1 = targets_BxL1.shape

    @jax.checkpoint
    def body(carry, inputs):
      m, s, u, picked = carry
      w_CxD, col_C, valid_C = inputs
      # Operands in the compute dtype, the sums in float32 (``Transformer.logits``).
      z = jnp.einsum(
        "bld,cd->blc",
        h_BxLxD.astype(dtype),
        w_CxD.astype(dtype),
        preferred_element_type=jnp.float32,
      )
      z = z / temperature
      z = jnp.where(valid_C, z, -jnp.inf)
      m_new = jnp.maximum(m, jnp.max(z, axis=-1))
      scale = jnp.exp(m - m_new)
      e = jnp.exp(z - m_new[..., None])
      s = s * scale + jnp.sum(e, axis=-1)
      u = u * scale + jnp.sum(jnp.where(e > 0, e * z, 0.0), axis=-1)
      hit = (col_C[None, None, :] == targets_BxL1[..., None]) & valid_C
      picked = picked + jnp.sum(jnp.where(hit, z, 0.0), axis=-1)
      return (m_new, s, u, picked), None

    zeros = jnp.zeros((B, L1), jnp.float32)
    init = (jnp.full((B, L1), -jnp.inf, jnp.float32), zeros, zeros, zeros)
    (m, s, u, picked), _ = jax.lax.scan(body, init, (w_KxCxD, ids_KxC, valid_KxC))
    lse_BxL1 = m + jnp.log(s)
    if not with_entropy:
      return place(picked - lse_BxL1)
    return place(picked - lse_BxL1), place(lse_BxL1 - u / s)

  return logps
