"""The length-aware update (``loss.length_buckets``, ``train.length_buckets``): the update on the
batch cut to its longest completion's bucket width gives the full-width loss, metrics and
parameters; a cut below the longest completion does not; bucket widths, cuts and the config key
by hand."""

import jax
import numpy as np
import pytest

from grpo_jax import sharding as shard_lib
from grpo_jax.rollout.batch import UpdateBatch
from grpo_jax.train.length_buckets import (
  bucket_width,
  bucket_widths,
  cut,
  longest_completion,
)
from tests.support.length_aware import LONGEST, length_aware, run, short_batch, to_host

KL = ("loss.kl_coef=0.05", "loss.entropy_coef=0.01")
CASES = {
  "token_mean": ("loss.aggregation=token_mean", *KL),
  "shared_prompt": ("loss.share_prompt=True", "loss.micro_batch_size=8", *KL),
  "mu2_shared": ("loss.share_prompt=True", "loss.num_iterations=2", *KL),
  "mu2_minibatches": ("loss.num_minibatches=2", "loss.aggregation=seq_mean_token_mean", *KL),
  "dr_grpo_norm": ("loss.aggregation=seq_mean_token_sum_norm", "loss.share_prompt=True", *KL),
  "seq_sum_gspo": ("loss.aggregation=seq_mean_token_sum", "loss.kind=gspo", *KL),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cut_update_equals_the_full_width_update(case, synthetic_batch, fresh, rel_diff, load_cfg):
  overrides = CASES[case]
  cfg, task, state, full = length_aware(overrides, buckets=0)
  *_, bucketed = length_aware(overrides, buckets=4)
  batch = short_batch(synthetic_batch, cfg, task)
  p_full, m_full = run(full, state, batch, fresh)
  p_cut, m_cut = run(bucketed, state, batch, fresh)
  assert (m_full["update/width"], m_cut["update/width"]) == (12, 6)
  delta = lambda p: jax.tree.map(np.subtract, state.params, p)  # 0.5 × the gradient
  assert rel_diff(delta(p_full), delta(p_cut)) < 2e-5
  assert m_full["grad/norm"] > 0 and m_full["loss/kl"] > 0
  for key, value in m_full.items():
    if not key.startswith("update/width"):
      np.testing.assert_allclose(m_cut[key], value, rtol=2e-5, atol=1e-7, err_msg=key)
  if case == "token_mean":
    # A cut below the longest completion drops loss tokens: a different update.
    short = shard_lib.shard_batch(cut(batch.device_batch(), LONGEST - 2), bucketed.mesh)
    bad_state, m_bad = bucketed.steps[12](fresh(state), short)
    assert rel_diff(delta(p_full), delta(jax.device_get(bad_state.params))) > 1e-3
    assert not np.isclose(float(to_host(m_bad)["loss/total"]), m_full["loss/total"], rtol=1e-3)


def test_cut_update_on_eight_devices_with_shared_prompts(synthetic_batch, fresh, rel_diff):
  """Rows split over 8 devices, each group's prompt once, micro-batches of 4: the cut changes
  the T axis only, never the rows' sharding."""
  overrides = ("loss.share_prompt=True", "loss.micro_batch_size=4", *KL)
  cfg, task, state, full = length_aware(overrides, buckets=0, num_devices=8)
  *_, bucketed = length_aware(overrides, buckets=4, num_devices=8)
  batch = short_batch(synthetic_batch, cfg, task)
  p_full, m_full = run(full, state, batch, fresh)
  p_cut, m_cut = run(bucketed, state, batch, fresh)
  assert m_cut["update/width"] == 6
  delta = lambda p: jax.tree.map(np.subtract, state.params, p)
  assert rel_diff(delta(p_full), delta(p_cut)) < 2e-5
  np.testing.assert_allclose(m_cut["loss/total"], m_full["loss/total"], rtol=2e-5)


def test_constant_normaliser_counts_the_sampled_width(synthetic_batch, fresh):
  """Dr.GRPO's T_max with loss.norm_length = 0 is the sampled T = 12: an update built without
  it (normalising by the cut width 6) scales the loss by 12 / 6."""
  overrides = CASES["dr_grpo_norm"]
  cfg, task, state, bucketed = length_aware(overrides, buckets=4)
  *_, wrong = length_aware(overrides, buckets=4, completion_len=None)
  batch = short_batch(synthetic_batch, cfg, task)
  _, m_right = run(bucketed, state, batch, fresh)
  _, m_wrong = run(wrong, state, batch, fresh)
  np.testing.assert_allclose(m_wrong["loss/policy"], 2 * m_right["loss/policy"], rtol=1e-5)
  assert m_right["loss/policy"] != 0


def test_one_compile_per_width_and_the_width_metric(synthetic_batch, fresh):
  """Longest completions 5, 2, 6, 1 meet widths 6, 2, 6, 2 of (2, 3, 6, 12): four updates, two
  compiled programs, each width logged once."""
  logs = []
  overrides = ("loss.entropy_coef=0.001",)  # settings of this test alone: a fresh program
  cfg, task, state, update = length_aware(overrides, buckets=4, log=logs.append)
  widths, counts = [], []
  state = fresh(state)
  for longest in (5, 2, 6, 1):
    state, metrics = update(state, short_batch(synthetic_batch, cfg, task, longest))
    metrics = to_host(metrics)
    widths.append(int(metrics["update/width"]))
    counts.append(int(metrics["update/compiled_widths"]))
  assert widths == [6, 2, 6, 2] and counts == [1, 2, 2, 2]
  assert logs == [
    "update: width 6 of 12 response slots (buckets [2, 3, 6, 12])",
    "update: width 2 of 12 response slots (buckets [2, 3, 6, 12])",
  ]
  assert list(update.steps) == [12] and update.steps[12]._cache_size() == 2


def test_bucket_widths_and_longest_completion_by_hand():
  assert bucket_widths(64, 4) == (8, 16, 32, 64)
  assert bucket_widths(12, 4) == (2, 3, 6, 12)
  assert bucket_widths(12, 0) == bucket_widths(12, 1) == (12,)
  assert bucket_widths(5, 10) == (1, 2, 3, 5)  # distinct widths only
  assert [bucket_width(n, (8, 16, 32, 64)) for n in (0, 1, 8, 9, 33, 64)] == [8, 8, 8, 16, 64, 64]
  with pytest.raises(ValueError, match="exceed the widest bucket 64"):
    bucket_width(65, (8, 16, 32, 64))
  mask_NxT = np.zeros((3, 10), np.int32)
  assert longest_completion(mask_NxT) == 0
  mask_NxT[0, :2] = 1
  mask_NxT[2, 3:7] = 1  # a masked-out preview before slot 3: the last 1 counts
  assert longest_completion(mask_NxT) == 7


def test_cut_slices_the_response_axes_only():
  N, P, T = 4, 3, 8
  ones = lambda *shape: np.ones(shape, np.int32)
  batch = UpdateBatch(
    tokens_NxL=np.arange(N * (P + T)).reshape(N, P + T),
    input_mask_NxL=ones(N, P + T),
    completion_mask_NxT=ones(N, T),
    sample_logps_NxT=np.arange(N * T, dtype=np.float32).reshape(N, T),
    rewards_N=np.arange(N, dtype=np.float32),
    accuracy_N=np.zeros(N, np.float32),
    group_ids_N=ones(N),
    subgroup_ids_N=ones(N),
    loss_mask_N=ones(N),
    step_accuracy_N=np.zeros(N, np.float32),
  )
  out = cut(batch, 3)
  np.testing.assert_array_equal(out.tokens_NxL, batch.tokens_NxL[:, : P + 3])
  np.testing.assert_array_equal(out.sample_logps_NxT, batch.sample_logps_NxT[:, :3])
  assert out.completion_mask_NxT.shape == (N, 3) and out.input_mask_NxL.shape == (N, P + 3)
  assert out.rewards_N is batch.rewards_N and out.step_accuracy_N is batch.step_accuracy_N
  assert cut(batch, T) is batch
  for bad in (0, T + 1):
    with pytest.raises(ValueError, match="cut width must lie in"):
      cut(batch, bad)


@pytest.mark.parametrize(
  "value,needle",
  [
    ("-1", r"config key loss.length_buckets = -1 must be >= 0"),
    ("two", r"config key loss.length_buckets: expected an integer, got 'two'"),
    ("2.5", r"config key loss.length_buckets: expected an integer"),
  ],
)
def test_bad_length_buckets_fail_at_load_naming_the_key(load_cfg, value, needle):
  with pytest.raises(ValueError, match=needle):
    load_cfg((f"loss.length_buckets={value}",))


@pytest.mark.parametrize("value", [2.5, "4", True])
def test_length_buckets_of_the_wrong_type_in_a_file_fail(value):
  from grpo_jax.config import base_config, finalize

  cfg = base_config()
  cfg.loss._fields["length_buckets"] = value  # as a config file could leave it
  with pytest.raises(ValueError, match=r"config key loss.length_buckets = .* must be an int"):
    finalize(cfg)
  cfg.loss._fields["length_buckets"] = 0
  assert finalize(cfg).loss.length_buckets == 0
