"""Padding-free packing (``loss.pack``; ``models/packing.py``, ``models/pack_plan.py``,
``train/packing.py``): the packed rows of small batches by hand, the attention mask, log-probs
and gradients equal to the padded rows' for every family (a sliding window included), and the
update on packed rows equal to the padded update for every aggregation, the shared prompt,
micro-batches, minibatches and 8 devices; a corrupted packing changes it."""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import models
from grpo_jax.models import pack_plan
from grpo_jax.models.packing import packed_mask
from grpo_jax.train.packing import Packer, cell_rows, cell_size
from tests.support import metrics_doc
from tests.support.length_aware import length_aware, run, short_batch, tiny_loop
from tests.support.models import FAMILIES, small_model

# Four rows, P = 3 prompt slots, T = 3 response slots (0 = padding).
TOKENS = np.array(
  [
    [0, 11, 12, 13, 14, 0],
    [21, 22, 23, 24, 0, 0],
    [0, 0, 31, 32, 33, 34],
    [0, 41, 42, 0, 0, 0],
  ]
)
MASK = (TOKENS > 0).astype(np.int32)


def test_rows_packed_by_hand():
  """Rows 0 and 1 (4 tokens each) fill packed row 0, row 2 starts row 1, row 3 (no response)
  is left out; positions restart per segment and each slot's source is the previous token."""
  plan = pack_plan.plan(MASK, 3, cell=4, share=1, width=8)
  assert plan.rows_needed == 2 and plan.real_tokens() == 12
  p = plan.arrays(TOKENS, cell_rows=2)
  np.testing.assert_array_equal(
    p.tokens_RxW, [[11, 12, 13, 14, 21, 22, 23, 24], [31, 32, 33, 34] + [0] * 4]
  )
  np.testing.assert_array_equal(p.positions_RxW, [[0, 1, 2, 3, 0, 1, 2, 3], [0, 1, 2, 3] + [0] * 4])
  np.testing.assert_array_equal(p.segment_RxW, [[0, 0, 0, 0, 1, 1, 1, 1], [2, 2, 2, 2] + [-1] * 4])
  np.testing.assert_array_equal(p.sub_RxW, [[0, 0, 1, 1, 0, 0, 0, 1], [0, 1, 1, 1] + [0] * 4])
  np.testing.assert_array_equal(p.source_NxT, [[1, 2, 0], [6, 0, 0], [8, 9, 10], [0, 0, 0]])


def test_shared_prompts_packed_by_hand():
  """Runs of 2 rows with one prompt: one segment holds the prompt once and both responses;
  width 4 splits the first run into two segments, each with its own copy of the prompt."""
  tokens = np.array(
    [[0, 11, 12, 13, 14, 0], [0, 11, 12, 15, 0, 0], [0, 0, 31, 32, 33, 34], [0, 0, 31, 35, 0, 0]]
  )
  mask = (tokens > 0).astype(np.int32)
  p = pack_plan.plan(mask, 3, cell=4, share=2, width=8).arrays(tokens, 2)
  np.testing.assert_array_equal(
    p.tokens_RxW, [[11, 12, 13, 14, 15, 0, 0, 0], [31, 32, 33, 34, 35, 0, 0, 0]]
  )
  np.testing.assert_array_equal(p.positions_RxW[:, :5], [[0, 1, 2, 3, 2], [0, 1, 2, 3, 1]])
  np.testing.assert_array_equal(p.sub_RxW[:, :5], [[0, 0, 1, 1, 2], [0, 1, 1, 1, 2]])
  np.testing.assert_array_equal(p.source_NxT, [[1, 2, 0], [1, 0, 0], [8, 9, 10], [8, 0, 0]])
  # Row 1's token 15 (slot 4) reads the prompt and itself, not its sibling's 13, 14.
  mask_WxW = np.asarray(packed_mask(jnp.asarray(p.segment_RxW), jnp.asarray(p.sub_RxW)))[0]
  np.testing.assert_array_equal(mask_WxW[4], [1, 1, 0, 0, 1, 0, 0, 0])
  np.testing.assert_array_equal(mask_WxW[5], [0] * 8)  # an empty slot reads nothing
  narrow = pack_plan.plan(mask, 3, cell=4, share=2, width=4)
  assert [len(row) for row in narrow.bins[0]] == [1, 1, 1, 1]
  assert [s.rows for row in narrow.bins[0] for s in row] == [(0,), (2,), (1,), (3,)]


def test_bad_rows_and_cells_fail():
  holed = MASK.copy()
  holed[0, 4] = 0
  holed[0, 5] = 1
  with pytest.raises(ValueError, match="row 0's real tokens are not"):
    pack_plan.plan(holed, 3, 4, 1, 8)
  with pytest.raises(ValueError, match="row 0 has 4 real tokens, over width 3"):
    pack_plan.plan(MASK, 3, 4, 1, 3)
  with pytest.raises(ValueError, match="cells of 3 rows"):
    pack_plan.plan(MASK, 3, 3, 1, 8)
  with pytest.raises(ValueError, match="cell_rows = 1 < the 2"):
    pack_plan.plan(MASK, 3, 4, 1, 8).arrays(TOKENS, 1)


def test_cells_follow_every_split_of_the_rows():
  loss = lambda micro=0, minibatches=1: SimpleNamespace(
    micro_batch_size=micro, num_minibatches=minibatches
  )
  assert cell_size(64, loss(), 1) == 64
  assert cell_size(64, loss(micro=16), 1) == 16
  assert cell_size(64, loss(micro=16), 8) == 2  # 16 rows a part over 8 devices
  assert cell_size(64, loss(minibatches=4), 2) == 8  # 16 a minibatch, 8 a device
  assert cell_size(48, loss(micro=12), 8) == 6  # 4 parts of 12 rows: not 8 device blocks
  assert [cell_rows(n, 64) for n in (1, 8, 9, 33, 64)] == [8, 8, 16, 40, 64]
  assert [cell_rows(n, 5) for n in (0, 3)] == [1, 3]


def _padded_batch(share, seed=0, runs=4, P=8, T=10):
  """Runs of ``share`` rows, each run one left-padded prompt, responses of 0 … T tokens."""
  rng = np.random.default_rng(seed)
  prompt_UxP = (np.arange(P)[None] >= rng.integers(0, 4, runs)[:, None]).astype(np.int32)
  prompt_mask = np.repeat(prompt_UxP, share, 0)
  response_mask = (np.arange(T)[None] < rng.integers(0, T + 1, runs * share)[:, None]).astype(
    np.int32
  )
  mask = np.concatenate([prompt_mask, response_mask], 1)
  prompt_tokens = np.repeat(rng.integers(2, 97, (runs, P)), share, 0)
  tokens = np.concatenate([prompt_tokens, rng.integers(2, 97, (runs * share, T))], 1) * mask
  return tokens.astype(np.int32), mask, P


@pytest.mark.parametrize("family,kw", FAMILIES, ids=[f for f, _ in FAMILIES])
@pytest.mark.parametrize("share", [1, 3])
def test_packed_logps_entropies_and_gradients_equal_the_padded(family, kw, share, rel_diff):
  graphdef, params = small_model(family, **kw)
  tokens, mask, P = _padded_batch(share)
  plan = pack_plan.plan(mask, P, cell=2 * share, share=share, width=2 * tokens.shape[1])
  packed = jax.tree.map(jnp.asarray, plan.arrays(tokens, plan.rows_needed))
  assert packed.tokens_RxW.shape[0] < tokens.shape[0]  # fewer rows than the padded batch

  def logps(p, packed):
    window = models.Window(P, 1, packed)
    return models.token_logps(
      graphdef, p, jnp.asarray(tokens), jnp.asarray(mask), 0.7, True, window
    )

  def loss(p, packed):
    lp, ent = logps(p, packed)
    return jnp.sum(lp * jnp.arange(lp.shape[1])) + jnp.sum(ent)

  logps_jit, grad = jax.jit(logps), jax.jit(jax.grad(loss))
  padded, pack = logps_jit(params, None), logps_jit(params, packed)
  for a, b in zip(padded, pack):
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=2e-5, atol=2e-5)
  assert float(jnp.max(jnp.abs(padded[0]))) > 0
  assert rel_diff(grad(params, None), grad(params, packed)) < 1e-5
  # One token's source pointed at its neighbour: that log-prob moves.
  n = int(np.argmax(mask[:, P + 1]))
  wrong = packed.replace(source_NxT=packed.source_NxT.at[n, 1].add(1))
  assert abs(float(logps_jit(params, wrong)[0][n, 1] - padded[0][n, 1])) > 1e-3


KL = ("loss.kl_coef=0.05", "loss.entropy_coef=0.01")
WIDE = ("loss.pack=True", "loss.pack_width=64")  # more than one of the tiny task's rows a row
CASES = {
  "token_mean": ("loss.aggregation=token_mean", *WIDE, *KL),
  "shared_micro": ("loss.share_prompt=True", "loss.micro_batch_size=8", *WIDE, *KL),
  "mu2_minibatches": (
    "loss.num_minibatches=2",
    "loss.aggregation=seq_mean_token_mean",
    *WIDE,
    *KL,
  ),
  "dr_grpo_shared": ("loss.aggregation=seq_mean_token_sum_norm", "loss.share_prompt=True", *KL),
  "seq_sum_gspo_tis": (
    "loss.aggregation=seq_mean_token_sum",
    "loss.kind=gspo",
    "loss.rollout_correction=token_tis",
    *WIDE,
    *KL,
  ),
}


def _packer(cfg, devices=1):
  return Packer(cfg.loss, cfg.sampling.group_size, devices)


@pytest.mark.parametrize("case", sorted(CASES))
def test_packed_update_equals_the_padded_update(case, synthetic_batch, fresh, rel_diff):
  overrides = CASES[case]
  cfg, task, state, padded = length_aware(overrides, buckets=0)
  *_, packed = length_aware(overrides, buckets=4, pack=_packer(cfg))
  batch = short_batch(synthetic_batch, cfg, task)
  p_pad, m_pad = run(padded, state, batch, fresh)
  p_pack, m_pack = run(packed, state, batch, fresh)
  assert m_pack["pack/rows"] < batch.num_rows
  delta = lambda p: jax.tree.map(np.subtract, state.params, p)
  assert rel_diff(delta(p_pad), delta(p_pack)) < 2e-5
  assert m_pad["grad/norm"] > 0 and m_pad["loss/kl"] > 0
  for key, value in m_pad.items():
    if not key.startswith("update/"):
      np.testing.assert_allclose(m_pack[key], value, rtol=2e-5, atol=1e-6, err_msg=key)


def test_packed_update_on_eight_devices(synthetic_batch, fresh, rel_diff):
  """Rows over 8 devices in micro-batches of 8, shared prompts: each device packs its own
  cells, and the update equals the padded one; a packing whose sources are shifted does not."""
  overrides = ("loss.share_prompt=True", "loss.micro_batch_size=8", *KL)
  cfg, task, state, padded = length_aware(overrides, buckets=0, num_devices=8)
  *_, packed = length_aware(overrides, buckets=0, num_devices=8, pack=_packer(cfg, 8))
  batch = short_batch(synthetic_batch, cfg, task)
  p_pad, m_pad = run(padded, state, batch, fresh)
  p_pack, m_pack = run(packed, state, batch, fresh)
  delta = lambda p: jax.tree.map(np.subtract, state.params, p)
  assert rel_diff(delta(p_pad), delta(p_pack)) < 2e-5
  np.testing.assert_allclose(m_pack["loss/total"], m_pad["loss/total"], rtol=2e-5)

  def shifted(arrays):
    arrays, metrics = _packer(cfg, 8)(arrays)
    source = arrays.packed.source_NxT
    return arrays.replace(packed=arrays.packed.replace(source_NxT=source + (source > 0))), metrics

  *_, broken = length_aware(overrides, buckets=0, num_devices=8, pack=shifted)
  p_bad, _ = run(broken, state, batch, fresh)
  assert rel_diff(delta(p_pad), delta(p_bad)) > 1e-3


def test_pack_keys_reach_the_update(load_cfg, synthetic_batch, fresh):
  """loss.pack_width = 2 · (P + T) halves the packed rows; pack_width without pack fails."""
  cfg, task, state, _ = length_aware(("loss.pack=True",), buckets=0)
  batch = short_batch(synthetic_batch, cfg, task, longest=12)
  _, plain = _packer(cfg)(batch.device_batch())
  wide_cfg = load_cfg(("loss.pack=True", "loss.pack_width=64"))
  _, wide = _packer(wide_cfg)(batch.device_batch())
  assert (plain["pack/width"], wide["pack/width"]) == (batch.tokens_NxL.shape[1], 64)
  assert wide["pack/rows"] < plain["pack/rows"]
  with pytest.raises(ValueError, match=r"loss.pack_width = 64 needs loss.pack = True"):
    load_cfg(("loss.pack_width=64",))


def test_pack_key_reaches_the_loop(tmp_path):
  """loss.pack in the training loop: the packed run logs pack/* and trains as the padded one."""
  padded = tiny_loop(tmp_path, "padded", "steps=2", "loss.share_prompt=True")
  packed = tiny_loop(tmp_path, "packed", "steps=2", "loss.share_prompt=True", *WIDE)
  assert "pack/rows" not in padded[0] and metrics_doc.undocumented(packed[0]) == []
  for p, q in zip(padded, packed):
    assert q["pack/rows"] < 32 and p["adv/zero_std_frac"] < 1
    for key in ("reward/mean", "loss/policy", "grad/norm"):
      np.testing.assert_allclose(q[key], p[key], rtol=1e-4, atol=1e-7, err_msg=key)
