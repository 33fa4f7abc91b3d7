"""Continuous batching: S decode slots serve N > S rows; when a slot's row stops, the next
waiting row takes the slot inside the jitted loop.

Shape letters: N rows in K blocks of R = N / K (one block per device of the mesh's batch axes),
S slots per block, M = K·S slots in all, U = N / share prompt runs, P prompt slots,
T = max_new_tokens, V vocab.

One prefill runs every prompt first, each run of ``share`` identical prompts once, as the
plain sampler's does, and draws every row's token 0 from it. Its keys/values stay (U × P, not
N × (P + T)); a row that takes a slot gets a copy of its prompt's, so a refill runs no model
call and a slot is refilled in the same step its row stops (no chunks to wait for).

Every slot's cache row is laid out as a row of the plain sampler's cache (``kv_cache.py``):
the left-padded prompt in [0, P), token t − 1 fed at column P + t − 1 and RoPE position (real
prompt tokens) + t − 1, in caches of P + 64, P + 128 … P + T columns (``steps.cache_buckets``;
a bucket ends when a live slot would write past it). So a row's logits do not depend on the
slot or step it runs in, and token t of row n is drawn with the plain sampler's
uniform_TxN[t, n] (``steps.step_uniforms``): both samplers give the same tokens, up to the
rounding of two differently shaped programs.

The schedule (``waste.continuous_steps`` is its host model): after token 0, a block's rows
that have not stopped take its slots in row order, the lowest free slot first, refilled after
every decode step. Rows and slots never leave their block: under a mesh every gather and
scatter is batched over k, so each device serves its own rows.
"""

from __future__ import annotations

import functools

import flax.struct
import jax
import jax.numpy as jnp
from flax import nnx

from grpo_jax.models.shared_prompt import decode_layout, repeat_runs, run_heads
from grpo_jax.models.transformer import causal_mask, positions_from_mask, real_tokens
from grpo_jax.sampling.kv_cache import KVCache, decode_step, grow
from grpo_jax.sampling.next_token import sample_next_token
from grpo_jax.sampling.steps import SampleOutput, cache_buckets, is_stop, step_uniforms


@flax.struct.dataclass
class SlotState:
  """The while-loop carry. ``cache`` holds M slots, each with its write column and position."""

  cache: KVCache
  row_KxS: jax.Array  # int32: block-local row the slot serves; R = free
  t_KxS: jax.Array  # int32: index of the token the slot draws next
  last_KxS: jax.Array  # int32: the token fed to the next decode step
  next_K: jax.Array  # int32: position in ``queue_KxR`` of each block's next waiting row
  steps: jax.Array  # int32 scalar: decode steps run
  tokens_KxRxT: jax.Array
  mask_KxRxT: jax.Array
  logps_KxRxT: jax.Array
  done_KxR: jax.Array  # bool: the row has emitted a stop token


def _per_block(fn):
  """``fn`` on one block's arrays, mapped over the leading block axis k."""
  return jax.vmap(fn)


def _put_2d(x_KxRxT, row_KxS, t_KxS, v_KxS):
  """x[k, row[k, s], t[k, s]] = v[k, s]; row R drops the write."""
  one = lambda x, r, t, v: x.at[r, t].set(v.astype(x.dtype), mode="drop")
  return _per_block(one)(x_KxRxT, row_KxS, t_KxS, v_KxS)


def _prefill_runs(model, prompt_NxP, prompt_mask_NxP, share: int):
  """Each run's prompt once: (logits_NxV of token 0, per-layer (k_UxHkxDhxP, v_UxHkxPxDh))."""
  mask_UxP = run_heads(prompt_mask_NxP, share)
  tokens_UxP = real_tokens(run_heads(prompt_NxP, share), mask_UxP)
  h_UxPxD, kvs = model(tokens_UxP, positions_from_mask(mask_UxP), causal_mask(mask_UxP))
  return repeat_runs(model.logits(h_UxPxD[:, -1]), share), decode_layout(kvs)


@functools.partial(jax.jit, static_argnames=("graphdef", "decode"))
def _continuous_jit(params, prompt_NxP, prompt_mask_NxP, rng, *, graphdef, decode) -> SampleOutput:
  d = decode
  eos_id, pad_id, temperature, top_k, top_p = d.eos_id, d.pad_id, d.temperature, d.top_k, d.top_p
  max_new_tokens, num_slots, blocks = d.max_new_tokens, d.decode_slots, d.row_blocks
  prompt_share, first_bucket = d.prompt_share, d.first_bucket
  model = nnx.merge(graphdef, params)
  (N, P), T, K, share = prompt_NxP.shape, max_new_tokens, blocks, prompt_share
  R, S = N // K, num_slots // K
  blk = lambda x: x.reshape(K, -1, *x.shape[1:])  # rows, runs or slots → per block
  uniform_KxTxR = jnp.transpose(step_uniforms(rng, T, N).reshape(T, K, R), (1, 0, 2))

  # Token 0 of every row, as the plain sampler draws it; rows that stop there never take a slot.
  logits_NxV, kvs = _prefill_runs(model, prompt_NxP, prompt_mask_NxP, share)
  token0_N, logp0_N = sample_next_token(
    uniform_KxTxR[:, 0].reshape(N), logits_NxV, temperature, top_k, top_p
  )
  stop0_KxR = blk(is_stop(token0_N, eos_id))
  waits_KxR = ~stop0_KxR & (T > 1)
  queue_KxR = jnp.argsort(~waits_KxR, axis=1, stable=True).astype(jnp.int32)  # waiting rows first
  count_K = jnp.sum(waits_KxR, axis=1, dtype=jnp.int32)
  token0_KxR = blk(token0_N)
  plen_KxR = jnp.sum(blk(prompt_mask_NxP).astype(jnp.int32), axis=2)
  prompt_valid_KxRxP = blk(prompt_mask_NxP).astype(bool)
  store_k = [blk(k) for k, _ in kvs]  # K × U/K runs
  store_v = [blk(v) for _, v in kvs]

  def admit(s: SlotState) -> SlotState:
    """Free slots take the next waiting rows (the j-th free slot the j-th row) with a copy of
    their prompt's keys/values, mask, write column P and RoPE position."""
    free_KxS = s.row_KxS == R
    rank_KxS = jnp.cumsum(free_KxS, axis=1, dtype=jnp.int32) - 1
    fill_KxS = free_KxS & (rank_KxS < (count_K - s.next_K)[:, None])
    row_KxS = jnp.take_along_axis(queue_KxR, jnp.minimum(s.next_K[:, None] + rank_KxS, R - 1), 1)
    at_KxS = jnp.where(fill_KxS, jnp.arange(S)[None], S)  # S: not written
    run_KxS = row_KxS // share
    gather = lambda x_KxU: _per_block(lambda x, i: x[i])(x_KxU, run_KxS)
    put = lambda x_KxS, v_KxS: _per_block(lambda x, i, v: x.at[i].set(v, mode="drop"))(
      x_KxS, at_KxS, v_KxS
    )

    def write(cache: KVCache) -> KVCache:
      W = cache.num_slots
      keys = [
        _per_block(lambda c, i, x: c.at[i, :, :, :P].set(x, mode="drop"))(blk(c), at_KxS, gather(x))
        for c, x in zip(cache.k_NxHkxDhxS, store_k)
      ]
      values = [
        _per_block(lambda c, i, x: c.at[i, :, :P, :].set(x, mode="drop"))(blk(c), at_KxS, gather(x))
        for c, x in zip(cache.v_NxHkxSxDh, store_v)
      ]
      take_rows = lambda x_KxR: jnp.take_along_axis(x_KxR, row_KxS, 1)
      valid_KxSxP = jnp.take_along_axis(prompt_valid_KxRxP, row_KxS[..., None], 1)
      valid_KxSxW = jnp.pad(valid_KxSxP, ((0, 0), (0, 0), (0, W - P)))
      flat = lambda x: x.reshape(K * S, *x.shape[2:])
      return grow(
        cache.replace(
          k_NxHkxDhxS=tuple(flat(k) for k in keys),
          v_NxHkxSxDh=tuple(flat(v) for v in values),
          valid_NxS=flat(put(blk(cache.valid_NxS), valid_KxSxW)),
          positions_N=flat(put(blk(cache.positions_N), take_rows(plen_KxR))),
          index=flat(put(blk(cache.index), jnp.full((K, S), P, jnp.int32))),
        ),
        W,
      )  # ``grow`` re-applies the cache's layout under a mesh

    cache = jax.lax.cond(jnp.any(fill_KxS), write, lambda c: c, s.cache)
    return s.replace(
      cache=cache,
      row_KxS=jnp.where(fill_KxS, row_KxS, s.row_KxS),
      t_KxS=jnp.where(fill_KxS, 1, s.t_KxS),
      last_KxS=jnp.where(fill_KxS, jnp.take_along_axis(token0_KxR, row_KxS, 1), s.last_KxS),
      next_K=s.next_K + jnp.sum(fill_KxS, axis=1, dtype=jnp.int32),
    )

  def decode(s: SlotState) -> SlotState:
    live_KxS = s.row_KxS < R
    cache = s.cache.replace(index=jnp.minimum(s.cache.index, s.cache.num_slots - 1))  # free slots
    logits_MxV, cache = decode_step(model, s.last_KxS.reshape(-1), cache)
    u_KxS = _per_block(lambda u, t, r: u[jnp.minimum(t, T - 1), jnp.minimum(r, R - 1)])(
      uniform_KxTxR, s.t_KxS, s.row_KxS
    )
    token_M, logp_M = sample_next_token(u_KxS.reshape(-1), logits_MxV, temperature, top_k, top_p)
    token_KxS = jnp.where(live_KxS, token_M.reshape(K, S), pad_id)
    logp_KxS = jnp.where(live_KxS, logp_M.reshape(K, S), 0.0)
    stopped_KxS = live_KxS & is_stop(token_KxS, eos_id)
    at_KxS = jnp.where(live_KxS, s.row_KxS, R)  # R: not recorded
    ends_KxS = stopped_KxS | (live_KxS & (s.t_KxS == T - 1))
    return s.replace(
      cache=cache,
      tokens_KxRxT=_put_2d(s.tokens_KxRxT, at_KxS, s.t_KxS, token_KxS),
      mask_KxRxT=_put_2d(s.mask_KxRxT, at_KxS, s.t_KxS, jnp.ones_like(s.t_KxS)),
      logps_KxRxT=_put_2d(s.logps_KxRxT, at_KxS, s.t_KxS, logp_KxS),
      done_KxR=_per_block(lambda d, r, v: d.at[r].set(v, mode="drop"))(
        s.done_KxR, jnp.where(stopped_KxS, s.row_KxS, R), stopped_KxS
      ),
      row_KxS=jnp.where(ends_KxS, R, s.row_KxS),
      t_KxS=s.t_KxS + 1,
      last_KxS=jnp.where(live_KxS, token_KxS, 0),  # free slots feed token 0, a valid id
      steps=s.steps + 1,
    )

  limits = cache_buckets(T, first_bucket)
  empty = lambda x, axis: jnp.zeros(
    (K * S, *[P + limits[0] if a == axis else n for a, n in enumerate(x.shape[1:], 1)]), x.dtype
  )
  cache = KVCache(
    k_NxHkxDhxS=tuple(empty(k, 3) for k, _ in kvs),
    v_NxHkxSxDh=tuple(empty(v, 2) for _, v in kvs),
    valid_NxS=jnp.zeros((K * S, P + limits[0]), bool),
    positions_N=jnp.zeros((K * S,), jnp.int32),
    index=jnp.full((K * S,), P, jnp.int32),
  )
  col0 = lambda x_KxR, fill=0: jnp.pad(
    x_KxR[..., None], ((0, 0), (0, 0), (0, T - 1)), constant_values=fill
  )
  s = SlotState(
    cache=cache,
    row_KxS=jnp.full((K, S), R, jnp.int32),
    t_KxS=jnp.ones((K, S), jnp.int32),
    last_KxS=jnp.zeros((K, S), jnp.int32),
    next_K=jnp.zeros((K,), jnp.int32),
    steps=jnp.asarray(0, jnp.int32),
    tokens_KxRxT=col0(token0_KxR, pad_id),
    mask_KxRxT=col0(jnp.ones((K, R), jnp.int32)),
    logps_KxRxT=col0(blk(logp0_N)),
    done_KxR=stop0_KxR,
  )
  s = admit(s)
  for limit in limits:  # a slot's token t is fed at column P + t - 1 < P + limit
    s = s.replace(cache=grow(s.cache, P + limit))
    fits = lambda s, limit=limit: jnp.all(jnp.where(s.row_KxS < R, s.t_KxS, 0) < limit)
    cond = lambda s, fits=fits: jnp.any(s.row_KxS < R) & fits(s)
    s = jax.lax.while_loop(cond, lambda s: admit(decode(s)), s)
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
