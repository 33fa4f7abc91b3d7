"""Padding-free forward passes: a batch's real tokens packed into fixed rows with segment ids.

A padded batch of N rows × L slots (prompt left-padded in [0, P), response right-padded in
[P, L)) spends most of its positions on padding when the completions are short. Packed, the real
tokens of several rows share one row of W slots; attention never crosses a segment and RoPE
restarts at every segment, so each token sees exactly the keys and positions it had in its own
row. With a shared prompt (``loss.share_prompt``) a segment is one prompt followed by several
completions of it: a completion token reads the prompt and its own completion, never a sibling.

Each packed token carries
  segment_RxW  its segment within the cell (−1 = empty slot),
  sub_RxW      0 for a segment's prompt, j ≥ 1 for its j-th completion,
  positions_RxW  0 … p−1 over the prompt, p … for each completion (restarted per completion);
query q reads key k iff they share a segment, k ≤ q, and k is the prompt or q's own completion.

The rows are packed by cells: aligned runs of ``cell`` consecutive rows, each packed into the
same number of packed rows R_c (``Packed.cell_rows``), cell after cell. Any split of the rows
into parts of whole cells (the update's minibatches, micro-batches and device blocks; see
``grpo_jax.train.packing``) then splits the packed rows the same way, so every part packs
only its own rows. ``source_NxT`` gives, for response slot t of row n, the cell-local flat
index r·W + w of the packed hidden state that predicts it: the one at the previous real token.

Shape letters: N rows, T = L − P response slots, R packed rows (cells × R_c), W packed width.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from grpo_jax.models.transformer import Transformer


@struct.dataclass
class Packed:
  """A batch's real tokens in packed rows (module doc); host numpy or device arrays."""

  tokens_RxW: jax.Array
  positions_RxW: jax.Array
  segment_RxW: jax.Array
  sub_RxW: jax.Array
  source_NxT: jax.Array  # cell-local flat index of the hidden state predicting slot P + t
  cell_rows: int = struct.field(pytree_node=False, default=1)  # R_c, packed rows per cell


def packed_mask(segment_RxW: jax.Array, sub_RxW: jax.Array) -> jax.Array:
  """mask_RxWxW[r, q, k]: same segment, k ≤ q, k real, and k in the prompt or q's completion."""
  W = segment_RxW.shape[-1]
  causal_WxW = jnp.tril(jnp.ones((W, W), dtype=bool))
  seg_q, seg_k = segment_RxW[:, :, None], segment_RxW[:, None, :]
  sub_q, sub_k = sub_RxW[:, :, None], sub_RxW[:, None, :]
  same = (seg_q == seg_k) & (seg_k >= 0)
  return causal_WxW[None] & same & ((sub_k == 0) | (sub_k == sub_q))


def packed_hidden(model: Transformer, packed: Packed) -> jax.Array:
  """h_NxTxD: the final-norm hidden states that predict each row's response slots (those of
  ``predicting_hidden`` at positions P−1 … L−2 of the padded rows), from one forward pass over
  the packed rows. Slots without a real token read an arbitrary packed state."""
  R, W = packed.tokens_RxW.shape
  h_RxWxD, _ = model(
    packed.tokens_RxW,
    packed.positions_RxW,
    packed_mask(packed.segment_RxW, packed.sub_RxW),
  )
  cells = R // packed.cell_rows
  N, T = packed.source_NxT.shape
  h_CxMxD = h_RxWxD.reshape(cells, packed.cell_rows * W, -1)
  source_CxKxT = packed.source_NxT.reshape(cells, N // cells, T)
  # One gather per cell: a cell's rows and its packed rows sit on the same device.
  h_CxKxTxD = jax.vmap(lambda h_MxD, s_KxT: h_MxD[s_KxT])(h_CxMxD, source_CxKxT)
  return h_CxKxTxD.reshape(N, T, -1)


__all__ = ["Packed", "packed_hidden", "packed_mask"]
