"""Chunked log-probs under tensor parallelism (8 simulated CPU devices, fsdp 2 × tensor 4): the
chunks are cut inside each device's slice of the vocabulary, so they cover every id once, give
the single-device log-probs and gradients, and the compiled program gathers no slice of the
unembedding (cutting V into runs of C columns across the slices' boundaries did). A vocabulary
the tensor axis does not divide keeps W whole there, and each device still computes only its
quarter of every chunk."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import models
from grpo_jax import sharding as shard_lib
from grpo_jax.models import chunked_logps
from grpo_jax.planning import hlo

V, D, CHUNK = 1000, 32, 96  # 1000 / 4 = 250 rows a slice; 96 / 4 = 24 a slice's piece: padded


@pytest.mark.parametrize("t", [1, 2, 4, 8, 3, 7])  # 3 and 7 do not divide V: padded slices
def test_chunks_cover_every_id_once_with_its_row(t):
  w_VxD = jnp.arange(V * 3, dtype=jnp.float32).reshape(V, 3) + 1.0
  w, ids, valid = chunked_logps.chunk_unembedding(w_VxD, CHUNK, t)
  K, C, _ = w.shape
  Vs = -(-V // t)
  assert C == t * -(-CHUNK // t) and K == -(-Vs // (C // t))
  assert sorted(np.asarray(ids)[np.asarray(valid)].tolist()) == list(range(V))
  rows = np.asarray(w)[np.asarray(valid)]
  np.testing.assert_array_equal(rows, np.asarray(w_VxD)[np.asarray(ids)[np.asarray(valid)]])
  np.testing.assert_array_equal(np.asarray(w)[~np.asarray(valid)], 0.0)
  # slice j's piece of chunk k: columns j·C/t … (j+1)·C/t − 1 hold ids of slice j only
  slice_of = np.asarray(ids).reshape(K, t, C // t) // Vs
  valid_t = np.asarray(valid).reshape(K, t, C // t)
  assert all((slice_of[:, j][valid_t[:, j]] == j).all() for j in range(t))


def _setup(tie: bool, vocab: int = V):
  cfg = models.ModelConfig(
    vocab_size=vocab,
    hidden_dim=D,
    num_layers=1,
    num_heads=4,
    num_kv_heads=4,
    head_dim=8,
    mlp_dim=64,
    tie_embeddings=tie,
  )
  graphdef, params = models.init_params(cfg, 0)
  rng = np.random.default_rng(0)
  tokens = jnp.asarray(rng.integers(0, vocab, (4, 16)), jnp.int32)
  mask = jnp.ones((4, 16), jnp.int32)
  mesh = shard_lib.make_mesh(types.SimpleNamespace(data=1, fsdp=2, tensor=4), jax.devices()[:8])
  return graphdef, params, tokens, mask, mesh


def _unembedding_gathers(compiled_text: str, rows: int) -> int:
  """All-gathers whose result has at least ``rows`` rows of width D (a slice of W or more)."""
  comps = hlo.parse_module(compiled_text)
  found = 0
  for comp in comps.values():
    for inst in comp.instructions:
      if inst.opcode.startswith("all-gather"):
        dims = hlo.array_dims(inst.type)
        found += len(dims) >= 2 and dims[-1] == D and dims[-2] >= rows
  return found


@pytest.mark.parametrize("tie", [False, True], ids=["lm_head", "tied"])
def test_sharded_logps_equal_one_device_and_gather_no_unembedding(monkeypatch, tie):
  assert len(jax.devices()) >= 8
  graphdef, params, tokens, mask, mesh = _setup(tie)
  fn = chunked_logps.chunked_token_logps(CHUNK)
  loss = lambda p: jnp.sum(fn(graphdef, p, tokens, mask, 0.7) * mask)
  single, g_single = jax.jit(jax.value_and_grad(loss))(params)
  shardings = shard_lib.state_shardings(params, mesh, "train")
  w = shardings["embed_tokens"]["embedding"] if tie else shardings["lm_head"]["kernel"]
  assert "tensor" in tuple(w.spec)  # W's vocabulary is split
  placed = jax.device_put(params, shardings)
  program = jax.jit(jax.value_and_grad(loss), in_shardings=(shardings,))
  with jax.set_mesh(mesh):
    value, grads = program(placed)
    text = program.lower(placed).compile().as_text()
  np.testing.assert_allclose(value, single, rtol=1e-5)
  for a, b in zip(jax.tree.leaves(g_single), jax.tree.leaves(grads)):
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-5)
  assert _unembedding_gathers(text, CHUNK // 4 + 1) == 0
  # Runs of C columns across the slices' boundaries (t = 1 under the same mesh) gather W.
  monkeypatch.setattr(chunked_logps, "vocab_shards", lambda V: ((), 1))
  with jax.set_mesh(mesh):
    text_runs = jax.jit(jax.value_and_grad(loss), in_shardings=(shardings,)).lower(placed)
    text_runs = text_runs.compile().as_text()
  assert _unembedding_gathers(text_runs, CHUNK // 4 + 1) > 0


@pytest.mark.parametrize("tie", [False, True], ids=["lm_head", "tied"])
def test_indivisible_vocabulary_splits_the_chunks_not_w(monkeypatch, tie):
  vocab = V + 2  # 1002: tensor 4 does not divide it, so W is whole over the tensor axis
  graphdef, params, tokens, mask, mesh = _setup(tie, vocab)
  fn = chunked_logps.chunked_token_logps(CHUNK)
  loss = lambda p: jnp.sum(fn(graphdef, p, tokens, mask, 0.7) * mask)
  single, g_single = jax.jit(jax.value_and_grad(loss))(params)
  shardings = shard_lib.state_shardings(params, mesh, "train")
  w = shardings["embed_tokens"]["embedding"] if tie else shardings["lm_head"]["kernel"]
  assert "tensor" not in tuple(w.spec)
  placed = jax.device_put(params, shardings)

  def compiled():
    program = jax.jit(jax.value_and_grad(loss), in_shardings=(shardings,))
    with jax.set_mesh(mesh):
      return program(placed), program.lower(placed).compile().as_text()

  (value, grads), text = compiled()
  np.testing.assert_allclose(value, single, rtol=1e-5)
  for a, b in zip(jax.tree.leaves(g_single), jax.tree.leaves(grads)):
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-5)
  # Each device's unembedding matmuls (the scans' bodies: the only matmuls that run K times)
  # are a quarter of each chunk's columns: forward, its recomputation, dW and dh, each
  # 2 · 30 rows (this device's 2 sequences × 15 positions) · C/4 · D, in K chunks.
  slice_rows, rows = -(-vocab // 4), 2 * 15  # 251 of a slice (the last padded by 2)
  K = -(-slice_rows // (CHUNK // 4))
  per_matmul = 2 * rows * (CHUNK // 4) * D
  assert _looped_matmul_flops(text, K) == 4 * K * per_matmul
  # The chunks as V's runs (t = 1): dW and dh are computed whole on every tensor device.
  monkeypatch.setattr(chunked_logps, "vocab_shards", lambda V: ((), 1))
  _, text_whole = compiled()
  assert _looped_matmul_flops(text_whole, K) >= 4 * K * per_matmul + 2 * K * 3 * per_matmul


def _looped_matmul_flops(compiled_text: str, trips: int) -> float:
  comps = hlo.parse_module(compiled_text)
  runs, _, _ = hlo.run_counts(comps)
  total = 0.0
  for comp in comps.values():
    if runs.get(comp.name, 0.0) == trips:
      types = comp.types()
      total += trips * sum(hlo.matmul_flops(i, types) for i in comp.instructions)
  return total
