"""The KV-cache sampler: cached logits = full forward, log-probs = trainer recomputation,
EOS/padding bookkeeping, greedy and truncated sampling, RNG behaviour, sharded prompts."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from grpo_jax import models, sampling
from grpo_jax import sharding as shard_lib
from tests.support.sampling import left_padded_prompts

CFG = models.PRESETS["test"]  # vocab 64, hidden 64, 2 layers, 4 heads, 2 kv heads, head_dim 16
V = CFG.vocab_size
PAD = 0
NO_EOS = V + 5  # never sampled: every row runs to max_new_tokens
forward = jax.jit(models.forward, static_argnums=0)
token_logps = jax.jit(models.token_logps, static_argnums=(0, 4))


@pytest.fixture(scope="module")
def model():
  return models.init_params(CFG, 0)


def _prompts(N, P, seed=0):
  return left_padded_prompts(N, P, V, PAD, seed)


def _full(prompt_NxP, prompt_mask_NxP, out):
  return (
    jnp.concatenate([prompt_NxP, out.tokens_NxT], 1),
    jnp.concatenate([prompt_mask_NxP, out.mask_NxT.astype(jnp.int32)], 1),
  )


def test_cached_decoding_matches_full_forward(model):
  graphdef, params = model
  prompt_NxP, mask_NxP = _prompts(4, 6, seed=1)
  steps = 5
  cont_NxT = jnp.asarray(np.random.default_rng(2).integers(0, V, (4, steps)), jnp.int32)

  @jax.jit
  def cached(params, prompt_NxP, mask_NxP, cont_NxT):
    m = nnx.merge(graphdef, params)
    logits, cache = sampling.prefill(m, prompt_NxP, mask_NxP, 6 + steps)
    out = [logits]
    for t in range(steps - 1):
      logits, cache = sampling.decode_step(m, cont_NxT[:, t], cache)
      out.append(logits)
    return jnp.stack(out, 1)

  cached_NxTxV = cached(params, prompt_NxP, mask_NxP, cont_NxT)
  tokens, mask = (
    jnp.concatenate([prompt_NxP, cont_NxT], 1),
    jnp.pad(mask_NxP, ((0, 0), (0, steps)), constant_values=1),
  )
  full_NxLxV = forward(graphdef, params, tokens, mask)
  np.testing.assert_allclose(cached_NxTxV, full_NxLxV[:, 5 : 5 + steps], atol=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampler_logps_match_token_logps(model, temperature):
  graphdef, params = model
  prompt_NxP, mask_NxP = _prompts(8, 5, seed=3)
  out = sampling.sample(
    graphdef,
    params,
    prompt_NxP,
    mask_NxP,
    jax.random.key(0),
    sampling.Decode(max_new_tokens=10, eos_id=7, pad_id=PAD, temperature=temperature),
  )
  tokens, mask = _full(prompt_NxP, mask_NxP, out)
  recomputed_NxT = token_logps(graphdef, params, tokens, mask, temperature)[:, 5:]
  m = out.mask_NxT.astype(bool)
  gap = jnp.abs(recomputed_NxT - out.logps_NxT)
  assert float(jnp.sum(jnp.where(m, gap, 0)) / jnp.sum(m)) < 1e-4
  assert out.logps_NxT.dtype == jnp.float32
  assert bool(jnp.all(jnp.where(m, out.logps_NxT < 0, out.logps_NxT == 0)))


def _check_eos_bookkeeping(out, eos_id, T):
  tokens, mask, logps = (np.asarray(x) for x in (out.tokens_NxT, out.mask_NxT, out.logps_NxT))
  for n in range(tokens.shape[0]):
    hits = np.flatnonzero(tokens[n] == eos_id)
    end = hits[0] + 1 if len(hits) else T  # valid tokens, EOS included
    np.testing.assert_array_equal(mask[n], np.arange(T) < end)
    assert np.all(tokens[n, end:] == PAD) and np.all(logps[n, end:] == 0)
    assert out.lengths_N[n] == end and bool(out.truncated_N[n]) == (len(hits) == 0)


def test_greedy_equals_stepwise_argmax_and_eos_padding(model):
  graphdef, params = model
  prompt_NxP, mask_NxP = _prompts(6, 5, seed=4)
  T = 8
  out = sampling.sample(
    graphdef,
    params,
    prompt_NxP,
    mask_NxP,
    jax.random.key(0),
    sampling.Decode(max_new_tokens=T, eos_id=NO_EOS, pad_id=PAD, temperature=0.0),
  )
  assert bool(jnp.all(out.truncated_N)) and bool(jnp.all(out.mask_NxT == 1))
  logits_NxLxV = forward(graphdef, params, *_full(prompt_NxP, mask_NxP, out))
  np.testing.assert_array_equal(jnp.argmax(logits_NxLxV[:, 4:-1], -1), out.tokens_NxT)
  # Make row 0's third token the EOS: greedy is deterministic, so row 0 now stops at step <= 2
  # and is padded after it; other rows stop wherever that token first appears, if ever.
  eos = int(out.tokens_NxT[0, 2])
  out2 = sampling.sample(
    graphdef,
    params,
    prompt_NxP,
    mask_NxP,
    jax.random.key(0),
    sampling.Decode(max_new_tokens=T, eos_id=eos, pad_id=PAD, temperature=0.0),
  )
  _check_eos_bookkeeping(out2, eos, T)
  assert int(out2.lengths_N[0]) <= 3 and not bool(out2.truncated_N[0])
  keep = np.asarray(out2.mask_NxT) == 1
  np.testing.assert_array_equal(np.asarray(out2.tokens_NxT)[keep], np.asarray(out.tokens_NxT)[keep])


def test_eos_bookkeeping_when_sampling(model):
  graphdef, params = model
  prompt_NxP, mask_NxP = _prompts(32, 4, seed=5)
  T = 24
  out = sampling.sample(
    graphdef,
    params,
    prompt_NxP,
    mask_NxP,
    jax.random.key(1),
    sampling.Decode(max_new_tokens=T, eos_id=7, pad_id=PAD, temperature=1.0),
  )
  _check_eos_bookkeeping(out, 7, T)
  assert 0 < int(jnp.sum(out.truncated_N)) < 32  # some rows stopped early, some did not


@pytest.mark.parametrize("kw", [dict(top_k=1), dict(top_p=1e-6)])
def test_degenerate_truncation_equals_greedy(model, kw):
  graphdef, params = model
  prompt_NxP, mask_NxP = _prompts(6, 5, seed=4)
  common = dict(max_new_tokens=8, eos_id=NO_EOS, pad_id=PAD)
  greedy = sampling.sample(
    graphdef,
    params,
    prompt_NxP,
    mask_NxP,
    jax.random.key(0),
    sampling.Decode(temperature=0.0, **common),
  )
  out = sampling.sample(
    graphdef,
    params,
    prompt_NxP,
    mask_NxP,
    jax.random.key(9),
    sampling.Decode(temperature=1.0, **common, **kw),
  )
  np.testing.assert_array_equal(out.tokens_NxT, greedy.tokens_NxT)


def test_top_k_never_leaves_the_top_k(model):
  graphdef, params = model
  prompt_NxP, mask_NxP = _prompts(64, 4, seed=6)
  k = 3
  out = sampling.sample(
    graphdef,
    params,
    prompt_NxP,
    mask_NxP,
    jax.random.key(2),
    sampling.Decode(max_new_tokens=6, eos_id=NO_EOS, pad_id=PAD, temperature=1.0, top_k=k),
  )
  logits_NxLxV = forward(graphdef, params, *_full(prompt_NxP, mask_NxP, out))[:, 3:-1]
  rank_NxT = jnp.sum(
    logits_NxLxV > jnp.take_along_axis(logits_NxLxV, out.tokens_NxT[..., None], -1), -1
  )
  assert int(jnp.max(rank_NxT)) < k
  assert int(jnp.max(rank_NxT)) > 0  # it does sample, not just take the argmax


@pytest.mark.parametrize("top_k,top_p", [(4, 1.0), (0, 0.7), (5, 0.8)])
def test_truncated_frequencies_follow_renormalised_softmax(top_k, top_p):
  """Many draws from one fixed distribution: support and frequencies of the truncation."""
  probs_V = np.array([0.30, 0.22, 0.15, 0.10, 0.08, 0.06, 0.05, 0.04])
  n = 20_000
  logits_NxV = jnp.tile(jnp.log(jnp.asarray(probs_V, jnp.float32))[None], (n, 1))
  fn = jax.jit(sampling.sample_next_token, static_argnums=(2, 3, 4))
  token_N, logp_N = fn(sampling.row_uniforms(jax.random.key(3), n), logits_NxV, 1.0, top_k, top_p)
  # HF order: top-k first, then top-p on the renormalised top-k distribution.
  keep = np.arange(8) < (top_k or 8)
  renorm_V = np.where(keep, probs_V, 0) / np.sum(np.where(keep, probs_V, 0))
  keep &= (np.cumsum(renorm_V) - renorm_V) < top_p
  target = np.where(keep, probs_V, 0) / np.sum(np.where(keep, probs_V, 0))
  freq = np.bincount(np.asarray(token_N), minlength=8) / n
  assert np.all(freq[~keep] == 0)
  np.testing.assert_allclose(freq, target, atol=0.015)
  # The reported log-prob is of the distribution drawn from: the renormalised truncation.
  np.testing.assert_allclose(logp_N, np.log(target)[np.asarray(token_N)], atol=1e-5)


@pytest.mark.parametrize(
  "top_k, top_p, kept",
  [
    # τ = 2: softmax(logits / 2) = [0.5, 0.25, 0.125, 0.0625, 0.0625]; top-k 3 keeps 0.875.
    (3, 1.0, [0.5 / 0.875, 0.25 / 0.875, 0.125 / 0.875, 0, 0]),
    # top-p 0.7: the masses before each entry are 0, 0.5, 0.75, ...: the first two stay.
    (0, 0.7, [0.5 / 0.75, 0.25 / 0.75, 0, 0, 0]),
    # top-k 4 renormalises to [8, 4, 2, 1] / 15; top-p 0.85 then keeps 8/15 + 4/15 = 0.8 < 0.85
    # before the third: three stay, 14/15 of the mass.
    (4, 0.85, [8 / 14, 4 / 14, 2 / 14, 0, 0]),
  ],
)
def test_a_truncated_draw_returns_the_renormalised_log_prob(top_k, top_p, kept):
  """Hand-computed: logits 2·log2·[3, 2, 1, 0, 0] at τ = 2 are the probabilities
  [8, 4, 2, 1, 1] / 16; each row's uniform picks one kept entry, whose returned log-prob is
  log of its renormalised probability (vLLM's ``processed_logprobs``), not log softmax."""
  logits_V = 2 * np.log(2.0) * np.array([3.0, 2.0, 1.0, 0.0, 0.0], np.float32)
  kept_V = np.array(kept)
  cdf_V = np.cumsum(kept_V)
  n = int(np.sum(kept_V > 0))
  uniform_N = jnp.asarray((np.concatenate([[0.0], cdf_V[: n - 1]]) + cdf_V[:n]) / 2, jnp.float32)
  logits_NxV = jnp.tile(jnp.asarray(logits_V)[None], (n, 1))
  token_N, logp_N = sampling.sample_next_token(uniform_N, logits_NxV, 2.0, top_k, top_p)
  np.testing.assert_array_equal(np.asarray(token_N), np.arange(n))  # mid-CDF: each kept entry
  np.testing.assert_allclose(np.asarray(logp_N), np.log(kept_V[:n]), rtol=1e-6, atol=1e-6)
  untruncated = np.log(np.array([8, 4, 2, 1, 1]) / 16)[:n]
  assert np.all(np.asarray(logp_N) > untruncated + 1e-3)  # the comparison can fail


def test_rng_controls_the_draw(model):
  graphdef, params = model
  prompt_NxP, mask_NxP = _prompts(8, 5, seed=3)
  kw = dict(max_new_tokens=10, eos_id=7, pad_id=PAD, temperature=1.0)
  a = sampling.sample(
    graphdef, params, prompt_NxP, mask_NxP, jax.random.key(0), sampling.Decode(**kw)
  )
  b = sampling.sample(
    graphdef, params, prompt_NxP, mask_NxP, jax.random.key(0), sampling.Decode(**kw)
  )
  c = sampling.sample(
    graphdef, params, prompt_NxP, mask_NxP, jax.random.key(1), sampling.Decode(**kw)
  )
  np.testing.assert_array_equal(a.tokens_NxT, b.tokens_NxT)
  assert not np.array_equal(a.tokens_NxT, c.tokens_NxT)


def test_compiled_once_and_pad_id_is_only_a_filler(model):
  graphdef, params = model
  kw = dict(max_new_tokens=24, eos_id=7, temperature=1.0)  # as test_eos_bookkeeping_when_sampling
  prompt_NxP, mask_NxP = _prompts(32, 4, seed=5)
  out = sampling.sample(
    graphdef, params, prompt_NxP, mask_NxP, jax.random.key(1), sampling.Decode(pad_id=PAD, **kw)
  )
  assert 0 < int(jnp.sum(out.truncated_N)) < 32  # EOS hit by some rows: padding is exercised
  compiled = sampling.sampler._sample_jit._cache_size()
  # New params (and an equal, freshly built graphdef), prompts and key: no recompilation.
  graphdef2, params2 = models.init_params(CFG, 1)
  other_NxP, other_mask_NxP = _prompts(32, 4, seed=6)
  sampling.sample(
    graphdef2,
    params2,
    other_NxP,
    other_mask_NxP,
    jax.random.key(5),
    sampling.Decode(pad_id=PAD, **kw),
  )
  assert sampling.sampler._sample_jit._cache_size() == compiled
  # pad_id = -1 (outside the vocabulary) in the prompt and the output changes nothing else.
  out_neg = sampling.sample(
    graphdef,
    params,
    jnp.where(mask_NxP == 1, prompt_NxP, -1),
    mask_NxP,
    jax.random.key(1),
    sampling.Decode(pad_id=-1, **kw),
  )
  m = out.mask_NxT == 1
  np.testing.assert_array_equal(out_neg.mask_NxT, out.mask_NxT)
  np.testing.assert_array_equal(out_neg.tokens_NxT, jnp.where(m, out.tokens_NxT, -1))
  # pad_id is static: another compiled program, so its log-probs agree up to rounding.
  np.testing.assert_allclose(out_neg.logps_NxT, out.logps_NxT, rtol=1e-6, atol=1e-6)


def test_sharded_prompts_give_the_same_samples(model):
  """Prompts sharded over the batch axes of a (data, fsdp) mesh, params replicated."""
  devices = jax.devices()
  assert len(devices) == 8, "tests/plugin.py provides 8 simulated CPU devices"
  graphdef, params = model
  prompt_NxP, mask_NxP = _prompts(16, 5, seed=7)
  kw = dict(max_new_tokens=6, eos_id=7, pad_id=PAD, temperature=1.0)
  ref = sampling.sample(
    graphdef, params, prompt_NxP, mask_NxP, jax.random.key(0), sampling.Decode(**kw)
  )
  mesh = Mesh(np.array(devices).reshape(4, 2), ("data", "fsdp"))
  rows = NamedSharding(mesh, PartitionSpec(("data", "fsdp")))
  params = jax.device_put(params, NamedSharding(mesh, PartitionSpec()))
  out = sampling.sample(
    graphdef,
    params,
    jax.device_put(prompt_NxP, rows),
    jax.device_put(mask_NxP, rows),
    jax.random.key(0),
    sampling.Decode(**kw),
  )
  assert out.tokens_NxT.sharding.is_equivalent_to(rows, 2)
  np.testing.assert_array_equal(out.tokens_NxT, ref.tokens_NxT)
  np.testing.assert_allclose(out.logps_NxT, ref.logps_NxT, atol=1e-5)


def test_rejects_bad_settings(model):
  graphdef, params = model
  prompt_NxP, mask_NxP = _prompts(2, 3)
  with pytest.raises(ValueError):
    sampling.sample(
      graphdef,
      params,
      prompt_NxP,
      mask_NxP,
      jax.random.key(0),
      sampling.Decode(max_new_tokens=0, eos_id=1, pad_id=0),
    )
  with pytest.raises(ValueError):
    sampling.sample(
      graphdef,
      params,
      prompt_NxP,
      mask_NxP,
      jax.random.key(0),
      sampling.Decode(max_new_tokens=2, eos_id=1, pad_id=0, top_p=0.0),
    )


def test_kv_cache_is_laid_out_by_the_sampling_rules_under_a_mesh(model):
  """Under a 2×2×2 (data, fsdp, tensor) mesh the cache's rows go over data × fsdp and its kv
  heads over tensor (``sharding_rules.KV_CACHE_KEYS`` / ``_VALUES``); sampling there gives the
  single-device tokens."""
  graphdef, params = model
  prompt_NxP, mask_NxP = _prompts(8, 5, seed=3)
  kw = dict(max_new_tokens=6, eos_id=7, pad_id=PAD, temperature=1.0)
  ref = sampling.sample(
    graphdef, params, prompt_NxP, mask_NxP, jax.random.key(1), sampling.Decode(**kw)
  )
  mesh = Mesh(np.array(jax.devices()).reshape(2, 2, 2), shard_lib.AXES)
  rows = NamedSharding(mesh, PartitionSpec(("data", "fsdp")))
  params = jax.device_put(params, NamedSharding(mesh, PartitionSpec()))
  prompt, mask = jax.device_put(prompt_NxP, rows), jax.device_put(mask_NxP, rows)

  @jax.jit
  def cache_of(params, prompt, mask):
    return sampling.prefill(nnx.merge(graphdef, params), prompt, mask, 9)[1]

  cache = shard_lib.under_mesh(cache_of, mesh)(params, prompt, mask)
  heads = PartitionSpec(("data", "fsdp"), "tensor")
  assert cache.k_NxHkxDhxS[0].sharding.is_equivalent_to(NamedSharding(mesh, heads), 4)
  assert cache.v_NxHkxSxDh[1].sharding.is_equivalent_to(NamedSharding(mesh, heads), 4)
  assert cache.valid_NxS.sharding.is_equivalent_to(rows, 2)
  out = shard_lib.under_mesh(sampling.sample, mesh)(
    graphdef, params, prompt, mask, jax.random.key(1), sampling.Decode(**kw)
  )
  np.testing.assert_array_equal(out.tokens_NxT, ref.tokens_NxT)
  np.testing.assert_allclose(out.logps_NxT, ref.logps_NxT, atol=1e-5)
