"""The RL update with model.scan_layers (and remat inside the scan) on 8 devices gives the
unrolled update's metrics and new parameters (stacked), shared prompts and micro-batches on."""

import jax
import numpy as np

from grpo_jax.models.layer_stack import is_stacked, stack_layers
from tests.support.length_aware import length_aware, run, short_batch

SETTINGS = (
  "loss.share_prompt=True",
  "loss.micro_batch_size=4",
  "loss.kl_coef=0.05",
  "loss.entropy_coef=0.01",
  "model.remat=full",
)


def test_scanned_update_equals_the_unrolled_update(synthetic_batch, fresh, rel_diff):
  cfg, task, state, unrolled = length_aware(SETTINGS, buckets=0, num_devices=8)
  _, _, scanned_state, scanned = length_aware(
    (*SETTINGS, "model.scan_layers=True"), buckets=0, num_devices=8
  )
  assert is_stacked(scanned_state.params) and not is_stacked(state.params)
  batch = short_batch(synthetic_batch, cfg, task)
  p0, m0 = run(unrolled, state, batch, fresh)
  p1, m1 = run(scanned, scanned_state, batch, fresh)
  assert m0["grad/norm"] > 0 and m0["loss/kl"] > 0
  for key, value in m0.items():
    np.testing.assert_allclose(m1[key], value, rtol=2e-5, atol=1e-7, err_msg=key)
  delta = lambda before, after: jax.tree.map(np.subtract, before, after)
  step0 = stack_layers(delta(state.params, p0))
  step1 = delta(jax.device_get(scanned_state.params), p1)
  assert rel_diff(step0, step1) < 2e-5
