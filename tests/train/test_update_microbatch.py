"""Micro-batch gradient accumulation inside the jitted update equals the full-batch update
(METHODS §4 statement 13), for every aggregation, with KL, entropy and a per-row loss mask."""

import jax
import numpy as np
import pytest

from grpo_jax.losses import AGGREGATIONS
from grpo_jax.train.microbatch import num_parts

EXTRA = ("loss.kl_coef=0.05", "loss.entropy_coef=0.01")


@pytest.mark.parametrize("aggregation", sorted(AGGREGATIONS))
def test_micro_batches_give_the_full_batch_update(aggregation, synthetic_batch, rel_diff, sgd_grad):
  """32 rows at once vs 4 micro-batches of 8: one SGD step (θ1 = θ0 − g) agrees to 1e-6."""
  base = (f"loss.aggregation={aggregation}", *EXTRA)
  batch = synthetic_batch()
  g_full, m_full = sgd_grad(base, batch)
  g_mb, m_mb = sgd_grad((*base, "loss.micro_batch_size=8"), batch)
  assert rel_diff(g_full, g_mb) < 1e-6
  for key in ("loss/total", "loss/policy", "loss/entropy", "grad/norm", "clip/low_frac"):
    np.testing.assert_allclose(m_mb[key], m_full[key], rtol=1e-5, atol=1e-7)
  assert m_full["grad/norm"] > 0
  if aggregation == "token_mean":
    # The per-row loss mask is honoured: unmasking every row changes the gradient.
    g_all, _ = sgd_grad(
      (*base, "loss.micro_batch_size=8"), batch.replace(loss_mask_N=1 + 0 * batch.loss_mask_N)
    )
    assert rel_diff(g_mb, g_all) > 1e-3


def test_micro_batches_with_minibatches_and_eight_devices(synthetic_batch, rel_diff, sgd_grad):
  """2 minibatches, micro-batches of 4 over 8 devices = 1 device, whole minibatches."""
  batch = synthetic_batch()
  g1, m1 = sgd_grad(("loss.num_minibatches=2",), batch)
  g8, m8 = sgd_grad(("loss.num_minibatches=2", "loss.micro_batch_size=4"), batch, 8)
  assert len(jax.devices()) == 8
  assert rel_diff(g1, g8) < 1e-5
  np.testing.assert_allclose(m8["ppo_kl"], m1["ppo_kl"], rtol=1e-3, atol=1e-9)
  assert m1["ppo_kl"] != 0.0  # the second minibatch step is off-policy


def test_micro_batch_size_must_divide_the_rows(load_cfg):
  # At load, before any model is built; the update's own split says the same.
  with pytest.raises(ValueError, match="loss.micro_batch_size = 5 must divide the 32 rows"):
    load_cfg(("loss.micro_batch_size=5",))
  with pytest.raises(ValueError, match="loss.micro_batch_size"):
    num_parts(32, 5, "loss.micro_batch_size")
