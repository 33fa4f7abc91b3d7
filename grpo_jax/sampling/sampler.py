"""Batched autoregressive sampling: one prefill, then ``lax.while_loop``s over a static cache
that grows in doubling steps.

Shape letters: N rows, P prompt slots (left-padded), T = max_new_tokens, V vocab.
"""

from __future__ import annotations

import functools

import flax.struct
import jax
import jax.numpy as jnp
from flax import nnx

from grpo_jax.models.transformer import compute_params
from grpo_jax.sampling import continuous
from grpo_jax.sampling.kv_cache import KVCache, decode_step, grow, prefill
from grpo_jax.sampling.next_token import sample_next_token
from grpo_jax.sampling.steps import (
  Decode,
  SampleOutput,
  cache_buckets,
  is_stop,
  step_uniforms,
)


@flax.struct.dataclass
class DecodeState:
  """The while-loop carry: column ``t`` of the outputs is written next."""

  t: jax.Array  # int32 scalar
  last_token_N: jax.Array  # the token fed to the next decode step
  done_N: jax.Array  # bool: the row has emitted EOS
  cache: KVCache
  tokens_NxT: jax.Array
  mask_NxT: jax.Array
  logps_NxT: jax.Array


def _emit(state: DecodeState, logits_NxV, uniform_TxN, decode: Decode):
  """Samples token t for every row and records it; finished rows get pad_id, mask 0, logp 0."""
  uniform_N = jax.lax.dynamic_index_in_dim(uniform_TxN, state.t, 0, keepdims=False)
  d = decode
  token_N, logp_N = sample_next_token(uniform_N, logits_NxV, d.temperature, d.top_k, d.top_p)
  live_N = ~state.done_N
  token_N = jnp.where(live_N, token_N, d.pad_id)
  stopped_N = is_stop(token_N, d.eos_id)
  logp_N = jnp.where(live_N, logp_N, 0.0)
  put = lambda buf, col: jax.lax.dynamic_update_index_in_dim(buf, col.astype(buf.dtype), state.t, 1)
  return state.replace(
    t=state.t + 1,
    # Finished rows keep decoding (fixed shapes); feed them token 0, a valid id whatever
    # pad_id is.
    last_token_N=jnp.where(live_N, token_N, 0),
    done_N=state.done_N | (live_N & stopped_N),
    tokens_NxT=put(state.tokens_NxT, token_N),
    mask_NxT=put(state.mask_NxT, live_N),
    logps_NxT=put(state.logps_NxT, logp_N),
  )


@functools.partial(jax.jit, static_argnames=("graphdef", "decode"))
def _sample_jit(params, prompt_NxP, prompt_mask_NxP, rng, *, graphdef, decode: Decode):
  # Every decode step reads the weights in the compute dtype (float32 masters → one bf16 copy,
  # made once here): the bytes a memory-bound step moves are halved.
  dtype = nnx.merge(graphdef, params).cfg.compute_dtype
  model = nnx.merge(graphdef, compute_params(params, dtype))
  N, P = prompt_NxP.shape
  T, pad_id = decode.max_new_tokens, decode.pad_id
  emit = functools.partial(_emit, uniform_TxN=step_uniforms(rng, T, N), decode=decode)
  limits = cache_buckets(T, decode.first_bucket)
  share = decode.prompt_share
  logits_NxV, cache = prefill(model, prompt_NxP, prompt_mask_NxP, P + limits[0], share)
  state = DecodeState(
    t=jnp.asarray(0, jnp.int32),
    last_token_N=jnp.zeros((N,), jnp.int32),
    done_N=jnp.zeros((N,), bool),
    cache=cache,
    tokens_NxT=jnp.full((N, T), pad_id, jnp.int32),
    mask_NxT=jnp.zeros((N, T), jnp.int32),
    logps_NxT=jnp.zeros((N, T), jnp.float32),
  )
  # Token 0 comes from the prefill logits; each loop iteration feeds the previous token and
  # samples the next, so no decode step is wasted after the last token.
  state = emit(state, logits_NxV)

  def body(s: DecodeState):
    logits_NxV, cache = decode_step(model, s.last_token_N, s.cache)
    return emit(s.replace(cache=cache), logits_NxV)

  for limit in limits:  # token t is fed at slot P + t - 1 < P + limit
    state = state.replace(cache=grow(state.cache, P + limit))
    cond = lambda s, limit=limit: (s.t < limit) & ~jnp.all(s.done_N)
    state = jax.lax.while_loop(cond, body, state)
  return SampleOutput(
    tokens_NxT=state.tokens_NxT,
    mask_NxT=state.mask_NxT,
    logps_NxT=state.logps_NxT,
    lengths_N=jnp.sum(state.mask_NxT, axis=1),
    truncated_N=~state.done_N,
    decode_steps=state.t - 1,  # token 0 came from the prefill
  )


def sample(
  graphdef: nnx.GraphDef,
  params: dict,
  prompt_NxP: jax.Array,
  prompt_mask_NxP: jax.Array,
  rng: jax.Array,
  decode: Decode,
) -> SampleOutput:
  """Samples up to ``decode.max_new_tokens`` tokens after each LEFT-padded prompt
  (:class:`~grpo_jax.sampling.steps.Decode`: stop ids, pad id, temperature, truncation, cache
  growth, shared prompts, continuous batching).

  One jitted program (compiled once per graphdef, shapes and ``decode``): a prefill over the
  prompt, then ``lax.while_loop``s of single-token decode steps over a static KV cache that
  grows from P + ``first_bucket`` to P + T slots, stopping early once every row has stopped.
  ``truncated_N`` means "no stop id". Log-probs are under log softmax(logits / τ) *before*
  truncation, i.e. what ``models.token_logps`` recomputes on prompt + completion (METHODS §4
  statement 16); with top-k/top-p on, the tokens come from the truncated distribution, so the
  rollouts are off-policy w.r.t. those log-probs (importance ratios are then biased; keep
  truncation off for training). The cache's growth steps give the same tokens as one static
  cache. Prompt arrays may be sharded over a mesh's batch axis (params replicated); the outputs
  follow the batch sharding. Every row needs at least one real prompt token.

  ``decode.decode_slots`` S in (0, N): continuous batching (``continuous.py``): S rows decode at
  a time and a stopped row's slot takes the next waiting row (with a copy of its prompt's keys
  and values, all prefilled first). Same outputs, row for row, up to rounding.
  """
  fn = program(decode, prompt_NxP.shape[0])
  return fn(params, prompt_NxP, prompt_mask_NxP, rng, graphdef=graphdef, decode=decode)


def program(decode: Decode, num_rows: int):
  """The jitted sampler program :func:`sample` runs for ``num_rows`` rows under ``decode``
  (``fn(params, prompt_NxP, prompt_mask_NxP, rng, *, graphdef, decode)``), its settings
  checked: one batch over a growing cache, or continuous batching."""
  N = num_rows
  if N % decode.prompt_share:
    raise ValueError(f"prompt_share = {decode.prompt_share} must be >= 1 and divide the rows")
  if 0 < decode.decode_slots < N:
    continuous.check_slots(N, decode.decode_slots, decode.row_blocks)
    if decode.prompt_share > 1 and (N // decode.row_blocks) % decode.prompt_share:
      raise ValueError(f"prompt_share = {decode.prompt_share} must divide each block's rows")
    return continuous._continuous_jit
  return _sample_jit
