"""The length-aware update (``loss.length_buckets``, ``train.length_buckets``): the update on the
batch cut to its longest completion's bucket width gives the full-width loss, metrics and
parameters; a cut below the longest completion does not; bucket widths, cuts and the config key
by hand."""

import functools

import jax
import numpy as np
import optax
import pytest

from grpo_jax import sharding as shard_lib
from grpo_jax.rollout.batch import UpdateBatch
from grpo_jax.train.length_buckets import (
  LengthAwareUpdate,
  bucket_width,
  bucket_widths,
  cut,
  longest_completion,
)
from grpo_jax.train.state import init_state
from grpo_jax.train.update import make_update_step

LONGEST = 5  # completion slots used of the tiny config's T = 12: bucket width 6 of (2, 3, 6, 12)


def short_batch(synthetic_batch, cfg, task, longest=LONGEST):
  """The tests' synthetic batch with every completion cut to at most ``longest`` tokens; the
  slots after a row's completion hold random tokens (the update must never read them)."""
  batch = synthetic_batch(cfg, task)
  T = batch.completion_mask_NxT.shape[1]
  mask_NxT = batch.completion_mask_NxT * (np.arange(T) < longest)[None]
  mask_NxT[0, longest - 1] = 1  # one row reaches ``longest`` exactly
  P = batch.tokens_NxL.shape[1] - T
  tokens_NxL = batch.tokens_NxL.copy()
  junk_NxT = np.random.default_rng(1).integers(0, len(task.tokenizer), mask_NxT.shape)
  tokens_NxL[:, P:] = np.where(mask_NxT > 0, tokens_NxL[:, P:], junk_NxT)
  input_mask_NxL = np.concatenate([batch.input_mask_NxL[:, :P], mask_NxT], axis=1)
  return batch.replace(
    tokens_NxL=tokens_NxL,
    input_mask_NxL=input_mask_NxL,
    completion_mask_NxT=mask_NxT,
    lengths_N=mask_NxT.sum(1),
  )


@functools.cache
def _model(overrides, num_devices):
  """(cfg, mesh, task, graphdef, state, shardings, optimizer), SGD at rate 0.5 (cached)."""
  from conftest import _load

  from grpo_jax import data, models

  cfg = _load(overrides)
  mesh = shard_lib.make_mesh(cfg.mesh, jax.devices()[:num_devices])
  task = data.build_task(cfg)
  model_cfg = models.ModelConfig.from_config(cfg.model, vocab_size=len(task.tokenizer))
  graphdef, params = models.init_params(model_cfg, cfg.seed)
  optimizer = optax.sgd(0.5)
  state = init_state(params, optimizer, cfg)
  if "ref_params" in state:  # a reference away from the policy: KL and its gradient are not 0
    state["ref_params"] = models.init_params(model_cfg, cfg.seed + 1)[1]
  shardings = jax.tree.map(lambda _: shard_lib.replicated(mesh), state)
  return cfg, mesh, task, graphdef, jax.device_put(state, shardings), shardings, optimizer


@functools.cache
def _step(overrides, num_devices, completion_len):
  """The jitted update of these settings (cached: tests with the same settings share its
  compiled widths)."""
  cfg, mesh, task, graphdef, _, shardings, optimizer = _model(overrides, num_devices)
  return make_update_step(
    graphdef, optimizer, cfg, mesh, shardings, task.prompt_len, completion_len
  )


def length_aware(overrides, buckets, num_devices=1, completion_len="sampled", log=None):
  """(cfg, task, state, a LengthAwareUpdate with ``buckets``). ``completion_len=None`` builds
  the jitted update without the sampled T (the normaliser then counts the cut width)."""
  cfg, mesh, task, _, state, *_ = _model(tuple(overrides), num_devices)

  def make_step(T):
    width = T if completion_len == "sampled" else completion_len
    return _step(tuple(overrides), num_devices, width)

  return cfg, task, state, LengthAwareUpdate(make_step, mesh, buckets, log=log)


def run(update, state, batch, fresh):
  new_state, metrics = update(fresh(state), batch)
  return jax.device_get(new_state["params"]), {k: float(v) for k, v in to_host(metrics).items()}


def to_host(metrics):
  return {k: np.asarray(v) for k, v in jax.device_get(metrics).items()}


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
  delta = lambda p: jax.tree.map(np.subtract, state["params"], p)  # 0.5 × the gradient
  assert rel_diff(delta(p_full), delta(p_cut)) < 2e-5
  assert m_full["grad/norm"] > 0 and m_full["loss/kl"] > 0
  for key, value in m_full.items():
    if not key.startswith("update/width"):
      np.testing.assert_allclose(m_cut[key], value, rtol=2e-5, atol=1e-7, err_msg=key)
  if case == "token_mean":
    # A cut below the longest completion drops loss tokens: a different update.
    short = shard_lib.shard_batch(cut(batch.device_batch(), LONGEST - 2), bucketed.mesh)
    bad_state, m_bad = bucketed.steps[12](fresh(state), short)
    assert rel_diff(delta(p_full), delta(jax.device_get(bad_state["params"]))) > 1e-3
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
  delta = lambda p: jax.tree.map(np.subtract, state["params"], p)
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
