"""The continuous-batching sampler against the plain one: same tokens, masks, log-probs, stops
(row for row), log-probs = the trainer's recomputation, the decode steps its host schedule
predicts, and the same under a mesh and with shared prompts."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from grpo_jax import models, sampling
from grpo_jax import sharding as shard_lib
from grpo_jax.sampling import waste
from tests.support.sampling import left_padded_prompts

CFG = models.PRESETS["test"]  # vocab 64, 2 layers
V, PAD = CFG.vocab_size, 0
STOPS = (3, 7, 11, 19)  # four stop ids of 64: rows stop after ~16 tokens, some never (T = 24)
token_logps = jax.jit(models.token_logps, static_argnums=(0, 4))


@pytest.fixture(scope="module")
def model():
  return models.init_params(CFG, 0)


def _sample(model, prompts, key=1, **kw):
  kw = {"max_new_tokens": 24, "eos_id": STOPS, "pad_id": PAD, "temperature": 1.0, **kw}
  return sampling.sample(*model, *prompts, jax.random.key(key), sampling.Decode(**kw))


def _assert_same_rows(plain, cont, max_rows_off=0):
  """Equal tokens / masks / stops, log-probs to 1e-5, on all rows but ``max_rows_off``.

  The programs differ in shape (S slots, P + T cache columns), so logits differ in the last
  bits; a token flips only if its uniform lies within that of a CDF edge (p ≈ 1e-6 a draw)."""
  tokens = lambda o: np.asarray(o.tokens_NxT)
  same_N = np.all(tokens(plain) == tokens(cont), axis=1)
  assert np.sum(~same_N) <= max_rows_off
  for field in ("mask_NxT", "lengths_N", "truncated_N"):
    np.testing.assert_array_equal(
      np.asarray(getattr(cont, field))[same_N], np.asarray(getattr(plain, field))[same_N]
    )
  np.testing.assert_allclose(cont.logps_NxT[same_N], plain.logps_NxT[same_N], atol=1e-5)


@pytest.mark.parametrize(
  "kw",
  [
    dict(decode_slots=8),
    dict(decode_slots=8, temperature=0.7, top_k=20, top_p=0.9, first_bucket=8),
    dict(decode_slots=5, temperature=0.0, first_bucket=0),
    dict(decode_slots=12, eos_id=7, max_new_tokens=9),
  ],
)
def test_same_rows_as_the_plain_sampler(model, kw):
  prompts = left_padded_prompts(32, 6, V, PAD, seed=5)
  plain_kw = {k: v for k, v in kw.items() if k != "decode_slots"}
  plain, cont = _sample(model, prompts, **plain_kw), _sample(model, prompts, **kw)
  lengths = np.asarray(plain.lengths_N)
  assert lengths.min() < lengths.max()  # rows stop at different steps: slots are refilled
  _assert_same_rows(plain, cont, max_rows_off=1)
  assert int(plain.decode_steps) == waste.plain_steps(lengths)
  assert int(cont.decode_steps) == waste.continuous_steps(lengths, kw["decode_slots"])


def test_logps_match_token_logps_and_bookkeeping(model):
  prompt_NxP, mask_NxP = left_padded_prompts(24, 5, V, PAD, seed=3)
  out = _sample(model, (prompt_NxP, mask_NxP), decode_slots=6, temperature=0.8)
  tokens = jnp.concatenate([prompt_NxP, out.tokens_NxT], 1)
  mask = jnp.concatenate([mask_NxP, out.mask_NxT], 1)
  recomputed_NxT = token_logps(*model, tokens, mask, 0.8)[:, 5:]
  m = np.asarray(out.mask_NxT, bool)
  np.testing.assert_allclose(np.asarray(out.logps_NxT)[m], np.asarray(recomputed_NxT)[m], atol=1e-4)
  tokens_NxT, logps_NxT = np.asarray(out.tokens_NxT), np.asarray(out.logps_NxT)
  for n in range(24):
    hits = np.flatnonzero(np.isin(tokens_NxT[n], STOPS))
    end = hits[0] + 1 if len(hits) else 24
    np.testing.assert_array_equal(m[n], np.arange(24) < end)
    assert np.all(tokens_NxT[n, end:] == PAD) and np.all(logps_NxT[n, end:] == 0)
    assert bool(out.truncated_N[n]) == (len(hits) == 0)
  assert 0 < int(np.sum(out.truncated_N)) < 24


def test_fewer_slots_change_the_steps_not_the_rows(model):
  prompts = left_padded_prompts(32, 6, V, PAD, seed=5)
  four, sixteen = (_sample(model, prompts, decode_slots=s, first_bucket=8) for s in (4, 16))
  _assert_same_rows(four, sixteen)
  lengths = np.asarray(four.lengths_N)
  assert int(four.decode_steps) == waste.continuous_steps(lengths, 4) > int(sixteen.decode_steps)


def test_shared_prompts_and_first_token_stops(model):
  """Groups of 4 rows share a prompt (prefilled once per group); with T = 1 every row stops at
  its first token and none takes a slot (token 0 is the plain sampler's first column: the
  same logits and uniform_TxN[0])."""
  p, m = left_padded_prompts(8, 6, V, PAD, seed=2)
  prompts = (jnp.repeat(p, 4, 0), jnp.repeat(m, 4, 0))
  plain = _sample(model, prompts, prompt_share=4)
  _assert_same_rows(plain, _sample(model, prompts, prompt_share=4, decode_slots=8), 1)
  first = _sample(model, prompts, max_new_tokens=1, decode_slots=8)
  np.testing.assert_array_equal(first.tokens_NxT[:, 0], plain.tokens_NxT[:, 0])
  np.testing.assert_allclose(first.logps_NxT[:, 0], plain.logps_NxT[:, 0], atol=1e-5)
  assert bool(jnp.all(first.mask_NxT == 1)) and int(first.decode_steps) == 0


def test_row_blocks_under_a_mesh(model):
  """Rows over a (data 4, fsdp 2) mesh, one block of rows and slots per device: the rows of the
  single-device sampler, the steps of the per-block schedule."""
  devices = jax.devices()
  assert len(devices) == 8, "tests/plugin.py provides 8 simulated CPU devices"
  prompt_NxP, mask_NxP = left_padded_prompts(32, 6, V, PAD, seed=5)
  plain = _sample(model, (prompt_NxP, mask_NxP))
  mesh = Mesh(np.array(devices).reshape(4, 2), ("data", "fsdp"))
  rows = NamedSharding(mesh, PartitionSpec(("data", "fsdp")))
  graphdef, params = model
  params = jax.device_put(params, NamedSharding(mesh, PartitionSpec()))
  kw = dict(max_new_tokens=24, eos_id=STOPS, pad_id=PAD, decode_slots=16)
  out = shard_lib.under_mesh(sampling.sample, mesh)(
    graphdef,
    params,
    jax.device_put(prompt_NxP, rows),
    jax.device_put(mask_NxP, rows),
    jax.random.key(1),
    sampling.Decode(row_blocks=8, **kw),
  )
  assert out.tokens_NxT.sharding.is_equivalent_to(rows, 2)
  _assert_same_rows(plain, out, max_rows_off=1)
  lengths = np.asarray(plain.lengths_N)
  assert int(out.decode_steps) == waste.continuous_steps(lengths, 16, blocks=8)
  with pytest.raises(ValueError, match="sampling.decode_slots = 12"):
    sampling.sample(
      graphdef,
      params,
      prompt_NxP,
      mask_NxP,
      jax.random.key(1),
      sampling.Decode(**{**kw, "decode_slots": 12}, row_blocks=8),
    )
