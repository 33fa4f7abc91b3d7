"""What dynamic sampling's group filter reads (``dapo.filter_metric``, verl's
``algorithm.filter_groups.metric``): the verifier's accuracy by default, the shaped reward on
request; the two keep different groups once the overlong penalty shapes the reward."""

import jax
import numpy as np
import pytest

from grpo_jax.config import base_config, defaults, recipes
from grpo_jax.config import files as config_file
from grpo_jax.rollout import dynamic_sampling as ds
from grpo_jax.rollout.batch import RolloutBatch
from tests.config.test_config import ROOT

T = 10  # sampling.max_new_tokens; the penalty zone is the last 4 tokens (L > 6)
# Three prompts × G = 2, by hand: (accuracy, completion length) of each row.
#   prompt 0: both correct, the second 9 tokens long: shaped rewards 1, 1 − 3/4 = 0.25
#   prompt 1: one correct, one wrong, both short: 1, 0
#   prompt 2: both wrong, both short: 0, 0
ACCURACY = {0: (1.0, 1.0), 1: (1.0, 0.0), 2: (0.0, 0.0)}
LENGTHS = {0: (3, 9), 1: (3, 4), 2: (5, 5)}


def rollout_fn(problems, rng):
  del rng
  n = 2 * len(problems)
  lens_N = np.array([LENGTHS[p % 3] for p in problems]).ravel()
  mask_NxT = (np.arange(T)[None] < lens_N[:, None]).astype(np.int32)
  ids_N = np.repeat(np.arange(len(problems), dtype=np.int32), 2)
  return RolloutBatch(
    tokens_NxL=np.concatenate([np.full((n, 2), 3), np.where(mask_NxT > 0, 5, 0)], 1),
    input_mask_NxL=np.concatenate([np.ones((n, 2), np.int32), mask_NxT], 1),
    completion_mask_NxT=mask_NxT,
    sample_logps_NxT=np.zeros((n, T), np.float32),
    rewards_N=np.array([ACCURACY[p % 3] for p in problems], np.float32).ravel(),
    group_ids_N=ids_N,
    subgroup_ids_N=ids_N.copy(),
    truncated_N=np.zeros(n, bool),
    lengths_N=lens_N,
    problems_N=[p for p in problems for _ in range(2)],
    completions_N=[""] * n,
  )


def make_cfg(metric):
  return defaults(
    {
      "sampling.prompts_per_step": 2,
      "sampling.group_size": 2,
      "sampling.max_new_tokens": T,
      "dapo.dynamic_sampling": True,
      "dapo.oversample": 1.5,
      "dapo.max_sampling_rounds": 1,
      "dapo.overlong_penalty": True,
      "dapo.overlong_buffer": 4,
      "dapo.filter_metric": metric,
    }
  )


def sample(metric):
  # One round of ceil(1.5 · 2) = 3 prompts: 0, 1, 2.
  cfg = make_cfg(metric)
  return ds.sample_batch(rollout_fn, lambda s, c: list(range(s, s + c)), 0, jax.random.key(0), cfg)


def test_accuracy_filter_drops_the_all_correct_group_the_penalty_split():
  batch, consumed = sample("acc")
  assert consumed == 3
  # Prompt 0 (accuracy 1, 1; shaped 1, 0.25) is dropped: only prompt 1 is informative.
  assert batch.problems_N[:2] == [1, 1] and batch.problems_N[2:] == [None, None]
  np.testing.assert_array_equal(batch.group_ids_N, [0, 0, -1, -1])
  assert batch.metrics["dapo/kept_groups"] == 1
  np.testing.assert_allclose(batch.metrics["dapo/informative_frac"], 1 / 3)


def test_reward_filter_keeps_it():
  batch, _ = sample("seq_reward")
  # Prompt 0's shaped rewards differ (1 vs 0.25), so it is kept, before prompt 1.
  assert batch.problems_N == [0, 0, 1, 1]
  np.testing.assert_allclose(batch.rewards_N, [1.0, 0.25, 1.0, 0.0])
  np.testing.assert_array_equal(batch.accuracy_N, [1, 1, 1, 0])
  assert batch.metrics["dapo/kept_groups"] == 2
  np.testing.assert_allclose(batch.metrics["dapo/informative_frac"], 2 / 3)


def test_kept_groups_by_hand():
  batch = ds._shape_round(rollout_fn([0, 1, 2], None), make_cfg("acc"))
  np.testing.assert_allclose(batch.rewards_N, [1, 0.25, 1, 0, 0, 0])
  np.testing.assert_array_equal(batch.accuracy_N, [1, 1, 1, 0, 0, 0])
  kept = {
    m: ds.informative_groups(getattr(batch, f), batch.group_ids_N).tolist()
    for m, f in ds.FILTER_METRICS.items()
  }
  assert kept == {"acc": [1], "seq_reward": [0, 1]}


def test_default_and_recipe_filter_on_accuracy():
  assert base_config().dapo.filter_metric == "acc"
  assert recipes.dapo(base_config()).dapo.filter_metric == "acc"


def test_bad_metric_fails_at_load_naming_the_key_and_choices():
  tiny = str(ROOT / "configs/tiny_test.py")
  assert (
    config_file.load(tiny, ["dapo.filter_metric=seq_reward"]).dapo.filter_metric == "seq_reward"
  )
  with pytest.raises(ValueError, match=r"dapo.filter_metric = 'score' .*\['acc', 'seq_reward'\]"):
    config_file.load(tiny, ["dapo.filter_metric=score"])
