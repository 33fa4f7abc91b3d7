"""A rejecting rollout correction inside the jitted update (METHODS §8 statement 21): rejected
rows leave the mask before the step's denominators are counted, so the update equals the one
where those rows were never in the loss, at μ = 1 with micro-batches and at μ = 2; the
rejection and veto shares are logged."""

import jax
import numpy as np
import pytest


def vetoed_batch(batch, update_setup, completion_logps):
  """The batch with the sampler's log-probs equal to the trainer's, except one token of every
  other row 12 nats more likely to the sampler (ρ_t = e^-12 < the veto 1e-4)."""
  cfg, _, task, graphdef, state, _ = update_setup()
  logps_NxT = completion_logps(graphdef, state.params, batch, cfg, task)
  sample_NxT = logps_NxT.copy()
  vetoed_N = np.arange(len(sample_NxT)) % 2 == 1
  sample_NxT[vetoed_N, 0] += 12.0
  mask_NxT = batch.completion_mask_NxT
  sample_NxT = np.where(mask_NxT > 0, sample_NxT, 0.0).astype(np.float32)
  return batch.replace(sample_logps_NxT=sample_NxT), vetoed_N


@pytest.mark.parametrize(
  "extra", [("loss.micro_batch_size=8",), ("loss.num_iterations=2", "loss.micro_batch_size=8")]
)
def test_vetoed_rows_leave_the_step_as_if_never_scored(
  extra, synthetic_batch, update_setup, completion_logps, sgd_grad, rel_diff
):
  batch, vetoed_N = vetoed_batch(synthetic_batch(), update_setup, completion_logps)
  # geo_mis's veto alone: bounds wide enough that no row's geometric mean leaves them.
  geo = ("loss.rollout_correction=geo_mis", "loss.rollout_rs_high=1e6", *extra)
  g_rej, m_rej = sgd_grad(geo, batch)
  masked = batch.replace(loss_mask_N=batch.loss_mask_N * ~vetoed_N)
  g_ref, m_ref = sgd_grad(("loss.rollout_correction=none", *extra), masked)
  assert rel_diff(g_ref, g_rej) < 1e-5
  np.testing.assert_allclose(m_rej["loss/policy"], m_ref["loss/policy"], rtol=1e-5, atol=1e-8)
  # The shares count the rows the veto took out of the loss (not those out of it already).
  share = np.mean(vetoed_N & (batch.loss_mask_N > 0))
  assert 0 < share and m_rej["mismatch/masked_frac"] == m_rej["mismatch/veto_frac"] == share
  # Had they stayed in the denominators (weight 0, the old seq_mis), the step would differ.
  g_all, _ = sgd_grad(("loss.rollout_correction=none", *extra), batch)
  assert rel_diff(g_ref, g_all) > 1e-2
  # The veto key reaches the update: off, nothing is rejected.
  g_off, m_off = sgd_grad((*geo, "loss.rollout_veto=0"), batch)
  assert m_off["mismatch/masked_frac"] == 0.0 and rel_diff(g_all, g_off) < 1e-5
  assert np.isfinite(jax.tree.leaves(g_rej)[0]).all()
