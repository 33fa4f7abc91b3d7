"""rollout.off_policy_steps: the Prefetcher's order of draws and what it saves (unit), and the
loop's one-step off-policy run: batch k+1 drawn by θ_k, staleness logged, the sampler–trainer
gap it opens seen by the mismatch metrics and weighed by the correction, and a resumed run equal
to an uninterrupted one."""

import pathlib

import numpy as np
import pytest

from grpo_jax.config import files as config_file
from grpo_jax.rewards.functions import RewardError
from grpo_jax.rundir import read
from grpo_jax.train import modes
from grpo_jax.train.overlap import Prefetcher, prefetch_path
from tests.support import metrics_doc
from tests.support.length_aware import tiny_loop

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _prefetcher(tmp_path, off, drawn):
  def draw(cursor, key, params):
    drawn.append((cursor, key, params))
    return {"rows": (cursor, key, params)}, 3

  return Prefetcher(draw, lambda p: f"copy of {p}", off, tmp_path)


def test_on_policy_draws_each_batch_in_place_with_the_current_params(tmp_path):
  drawn = []
  prefetch = _prefetcher(tmp_path, 0, drawn)
  prefetch.start(1, 3, "k1", "θ0")  # a no-op on-policy
  batch, consumed, metrics = prefetch.take(1, 3, "k1", "θ1")
  assert drawn == [(3, "k1", "θ1")] and consumed == 3
  assert set(metrics) == {"time/rollout_s"}
  prefetch.close()


def test_off_policy_draws_the_next_batch_with_a_copy_of_the_params_before_the_update(tmp_path):
  drawn = []
  prefetch = _prefetcher(tmp_path, 1, drawn)
  batch0, consumed, m0 = prefetch.take(0, 0, "k0", "θ0")  # nothing drawn yet: on-policy
  prefetch.start(1, consumed, "k1", "θ0")  # while update 0 turns θ0 into θ1
  batch1, _, m1 = prefetch.take(1, 3, "k1", "θ1")
  assert drawn == [(0, "k0", "θ0"), (3, "k1", "copy of θ0")]
  assert batch1 == {"rows": (3, "k1", "copy of θ0")}
  assert (m0["rollout/staleness"], m1["rollout/staleness"]) == (0, 1)
  assert m1["time/rollout_wait_s"] >= 0
  prefetch.start(2, 6, "k2", "θ1")
  with pytest.raises(RuntimeError, match="for step 2, not 3"):
    prefetch.take(3, 9, "k3", "θ2")
  prefetch.close()


def test_the_batch_drawn_for_a_checkpoint_is_saved_and_taken_on_resume(tmp_path):
  drawn = []
  prefetch = _prefetcher(tmp_path, 1, drawn)
  prefetch.start(2, 6, "k2", "θ1")
  prefetch.save(2)
  prefetch.start(4, 12, "k4", "θ3")
  prefetch.save(4)  # replaces step 2's file
  prefetch.close()
  assert prefetch_path(tmp_path, 4).exists() and not prefetch_path(tmp_path, 2).exists()
  resumed = _prefetcher(tmp_path, 1, drawn := [])
  batch, consumed, metrics = resumed.take(4, 12, "k4", "θ4")
  assert drawn == [] and batch == {"rows": (12, "k4", "copy of θ3")}
  assert consumed == 3 and metrics["rollout/staleness"] == 1
  resumed.close()


@pytest.mark.xdist_group("overlap_loop")
def test_one_step_off_policy_trains_on_rows_of_the_params_before_the_update(tmp_path):
  on = tiny_loop(tmp_path, "on")
  off = tiny_loop(tmp_path, "off", "rollout.off_policy_steps=1")
  # Step 1 is on-policy in both (nothing drawn before it): the same rows, the same numbers (to
  # the rounding that off's token_tis weights, 1 on-policy, multiply in).
  assert off[0]["reward/mean"] == on[0]["reward/mean"]
  assert off[0]["loss/policy"] == pytest.approx(on[0]["loss/policy"], rel=1e-5)
  assert on[0]["adv/zero_std_frac"] < 1
  assert [m["rollout/staleness"] for m in off] == [0, 1, 1, 1]
  assert "rollout/staleness" not in on[0] and metrics_doc.undocumented(off[-1]) == []
  # Sampler and trainer agree to float rounding on-policy; one update stale they do not.
  on_gap = max(m["mismatch/kl"] for m in on)
  assert on_gap < 1e-6 and min(m["mismatch/kl"] for m in off[1:]) > 100 * max(on_gap, 1e-9)
  # Step 2 was drawn by θ0 from step 2's data position and key: a different batch from θ1's.
  key = lambda m: (m["reward/mean"], m["loss/policy"])
  assert key(off[1]) != key(on[1])
  # The default correction weighs the stale rows: auto resolves to token_tis off-policy (and
  # stays none on-policy), and moves the loss the same rows give uncorrected.
  resolved = lambda run: read.config(tmp_path / run)["config"]["loss"]["rollout_correction"]
  assert (resolved("off"), resolved("on")) == ("token_tis", "none")
  plain = tiny_loop(tmp_path, "plain", "rollout.off_policy_steps=1", "loss.rollout_correction=none")
  assert plain[1]["reward/mean"] == off[1]["reward/mean"]  # the same rows at step 2
  assert plain[1]["loss/policy"] != off[1]["loss/policy"]
  # The weight moves with the staleness: 1 to float rounding at step 1 (drawn by the params it
  # trains), away from 1 once the rows are one update stale.
  assert abs(off[0]["mismatch/is_weight_mean"] - 1.0) < 1e-5
  assert min(abs(m["mismatch/is_weight_mean"] - 1.0) for m in off[1:]) > 1e-4


@pytest.mark.xdist_group("overlap_loop")
def test_a_resumed_off_policy_run_equals_an_uninterrupted_one(tmp_path):
  args = ("rollout.off_policy_steps=1", "checkpoint.every=2")
  whole = tiny_loop(tmp_path, "whole", *args)
  # The grader fails on step 4's batch, drawn during update 3: the run stops after logging
  # step 3, its last checkpoint is step 2's, and step 3's batch (drawn by θ1) is saved beside it.
  (tmp_path / "fail_after").write_text("3")
  with pytest.raises(RewardError, match="the grader went away"):
    tiny_loop(tmp_path, "split", *args)
  assert [m["step"] for m in read.metrics(tmp_path / "split")] == [1, 2, 3]
  assert prefetch_path(tmp_path / "split", 2).exists()
  resumed = tiny_loop(tmp_path, "split", *args)
  assert len(resumed) == 4
  for a, b in zip(whole, resumed):
    a = {k: v for k, v in a.items() if not k.startswith(("time/", "perf/", "memory/"))}
    b = {k: v for k, v in b.items() if not k.startswith(("time/", "perf/", "memory/"))}
    assert a == b
  np.testing.assert_equal(whole[-1]["rollout/staleness"], 1)


def test_a_multi_process_off_policy_run_fails_before_any_file(tmp_path, monkeypatch):
  import jax

  monkeypatch.setattr(jax, "process_count", lambda: 2)
  cfg = config_file.load(str(ROOT / "configs/tiny_test.py"), ["rollout.off_policy_steps=1"])
  with pytest.raises(ValueError, match="rollout.off_policy_steps = 1 runs on one process"):
    modes.train(cfg, tmp_path / "run", log=lambda *_: None)
  assert not (tmp_path / "run").exists()
