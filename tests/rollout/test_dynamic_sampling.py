"""DAPO batch shaping around a rollout: dynamic sampling, overlong filter and penalty."""

import threading

import jax
import numpy as np
import pytest

from grpo_jax.config import defaults
from grpo_jax.rollout import dynamic_sampling as ds
from grpo_jax.rollout import multihost
from grpo_jax.rollout.batch import ARRAYS, RolloutBatch

P, T, EOS, PAD = 2, 10, 1, 0


def make_cfg(**dapo):
  keys = {"sampling.prompts_per_step": 4, "sampling.group_size": 2, "sampling.max_new_tokens": T}
  return defaults({**keys, **{f"dapo.{k}": v for k, v in dapo.items()}})


def fake_rollout(lengths=None):
  """Problem p: rewards equal within the group iff p % 3 == 0; row j of the group has length
  lengths[p % len(lengths)][j] (T without EOS = truncated). Records the keys it was given.
  Each row's problem is in ``problems_N``."""
  lengths = lengths or [(3, 5)]
  keys = []

  def rollout_fn(problems, rng):
    keys.append(np.asarray(jax.random.key_data(rng)) if hasattr(rng, "dtype") else rng)
    n = len(problems) * 2
    rewards = np.array([[1.0, 1.0] if p % 3 == 0 else [1.0, 0.0] for p in problems]).ravel()
    lens = np.array([lengths[p % len(lengths)] for p in problems]).ravel()
    mask = (np.arange(T)[None] < lens[:, None]).astype(np.int32)
    comp = np.where(mask > 0, 5, PAD)
    comp[np.arange(n), lens - 1] = np.where(lens < T, EOS, 7)  # full length, no EOS: truncated
    tokens = np.concatenate([np.full((n, P), 3), comp], axis=1).astype(np.int32)
    ids = np.repeat(np.arange(len(problems), dtype=np.int32), 2)
    return RolloutBatch(
      tokens_NxL=tokens,
      input_mask_NxL=np.concatenate([np.ones((n, P), np.int32), mask], axis=1),
      completion_mask_NxT=mask,
      sample_logps_NxT=np.zeros(mask.shape, np.float32),
      rewards_N=rewards,
      group_ids_N=ids,
      subgroup_ids_N=ids.copy(),
      truncated_N=lens >= T,  # the sampler's: no EOS within T
      lengths_N=lens,
      problems_N=list(np.repeat(np.asarray(problems), 2)),
      completions_N=[f"p{p}r{j}" for p in problems for j in range(2)],
    )

  return rollout_fn, keys


problems_fn = lambda start, count: list(range(start, start + count))


def test_passthrough_when_off():
  rollout_fn, _ = fake_rollout([(3, T)])
  raw = rollout_fn(problems_fn(0, 4), None)
  batch, consumed = ds.sample_batch(rollout_fn, problems_fn, 0, jax.random.PRNGKey(0), make_cfg())
  info = batch.metrics
  for k, v in raw.arrays().items():
    np.testing.assert_array_equal(getattr(batch, k), v)
  assert batch.problems_N == raw.problems_N
  np.testing.assert_array_equal(batch.loss_mask_N, 1)
  assert not any(k.startswith("dapo/") for k in info)  # nothing shapes the batch
  assert consumed == 4 and info["response/truncated_frac"] == 0.5


def test_drops_all_equal_groups_and_refills():
  rollout_fn, keys = fake_rollout()
  cfg = make_cfg(dynamic_sampling=True, max_sampling_rounds=5)
  batch, consumed = ds.sample_batch(rollout_fn, problems_fn, 0, jax.random.PRNGKey(0), cfg)
  info = batch.metrics
  # Problems 0..3, 4..7: 0, 3, 6 are all-equal; the first four others are 1, 2, 4, 5.
  np.testing.assert_array_equal(batch.problems_N, np.repeat([1, 2, 4, 5], 2))
  np.testing.assert_array_equal(batch.group_ids_N, np.repeat(np.arange(4), 2))
  np.testing.assert_array_equal(batch.subgroup_ids_N, np.repeat(np.arange(4), 2))
  assert info["dapo/rounds"] == 2 and info["dapo/kept_groups"] == 4
  assert consumed == 8 and info["dapo/sampled_groups"] == 8
  assert info["dapo/informative_frac"] == 5 / 8
  assert batch.completions_N[:2] == ["p1r0", "p1r1"]
  # Round 0 uses the step key, round 1 a key folded from it.
  np.testing.assert_array_equal(keys[0], jax.random.key_data(jax.random.PRNGKey(0)))
  np.testing.assert_array_equal(
    keys[1], jax.random.key_data(jax.random.fold_in(jax.random.PRNGKey(0), 1))
  )


def test_short_batch_is_padded_or_raises():
  rollout_fn, _ = fake_rollout()
  cfg = make_cfg(dynamic_sampling=True, max_sampling_rounds=1, oversample=1.0)
  batch, _ = ds.sample_batch(rollout_fn, problems_fn, 0, jax.random.PRNGKey(0), cfg)
  info = batch.metrics
  assert info["dapo/kept_groups"] == 2 and info["dapo/rounds"] == 1
  assert batch.rewards_N.shape == (8,)
  np.testing.assert_array_equal(batch.group_ids_N, [0, 0, 1, 1, -1, -1, -1, -1])
  np.testing.assert_array_equal(batch.subgroup_ids_N[4:], -1)
  assert batch.completion_mask_NxT[4:].sum() == 0 and batch.loss_mask_N[4:].sum() == 0
  assert batch.completions_N[4:] == [""] * 4 and batch.problems_N[4:] == [None] * 4
  cfg = cfg.with_overrides({"dapo.require_full_batch": True})
  with pytest.raises(RuntimeError, match="kept 2 of 4 groups after 1 rounds"):
    ds.sample_batch(rollout_fn, problems_fn, 0, jax.random.PRNGKey(0), cfg)


def test_oversample_rounds_to_device_multiple():
  cfg = make_cfg(dynamic_sampling=True, oversample=1.3)  # ceil(5.2) = 6 prompts, 12 rows
  assert ds.prompts_per_round(cfg) == 6
  assert ds.prompts_per_round(cfg, row_multiple=8) == 8  # 16 rows divide over 8 devices


def test_overlong_penalty_values():
  # L_max = 10, buffer 4: no penalty up to 6 tokens, then −(L − 6)/4, capped at −1.
  got = ds.overlong_penalty_N([0, 5, 6, 7, 8, 10, 12], 10, 4, 0.5)
  np.testing.assert_allclose(got, 0.5 * np.array([0, 0, 0, -0.25, -0.5, -1.0, -1.0]))


def test_overlong_filter_and_penalty_in_the_batch():
  rollout_fn, _ = fake_rollout([(3, T), (8, 9)])
  cfg = make_cfg(
    overlong_filter=True, overlong_penalty=True, overlong_buffer=4, overlong_penalty_weight=1.0
  )
  batch, _ = ds.sample_batch(rollout_fn, problems_fn, 0, jax.random.PRNGKey(0), cfg)
  info = batch.metrics
  raw = rollout_fn(problems_fn(0, 4), None)
  # Lengths 3, 10 (truncated), 8, 9, ...: penalties 0, −1, −0.5, −0.75.
  np.testing.assert_allclose(batch.rewards_N - raw.rewards_N, [0, -1, -0.5, -0.75] * 2)
  np.testing.assert_array_equal(batch.loss_mask_N, [1, 0, 1, 1] * 2)
  np.testing.assert_array_equal(batch.truncated_N, [0, 1, 0, 0] * 2)
  assert info["dapo/overlong_filtered_frac"] == 0.25
  np.testing.assert_allclose(info["dapo/overlong_penalty_mean"], -2.25 / 4)


SAMPLING = dict(dynamic_sampling=True, oversample=1.0, max_sampling_rounds=3)
SHAPING = dict(overlong_penalty=True, overlong_buffer=4, overlong_penalty_weight=1.0)


@pytest.mark.parametrize(
  "key,value,reference",
  [
    ("dynamic_sampling", True, {}),
    ("oversample", 2.0, SAMPLING),
    ("max_sampling_rounds", 1, SAMPLING),
    ("filter_metric", "seq_reward", {**SAMPLING, **SHAPING}),
    ("require_full_batch", True, {**SAMPLING, "max_sampling_rounds": 1}),
    ("overlong_filter", True, SHAPING),
    ("overlong_penalty", True, {}),
    ("overlong_buffer", 2, SHAPING),
    ("overlong_penalty_weight", 0.3, SHAPING),
  ],
)
def test_every_dapo_key_changes_the_output(key, value, reference):
  """From a setting in which the key is live, changing it changes the batch (or, for
  require_full_batch, raises)."""

  def sample(settings):
    rollout_fn, _ = fake_rollout([(3, 3), (8, T)])
    out, _ = ds.sample_batch(
      rollout_fn, problems_fn, 0, jax.random.PRNGKey(0), make_cfg(**settings)
    )
    problem_N = [-1 if p is None else p for p in out.problems_N]
    return np.concatenate(
      [out.rewards_N, out.loss_mask_N, problem_N, [out.metrics.get("dapo/rounds", 1)]]
    )

  base = sample(reference)
  if key == "require_full_batch":
    with pytest.raises(RuntimeError):
      sample({**reference, key: value})
    return
  assert not np.array_equal(base, sample({**reference, key: value}))


def test_hadw_accuracy_covers_dropped_groups():
  """METHODS §3: y_t averages every sampled response, not only the groups kept for training."""
  from grpo_jax import advantages

  rollout_fn, _ = fake_rollout()
  cfg = make_cfg(dynamic_sampling=True, max_sampling_rounds=5)
  batch, _ = ds.sample_batch(rollout_fn, problems_fn, 0, jax.random.PRNGKey(0), cfg)
  # Two rounds of problems 0..7: 0, 3, 6 score [1, 1], the others [1, 0] -> 11 / 16.
  np.testing.assert_allclose(batch.step_accuracy, 11 / 16)
  assert np.mean(batch.rewards_N) == 0.5  # the kept groups alone would say 0.5
  cfg = cfg.with_overrides({"hadw.enabled": True})
  args = (
    batch.group_ids_N,
    batch.subgroup_ids_N,
    cfg.advantage,
    cfg.hadw,
    advantages.init_anchor(cfg.hadw),
    jax.random.PRNGKey(0),
  )
  _, _, aux_kept = advantages.compute(batch.rewards_N, *args)
  every = advantages.Rewards(batch.rewards_N, step=batch.step_accuracy)
  _, anchor, aux_all = advantages.compute(every, *args)
  assert float(aux_kept["hadw/batch_acc"]) == 0.5
  np.testing.assert_allclose(float(aux_all["hadw/batch_acc"]), 11 / 16)
  np.testing.assert_allclose(float(aux_all["hadw/anchor"]), 11 / 16)  # first step: C⁻ := y_1


M = 3  # preview slots of the two-stage layout


def two_stage_rollout(preview_lens, completion_lens, truncated, train_on_preview):
  """A 4-row two-stage batch (B = 2 prompts × G = 2, K = 2 previews): responses are preview ⊕
  completion packed by ``strategy.layout.pack_responses``, right-padded to M + T columns; the
  rollout's ``truncated_N`` (the sampler's) and ``lengths_N`` (the completion alone)."""
  from grpo_jax.strategy import layout

  def rollout_fn(problems, rng):
    n = len(problems) * 2
    prev_mask = (np.arange(M)[None] < np.asarray(preview_lens)[:, None]).astype(np.int32)
    comp_mask = (np.arange(T)[None] < np.asarray(completion_lens)[:, None]).astype(np.int32)
    comp = np.where(comp_mask > 0, 5, PAD)
    ends = np.asarray(completion_lens) - 1
    comp[np.arange(n), ends] = np.where(truncated, 7, EOS)
    packed = layout.pack_responses(
      layout.Segment(np.where(prev_mask > 0, 4, PAD), prev_mask, -0.1 * prev_mask),
      layout.Segment(comp, comp_mask, -0.2 * comp_mask),
      PAD,
      train_on_preview,
    )
    ids = np.repeat(np.arange(len(problems), dtype=np.int32), 2)
    return RolloutBatch(
      tokens_NxL=np.concatenate([np.full((n, P), 3), packed["tokens_NxR"]], 1),
      input_mask_NxL=np.concatenate([np.ones((n, P)), packed["input_mask_NxR"]], 1),
      completion_mask_NxT=packed["loss_mask_NxR"],
      sample_logps_NxT=packed["logps_NxR"],
      rewards_N=np.array([1.0, 0.0] * len(problems), np.float32),
      group_ids_N=ids,
      subgroup_ids_N=np.arange(n, dtype=np.int32),
      truncated_N=np.asarray(truncated, bool),  # the sampler's
      lengths_N=np.asarray(completion_lens),
      completions_N=[""] * n,
    )

  return rollout_fn


def two_stage_cfg(train_on_preview=False, **dapo):
  return make_cfg(**dapo).with_overrides(
    {
      "sampling.prompts_per_step": 2,
      "strategy.enabled": True,
      "strategy.num_previews": 2,
      "strategy.train_on_preview": train_on_preview,
    }
  )


def test_two_stage_truncation_is_the_samplers():
  """Truncated completions after short previews end before the packed rows' last column: only
  the sampler's truncated_N sees them (the last column catches the full-width row alone)."""
  rollout_fn = two_stage_rollout([1, 2, 1, 3], [T] * 4, [True] * 4, train_on_preview=False)
  cfg = two_stage_cfg(overlong_filter=True)
  batch, _ = ds.sample_batch(rollout_fn, problems_fn, 0, jax.random.PRNGKey(0), cfg)
  info = batch.metrics
  raw = rollout_fn(problems_fn(0, 2), None)
  # The packed rows' last column (full and not EOS) catches the full-width row alone.
  last_full_N = (raw.completion_mask_NxT[:, -1] > 0) & (raw.tokens_NxL[:, -1] != EOS)
  assert last_full_N.tolist() == [False, False, False, True]
  np.testing.assert_array_equal(batch.truncated_N, True)
  np.testing.assert_array_equal(batch.loss_mask_N, 0)
  assert info["response/truncated_frac"] == 1.0
  assert info["dapo/overlong_filtered_frac"] == 1.0
  # Without the sampler's flags a batch cannot be built, so it is never judged on its columns.
  fields = {k: v for k, v in raw.arrays().items() if k != "truncated_N"}
  with pytest.raises(TypeError, match="truncated_N"):
    RolloutBatch(**fields)


@pytest.mark.parametrize("train_on_preview", [False, True])
def test_two_stage_overlong_penalty_counts_the_completion_only(train_on_preview):
  """L_i is the completion's length, whether or not the preview is in the loss mask."""
  completion_lens = [4, 6, 8, 9]  # L_max = 10, buffer 4: penalties 0, 0, −0.5, −0.75
  rollout_fn = two_stage_rollout([3, 2, 3, 1], completion_lens, [False] * 4, train_on_preview)
  cfg = two_stage_cfg(train_on_preview, **SHAPING)
  batch, _ = ds.sample_batch(rollout_fn, problems_fn, 0, jax.random.PRNGKey(0), cfg)
  np.testing.assert_allclose(batch.rewards_N - [1, 0, 1, 0], [0, 0, -0.5, -0.75])
  # Σ completion mask is the completion alone unless the preview is trained: lengths_N is.
  mask_sum_N = batch.completion_mask_NxT.sum(1)
  assert (mask_sum_N.tolist() != completion_lens) == train_on_preview


def test_hadw_difficulty_reads_the_raw_accuracy_not_the_shaped_reward():
  """METHODS §3: with the overlong penalty on, p̂_g is the group mean of the raw accuracy; the
  baseline and the normalisation keep the shaped rewards."""
  from grpo_jax import advantages

  rollout_fn, _ = fake_rollout([(3, 8)])  # the second row of each group is 8 long: −0.5
  cfg = make_cfg(**SHAPING)
  batch, _ = ds.sample_batch(rollout_fn, problems_fn, 0, jax.random.PRNGKey(0), cfg)
  # Problems 0 and 3 score [1, 1] (p̂ = 1) and become [1, 0.5]; 1 and 2: [1, 0] -> [1, −0.5].
  np.testing.assert_array_equal(batch.accuracy_N, [1, 1, 1, 0, 1, 0, 1, 1])
  np.testing.assert_allclose(batch.rewards_N, [1, 0.5, 1, -0.5, 1, -0.5, 1, 0.5])
  cfg = cfg.with_overrides({"hadw.anchor": "fixed", "hadw.fixed_anchor": 0.5})

  def adv(enabled, accuracy_N=None):
    e = cfg.with_overrides({"hadw.enabled": enabled})
    rewards = advantages.Rewards(batch.rewards_N, accuracy_N)
    args = (batch.group_ids_N, batch.subgroup_ids_N, e.advantage, e.hadw)
    out, _, aux = advantages.compute(
      rewards, *args, advantages.init_anchor(e.hadw), jax.random.key(0)
    )
    return np.asarray(out), aux

  plain, _ = adv(False)
  assert np.all(plain != 0)  # the penalty made every group informative
  # Φ = λ·exp(−sgn(A)·sgn(d)·|d|), d = p̂ − 0.5: p̂ = 1 for groups 0 and 3, 0.5 for 1 and 2.
  lam, e = 1.3, np.exp(0.5)
  want_raw = lam * np.array([1 / e, e, 1, 1, 1, 1, 1 / e, e])
  raw, aux = adv(True, batch.accuracy_N)
  np.testing.assert_allclose(raw / plain, want_raw, rtol=1e-5)
  np.testing.assert_allclose(float(aux["hadw/batch_acc"]), 6 / 8)  # y_t: raw accuracy too
  # The shaped rewards would give p̂ = 0.75 and 0.25 instead.
  q = np.exp(0.25)
  shaped, _ = adv(True)
  np.testing.assert_allclose(
    shaped / plain, lam * np.array([1 / q, q, q, 1 / q, q, 1 / q, 1 / q, q]), rtol=1e-5
  )


class ThreadExchange:
  """``multihost.RowExchange`` of process p of P where the processes are threads: each
  exchange posts its value on the shared ``board`` and reads every thread's."""

  def __init__(self, p, num, board, barrier):
    self.p, self.num, self.board, self.barrier = p, num, board, barrier

  def _all(self, value):
    self.board[self.p] = value
    self.barrier.wait()
    out = list(self.board)
    self.barrier.wait()  # nobody posts the next value before every thread has read this one
    return out

  def gather(self, batch):
    parts = self._all(batch)
    return parts[0].replace(
      **{k: np.concatenate([getattr(b, k) for b in parts]) for k in ARRAYS},
      completions_N=[t for b in parts for t in b.completions_N],
      problems_N=[x for b in parts for x in b.problems_N],
    )

  def gather_arrays(self, arrays):
    parts = self._all(arrays)
    return {k: np.concatenate([a[k] for a in parts]) for k in arrays}

  def mean(self, values):
    parts = self._all(values)
    return {k: float(np.mean([v[k] for v in parts])) for k in values}

  def local(self, batch):
    n = batch.num_rows // self.num
    return batch.take(np.arange(self.p * n, (self.p + 1) * n), np.ones(n, bool))


def _share(rollout_fn, p, num):
  """Process p's ``(rollout_fn, problems_fn)`` of ``num``: the p-th equal part of each round's
  prompts, group ids offset to the job's (``multihost.process_share`` without a mesh)."""
  first = {}

  def local_problems(start, count):
    first["problem"] = p * count // num
    return problems_fn(start + first["problem"], count // num)

  def local_rollout(problems, rng):
    units = {"group_ids_N": 1, "subgroup_ids_N": 1}
    return multihost.offset_ids(rollout_fn(problems, rng), first["problem"], units)

  return local_rollout, local_problems


def _sample_on_threads(cfg, num):
  """``sample_batch`` as ``num`` processes (threads) run it: each one's (batch, consumed)."""
  board, barrier = [None] * num, threading.Barrier(num)
  outs, errors = [None] * num, []

  def run(p):
    try:
      local = _share(fake_rollout(LENGTHS)[0], p, num)
      exchange = ThreadExchange(p, num, board, barrier)
      outs[p] = ds.sample_batch(*local, 0, jax.random.PRNGKey(0), cfg, exchange=exchange)
    except Exception as e:  # noqa: BLE001 (re-raised below)
      errors.append(e)
      barrier.abort()

  threads = [threading.Thread(target=run, args=(p,)) for p in range(num)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  if errors:
    raise errors[0]
  return outs


# Problem 0 mod 4 is truncated (no EOS), the others are not: the processes' halves differ.
LENGTHS = [(T, T), (3, 5), (3, 5), (3, 5)]


@pytest.mark.parametrize("dynamic", [True, False])
def test_processes_keep_the_groups_one_process_keeps(monkeypatch, dynamic):
  """Two processes sampling half of each round's prompts: the groups kept, the rounds, the
  prompts consumed, y_t and the dapo/* metrics are the one-process run's, and each process
  holds its half of that run's batch rows."""
  cfg = make_cfg(dynamic_sampling=dynamic, max_sampling_rounds=5)
  single, consumed = ds.sample_batch(
    fake_rollout(LENGTHS)[0], problems_fn, 0, jax.random.PRNGKey(0), cfg
  )
  monkeypatch.setattr(jax, "process_count", lambda: 2)  # ids are job-wide (RolloutBatch.validate)
  outs = _sample_on_threads(cfg, 2)
  assert [c for _, c in outs] == [consumed] * 2
  for key, value in single.arrays().items():
    np.testing.assert_array_equal(np.concatenate([getattr(b, key) for b, _ in outs]), value, key)
  assert [x for b, _ in outs for x in b.problems_N] == single.problems_N
  for batch, _ in outs:
    assert batch.metrics == single.metrics and batch.step_accuracy == single.step_accuracy
  assert 0 < single.metrics["response/truncated_frac"] < 1
  if dynamic:
    assert single.metrics["dapo/rounds"] == 2 and single.metrics["dapo/kept_groups"] == 4
