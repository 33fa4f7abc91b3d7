"""The hidden states that predict a batch's completions, each prompt run through the decoder
once for the ``share`` consecutive rows that repeat it (GRPO's G samples of one prompt).

Shared-prefix forward (Prefix Grouper: Liu et al. 2025, arXiv 2506.05433). Rows come in
aligned runs of ``share`` with identical prompt slots [0, P) (tokens and mask); a run's first
row stands for it. The prompt pass runs on N/share rows and returns every layer's keys and
values; the completion pass runs on all N rows over slots [P, L) through the decoder's cached
path, attending over the prompt's keys and values repeated to the run's rows. The repeat's
transpose sums the run's gradients into the one prompt pass, so log-probs and gradients equal
the per-row forward's up to float rounding, for 1/share of the prompt's work: 64 rows of
32 + 64 tokens in groups of 8 run 8·32 + 64·64 = 4,352 token positions instead of 6,144.

Shape letters: N rows, U = N / share runs, P prompt slots, T = L − P completion slots.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from grpo_jax.models.transformer import Transformer, causal_mask, positions_from_mask, real_tokens


def run_heads(x_NxR: jax.Array, share: int) -> jax.Array:
  """x_UxR: the first row of every aligned run of ``share`` rows."""
  return x_NxR.reshape(-1, share, *x_NxR.shape[1:])[:, 0]


def repeat_runs(x_UxR: jax.Array, share: int) -> jax.Array:
  """x_NxR: every row repeated ``share`` times in place (the transpose of :func:`run_heads` on
  identical runs; its own transpose sums each run)."""
  U, rest = x_UxR.shape[0], x_UxR.shape[1:]
  return jnp.broadcast_to(x_UxR[:, None], (U, share, *rest)).reshape(U * share, *rest)


def decode_layout(kvs, share: int = 1) -> tuple:
  """Per-layer (k_NxHkxDhxS, v_NxHkxSxDh): the decoder's (k, v)_UxSxHkxDh pairs in the layout
  of ``sampling/kv_cache.py`` (keys (N, Hk, Dh, S), values (N, Hk, S, Dh)), every row repeated
  ``share`` times in place."""
  return tuple(
    (repeat_runs(jnp.transpose(k, (0, 2, 3, 1)), share), repeat_runs(jnp.swapaxes(v, 1, 2), share))
    for k, v in kvs
  )


def group_run(group_size: int, num_rows: int, parts: int = 1, blocks: int = 1) -> int:
  """Rows of a part that certainly belong to one group of ``group_size`` consecutive rows, in
  aligned runs, when ``num_rows`` rows are split into ``parts`` parts over ``blocks`` device
  blocks (``train.microbatch.split_rows``): a part is ``blocks`` sub-blocks of
  m = num_rows / (blocks·parts) consecutive rows, each starting at a multiple of m, so its
  aligned runs of gcd(G, m) rows never cross a group boundary (a multiple of G)."""
  return math.gcd(int(group_size), num_rows // (blocks * parts))


def check_share(num_rows: int, prompt_len: int, length: int, share: int) -> None:
  if share < 1 or num_rows % share:
    raise ValueError(f"share = {share} must be >= 1 and divide the {num_rows} rows")
  if not 0 < prompt_len < length:
    raise ValueError(f"a shared prompt needs 0 < prompt_len < L = {length}, got {prompt_len}")


def shared_prompt_hidden(
  model: Transformer, tokens_NxL: jax.Array, mask_NxL: jax.Array, prompt_len: int, share: int
) -> jax.Array:
  """h_NxTxD: final-norm hidden states at positions P−1 … L−2 (those that predict the tokens at
  P … L−1), the prompt of each run of ``share`` rows computed once (see the module doc).

  Same as ``model(...)``'s hidden states at those positions for a batch whose runs do share
  their prompt; for one that does not, every row reads its run's first prompt.
  """
  N, L = tokens_NxL.shape
  P, T = prompt_len, L - prompt_len
  check_share(N, P, L, share)
  tokens_NxL = real_tokens(tokens_NxL, mask_NxL)
  positions_NxL = positions_from_mask(mask_NxL)
  prompt_mask_UxP = run_heads(mask_NxL[:, :P], share)
  h_UxPxD, kvs = model(
    run_heads(tokens_NxL[:, :P], share),
    run_heads(positions_NxL[:, :P], share),
    causal_mask(prompt_mask_UxP),
  )
  # The prompt in slots [0, P) of a P + T slot cache; the completion pass writes its own at P.
  caches = tuple(
    (jnp.pad(k, _slots(3, T)), jnp.pad(v, _slots(2, T))) for k, v in decode_layout(kvs, share)
  )
  mask_NxTxL = causal_mask(mask_NxL)[:, P:]
  h_NxTxD, _ = model(tokens_NxL[:, P:], positions_NxL[:, P:], mask_NxTxL, caches, P)
  last_prompt_Nx1xD = repeat_runs(h_UxPxD[:, -1:], share)
  return jnp.concatenate([last_prompt_Nx1xD, h_NxTxD[:, :-1]], axis=1)


def _slots(axis: int, extra: int) -> list[tuple[int, int]]:
  """Padding that appends ``extra`` empty slots along ``axis`` of a 4-D cache array."""
  return [(0, extra) if a == axis else (0, 0) for a in range(4)]
