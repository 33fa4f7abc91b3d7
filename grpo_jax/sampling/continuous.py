"""Continuous batching: S decode slots serve N > S rows; when a slot's row stops, the next
waiting row's prompt is prefilled into that slot inside the jitted loop.

Shape letters: N rows in K blocks of R = N / K (one block per device of the mesh's batch axes),
S slots per block, M = K·S slots in all, C refill rows per block, P prompt slots,
T = max_new_tokens, W = P + T cache columns, V vocab.

Every slot owns a cache row of W columns laid out as a row of the plain sampler's cache
(``kv_cache.py``): the left-padded prompt in [0, P), token t − 1 fed at column P + t − 1 and RoPE
position (real prompt tokens) + t − 1, so that a row's logits do not depend on the slot or the
step it runs in (the cache is never grown: W columns from the start). Token t of row n is drawn
with the plain sampler's uniform_TxN[t, n] (``sampler.step_uniforms``): both samplers give the
same tokens, up to the rounding of two differently shaped programs.

The schedule (``waste.continuous_steps`` is its host model): block k's first S rows fill its
slots, each row drawing its first token from the prefill. After every decode step, while a
block has W_k > 0 waiting rows and at least min(C, W_k) free slots, its next min(C, W_k) rows
(in row order) are prefilled, C rows per block at once under one ``lax.while_loop``, into its
lowest free slots. Rows, slots and refills never leave their block: under a mesh every gather
and scatter is batched over k, so each device serves its own rows.
"""

from __future__ import annotations

import functools
import math

import flax.struct
import jax
import jax.numpy as jnp
from flax import nnx

from grpo_jax.sampling.kv_cache import KVCache, decode_step, grow, prefill
from grpo_jax.sampling.next_token import sample_next_token
from grpo_jax.sampling.sampler import SampleOutput, is_stop, step_uniforms


@flax.struct.dataclass
class SlotState:
  """The while-loop carry. ``cache`` holds M slots with one write slot and RoPE position each."""

  cache: KVCache
  row_KxS: jax.Array  # int32: block-local row the slot serves; R = free
  t_KxS: jax.Array  # int32: index of the token the slot draws next
  last_KxS: jax.Array  # int32: the token fed to the next decode step
  next_K: jax.Array  # int32: each block's first waiting row
  steps: jax.Array  # int32 scalar: decode steps run
  tokens_KxRxT: jax.Array
  mask_KxRxT: jax.Array
  logps_KxRxT: jax.Array
  done_KxR: jax.Array  # bool: the row has emitted a stop token


def refill_chunk(slots_per_block: int, prompt_share: int, refill_rows: int) -> int:
  """C, the rows a block admits at once: ``refill_rows`` (capped at S), or with 0 the prompt
  runs of ``prompt_share`` rows (each group's prompt then prefilled once) and at least S/8."""
  if refill_rows > 0:
    return min(refill_rows, slots_per_block)
  run = prompt_share * max(1, slots_per_block // 8 // prompt_share)
  return min(run, slots_per_block)


def _per_block(fn):
  """``fn`` on one block's arrays, mapped over the leading block axis k."""
  return jax.vmap(fn)


def _put(x_KxA, index_KxJ, v_KxJ):
  """x[k, index[k, j]] = v[k, j] along axis 1; index A (one past the end) drops the write."""
  return _per_block(lambda x, i, v: x.at[i].set(v.astype(x.dtype), mode="drop"))(
    x_KxA, index_KxJ, v_KxJ
  )


def _put_2d(x_KxRxT, row_KxJ, t_KxJ, v_KxJ):
  """x[k, row[k, j], t[k, j]] = v[k, j]; row R drops the write."""
  one = lambda x, r, t, v: x.at[r, t].set(v.astype(x.dtype), mode="drop")
  return _per_block(one)(x_KxRxT, row_KxJ, t_KxJ, v_KxJ)


def _write_prompts(cache: KVCache, chunk: KVCache, slot_KxC, K: int) -> KVCache:
  """The chunk's prompt keys/values (P columns) written to columns [0, P) of ``slot_KxC``; those
  slots' masks become the prompt's, their write slot P and position the prompt's length."""
  M, W = cache.valid_NxS.shape
  P = chunk.valid_NxS.shape[1]
  blocks = lambda x: x.reshape(K, -1, *x.shape[1:])
  put_k = lambda c, i, x: c.at[i, :, :, :P].set(x, mode="drop")
  put_v = lambda c, i, x: c.at[i, :, :P, :].set(x, mode="drop")
  k = [
    _per_block(put_k)(blocks(c), slot_KxC, blocks(x))
    for c, x in zip(cache.k_NxHkxDhxS, chunk.k_NxHkxDhxS)
  ]
  v = [
    _per_block(put_v)(blocks(c), slot_KxC, blocks(x))
    for c, x in zip(cache.v_NxHkxSxDh, chunk.v_NxHkxSxDh)
  ]
  valid_KxCxW = blocks(jnp.pad(chunk.valid_NxS, ((0, 0), (0, W - P))))
  written = cache.replace(
    k_NxHkxDhxS=tuple(x.reshape(M, *x.shape[2:]) for x in k),
    v_NxHkxSxDh=tuple(x.reshape(M, *x.shape[2:]) for x in v),
    valid_NxS=_put(blocks(cache.valid_NxS), slot_KxC, valid_KxCxW).reshape(M, W),
    positions_N=_put(blocks(cache.positions_N), slot_KxC, blocks(chunk.positions_N)).reshape(M),
    index=_put(blocks(cache.index), slot_KxC, jnp.full(slot_KxC.shape, P)).reshape(M),
  )
  return grow(written, W)  # re-applies the cache's layout under a mesh


@functools.partial(
  jax.jit,
  static_argnames=(
    "graphdef", "max_new_tokens", "eos_id", "pad_id", "temperature", "top_k", "top_p",
    "num_slots", "refill_rows", "blocks", "prompt_share",
  ),
)  # fmt: skip
def _continuous_jit(
  params,
  prompt_NxP,
  prompt_mask_NxP,
  rng,
  *,
  graphdef,
  max_new_tokens,
  eos_id,
  pad_id,
  temperature,
  top_k,
  top_p,
  num_slots,
  refill_rows,
  blocks,
  prompt_share,
) -> SampleOutput:
  model = nnx.merge(graphdef, params)
  (N, P), T, K = prompt_NxP.shape, max_new_tokens, blocks
  R, S = N // K, num_slots // K
  W = P + T
  C = refill_chunk(S, prompt_share, refill_rows)
  uniform_KxTxR = jnp.transpose(step_uniforms(rng, T, N).reshape(T, K, R), (1, 0, 2))
  prompts_KxRxP, masks_KxRxP = prompt_NxP.reshape(K, R, P), prompt_mask_NxP.reshape(K, R, P)

  def prefill_rows(rows_KxC, columns, share):
    take = lambda x: jnp.take_along_axis(x, rows_KxC[..., None], axis=1).reshape(-1, P)
    return prefill(model, take(prompts_KxRxP), take(masks_KxRxP), columns, share)

  def draw(s, logits_MxV, row_KxJ, t_KxJ, live_KxJ):
    """Draws token t of each live slot's row and records it; returns (state, token, stopped)."""
    u_KxJ = _per_block(lambda u, t, r: u[jnp.minimum(t, T - 1), jnp.minimum(r, R - 1)])(
      uniform_KxTxR, t_KxJ, row_KxJ
    )
    token_M, logp_M = sample_next_token(u_KxJ.reshape(-1), logits_MxV, temperature, top_k, top_p)
    token_KxJ = jnp.where(live_KxJ, token_M.reshape(row_KxJ.shape), pad_id)
    logp_KxJ = jnp.where(live_KxJ, logp_M.reshape(row_KxJ.shape), 0.0)
    stopped_KxJ = live_KxJ & is_stop(token_KxJ, eos_id)
    at_KxJ = jnp.where(live_KxJ, row_KxJ, R)  # R: not recorded
    s = s.replace(
      tokens_KxRxT=_put_2d(s.tokens_KxRxT, at_KxJ, t_KxJ, token_KxJ),
      mask_KxRxT=_put_2d(s.mask_KxRxT, at_KxJ, t_KxJ, jnp.ones_like(t_KxJ)),
      logps_KxRxT=_put_2d(s.logps_KxRxT, at_KxJ, t_KxJ, logp_KxJ),
      done_KxR=_put(s.done_KxR, jnp.where(stopped_KxJ, row_KxJ, R), stopped_KxJ),
    )
    return s, token_KxJ, stopped_KxJ

  def start(s, logits_MxV, row_KxC, slot_KxC, use_KxC):
    """Token 0 of the admitted rows (from their prefill); a row that stops there frees its slot."""
    zero_KxC = jnp.zeros_like(row_KxC)
    s, token_KxC, stopped_KxC = draw(s, logits_MxV, row_KxC, zero_KxC, use_KxC)
    ends_KxC = stopped_KxC | (T == 1)
    return s.replace(
      row_KxS=_put(s.row_KxS, slot_KxC, jnp.where(ends_KxC, R, row_KxC)),
      t_KxS=_put(s.t_KxS, slot_KxC, zero_KxC + 1),
      last_KxS=_put(s.last_KxS, slot_KxC, token_KxC),
    )

  def admits_K(s):
    free_K = jnp.sum(s.row_KxS == R, axis=1)
    waiting_K = R - s.next_K
    return jnp.where(
      (waiting_K > 0) & (free_K >= jnp.minimum(C, waiting_K)), jnp.minimum(C, waiting_K), 0
    )

  def refill(s):
    take_K = admits_K(s)
    use_KxC = jnp.arange(C)[None] < take_K[:, None]
    lowest_free_KxC = jnp.argsort(s.row_KxS < R, axis=1, stable=True)[:, :C]
    slot_KxC = jnp.where(use_KxC, lowest_free_KxC, S)  # S: not written
    row_KxC = jnp.minimum(s.next_K[:, None] + jnp.arange(C)[None], R - 1)
    logits_MxV, chunk = prefill_rows(row_KxC, P, math.gcd(prompt_share, C, S))
    s = s.replace(cache=_write_prompts(s.cache, chunk, slot_KxC, K), next_K=s.next_K + take_K)
    return start(s, logits_MxV, row_KxC, slot_KxC, use_KxC)

  def decode(s):
    live_KxS = s.row_KxS < R
    cache = s.cache.replace(index=jnp.minimum(s.cache.index, W - 1))  # free slots: any column
    logits_MxV, cache = decode_step(model, s.last_KxS.reshape(-1), cache)
    s, token_KxS, stopped_KxS = draw(
      s.replace(cache=cache), logits_MxV, s.row_KxS, s.t_KxS, live_KxS
    )
    ends_KxS = live_KxS & (stopped_KxS | (s.t_KxS == T - 1))
    return s.replace(
      row_KxS=jnp.where(ends_KxS, R, s.row_KxS),
      t_KxS=s.t_KxS + 1,
      last_KxS=jnp.where(live_KxS, token_KxS, 0),  # free slots feed token 0, a valid id
      steps=s.steps + 1,
    )

  refill_all = lambda s: jax.lax.while_loop(lambda s: jnp.any(admits_K(s) > 0), refill, s)
  first_KxS = jnp.broadcast_to(jnp.arange(S, dtype=jnp.int32), (K, S))
  logits_MxV, cache = prefill_rows(first_KxS, W, math.gcd(prompt_share, S))
  s = SlotState(
    cache=cache.replace(index=jnp.full((K * S,), P, jnp.int32)),
    row_KxS=first_KxS,
    t_KxS=jnp.zeros((K, S), jnp.int32),
    last_KxS=jnp.zeros((K, S), jnp.int32),
    next_K=jnp.full((K,), S, jnp.int32),
    steps=jnp.asarray(0, jnp.int32),
    tokens_KxRxT=jnp.full((K, R, T), pad_id, jnp.int32),
    mask_KxRxT=jnp.zeros((K, R, T), jnp.int32),
    logps_KxRxT=jnp.zeros((K, R, T), jnp.float32),
    done_KxR=jnp.zeros((K, R), bool),
  )
  s = refill_all(start(s, logits_MxV, first_KxS, first_KxS, jnp.ones((K, S), bool)))
  s = jax.lax.while_loop(lambda s: jnp.any(s.row_KxS < R), lambda s: refill_all(decode(s)), s)
  mask_NxT = s.mask_KxRxT.reshape(N, T)
  return SampleOutput(
    tokens_NxT=s.tokens_KxRxT.reshape(N, T),
    mask_NxT=mask_NxT,
    logps_NxT=s.logps_KxRxT.reshape(N, T),
    lengths_N=jnp.sum(mask_NxT, axis=1),
    truncated_N=~s.done_KxR.reshape(N),
    decode_steps=s.steps,
  )


def check_slots(num_rows: int, num_slots: int, blocks: int) -> None:
  """The continuous sampler's shape rules, failing with the config key's name."""
  if num_slots % blocks or num_rows % blocks:
    raise ValueError(
      f"sampling.decode_slots = {num_slots} and the {num_rows} rows must be multiples of the "
      f"{blocks} device-local row blocks (the mesh's batch devices)"
    )
