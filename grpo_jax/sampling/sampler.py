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
  FIRST_BUCKET,
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


def _emit(
  state: DecodeState, logits_NxV, uniform_TxN, *, eos_id, pad_id, temperature, top_k, top_p
):
  """Samples token t for every row and records it; finished rows get pad_id, mask 0, logp 0."""
  uniform_N = jax.lax.dynamic_index_in_dim(uniform_TxN, state.t, 0, keepdims=False)
  token_N, logp_N = sample_next_token(uniform_N, logits_NxV, temperature, top_k, top_p)
  live_N = ~state.done_N
  token_N = jnp.where(live_N, token_N, pad_id)
  stopped_N = is_stop(token_N, eos_id)
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


@functools.partial(
  jax.jit,
  static_argnames=(
    "graphdef",
    "max_new_tokens",
    "eos_id",
    "pad_id",
    "temperature",
    "top_k",
    "top_p",
    "first_bucket",
    "prompt_share",
  ),
)
def _sample_jit(
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
  first_bucket,
  prompt_share,
) -> SampleOutput:
  # Every decode step reads the weights in the compute dtype (float32 masters → one bf16 copy,
  # made once here): the bytes a memory-bound step moves are halved.
  dtype = nnx.merge(graphdef, params).cfg.compute_dtype
  model = nnx.merge(graphdef, compute_params(params, dtype))
  N, P = prompt_NxP.shape
  T = max_new_tokens
  emit = functools.partial(
    _emit,
    uniform_TxN=step_uniforms(rng, T, N),
    eos_id=eos_id,
    pad_id=pad_id,
    temperature=temperature,
    top_k=top_k,
    top_p=top_p,
  )
  limits = cache_buckets(T, first_bucket)
  logits_NxV, cache = prefill(model, prompt_NxP, prompt_mask_NxP, P + limits[0], prompt_share)
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
  *,
  max_new_tokens: int,
  eos_id: int | tuple[int, ...],
  pad_id: int,
  temperature: float = 1.0,
  top_k: int = 0,
  top_p: float = 1.0,
  first_bucket: int = FIRST_BUCKET,
  prompt_share: int = 1,
  decode_slots: int = 0,
  row_blocks: int = 1,
) -> SampleOutput:
  """Samples up to ``max_new_tokens`` tokens after each LEFT-padded prompt.

  One jitted program (compiled once per graphdef, shapes and settings): a prefill over the
  prompt, then ``lax.while_loop``s of single-token decode steps over a static KV cache that
  grows from P + ``first_bucket`` to P + T slots, stopping early once every row has emitted
  ``eos_id``. ``eos_id`` may be a tuple
  of stop ids: a row stops at the first of any of them (kept, mask 1), as the strategy sampler's
  previews stop at a delimiter (``truncated_N`` then means "no stop id"). ``temperature == 0`` is
  greedy (its log-probs are then under τ = 1); ``top_k = 0`` and ``top_p = 1.0`` switch
  truncation off. Log-probs are under log softmax(logits / τ) *before* truncation, i.e. what
  ``models.token_logps`` recomputes on prompt + completion (METHODS §4 statement 16); with
  top-k/top-p on, the tokens come from the truncated distribution, so the rollouts are
  off-policy w.r.t. those log-probs (importance ratios are then biased; keep truncation off for
  training). ``first_bucket``: the cache starts at P + first_bucket slots and doubles (see
  ``FIRST_BUCKET``); 0 keeps one static cache of P + T slots. Same tokens either way.
  ``prompt_share`` > 1: the rows come in aligned runs of that many identical prompts (the G
  samples of one prompt), and each run's prompt is prefilled once (``kv_cache.prefill``).
  Prompt arrays may be sharded over a mesh's batch axis (params replicated); the outputs
  follow the batch sharding. Every row needs at least one real prompt token.

  ``decode_slots`` S in (0, N): continuous batching (``continuous.py``): S rows decode at a
  time and a stopped row's slot takes the next waiting row (with a copy of its prompt's keys
  and values, all prefilled first); the rows form ``row_blocks`` equal consecutive blocks (one
  per device of the mesh's batch axes), each with S / row_blocks slots of its own. Same
  outputs, row for row, up to rounding. 0, or S ≥ N: the loop above.
  """
  if max_new_tokens < 1:
    raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
  if prompt_share < 1 or prompt_NxP.shape[0] % prompt_share:
    raise ValueError(f"prompt_share = {prompt_share} must be >= 1 and divide the rows")
  if decode_slots < 0:
    raise ValueError(f"decode_slots = {decode_slots} must be >= 0")
  if temperature < 0 or not 0.0 < top_p <= 1.0 or top_k < 0:
    raise ValueError(
      f"bad sampling settings: temperature={temperature}, top_k={top_k}, top_p={top_p}"
    )
  settings = dict(
    graphdef=graphdef,
    max_new_tokens=int(max_new_tokens),
    eos_id=tuple(int(i) for i in eos_id) if isinstance(eos_id, tuple | list) else int(eos_id),
    pad_id=int(pad_id),
    temperature=float(temperature),
    top_k=int(top_k),
    top_p=float(top_p),
    prompt_share=int(prompt_share),
  )
  N = prompt_NxP.shape[0]
  if 0 < decode_slots < N:
    continuous.check_slots(N, decode_slots, row_blocks)
    if prompt_share > 1 and (N // row_blocks) % prompt_share:
      raise ValueError(f"prompt_share = {prompt_share} must divide each block's rows")
    return continuous._continuous_jit(
      params,
      prompt_NxP,
      prompt_mask_NxP,
      rng,
      num_slots=int(decode_slots),
      blocks=int(row_blocks),
      first_bucket=int(first_bucket),
      **settings,
    )
  return _sample_jit(
    params,
    prompt_NxP,
    prompt_mask_NxP,
    rng,
    first_bucket=int(first_bucket),
    **settings,
  )
