"""Every mode multi-host: 2 processes × 4 CPU devices give the same run as 1 process × 8 devices
(same parameters after 2 steps, same metrics, same pass@k) with strategy sampling (presampled
and online), the warm start, evaluation before and after, and DAPO dynamic sampling."""

import json

import datasets
import numpy as np
import pytest

from tests.e2e.multihost_launch import assert_same_run, final, metrics, run_pair, run_single, work

STRATEGY = [
  "--config.strategy.enabled=true",
  "--config.strategy.num_previews=3",
  "--config.advantage.baseline=subgroup_offset",
  "--config.advantage.offset_coef=-0.5",
]
STRATEGY_KEYS = ("strategy/distinct_previews", "strategy/subgroup_reward_spread")


def _json(path):
  return json.loads(path.read_text())


def _eval_results(workdir) -> dict:
  """{file name: contents} of the run's eval/ folder (summaries and per-problem records)."""
  return {p.name: p.read_text() for p in sorted((workdir / "eval").iterdir()) if p.is_file()}


@pytest.mark.slow
def test_warm_start_presampled_strategy_and_evaluation(tmp_path, launcher_env):
  """Warm start (SFT steps sharded by rows, its validation split over processes), previews
  presampled by both processes (--mode=presample) and read back in 2 RL steps, evaluation with
  strategy before and after: the same parameters, previews, warm-start history and pass@k."""
  extra = [
    *STRATEGY,
    "--config.strategy.source=presampled",
    "--config.warmstart.enabled=true",
    "--config.warmstart.max_steps=3",
    "--config.warmstart.check_every=2",
    "--config.warmstart.check_problems=8",
    "--config.warmstart.batch_size=16",
    "--config.warmstart.target_pass1=1.0",
    "--config.eval.before=true",
    "--config.eval.after=true",
    "--config.eval.with_strategy=true",
  ]
  single, pair = tmp_path / "single", tmp_path / "pair"
  for mode in (["--mode=presample"], []):
    run_single(launcher_env, single, extra + mode)
    run_pair(launcher_env, pair, extra + mode)

  # Sums over devices in another order (one process, or gloo between two) leave float noise
  # after the warm start's Adam steps: ~1e-6 on parameters of ~0.1.
  keys = ("loss/total", "reward/mean", "grad/norm", *STRATEGY_KEYS)
  assert_same_run(single, pair, keys=keys, atol=1e-5)
  history, other = _json(single / "warmstart.json"), _json(pair / "warmstart.json")
  assert [h["step"] for h in history] == [h["step"] for h in other] == [2, 3]
  assert [h["pass@1"] for h in other] == [h["pass@1"] for h in history]
  np.testing.assert_allclose([h["loss"] for h in other], [h["loss"] for h in history], rtol=1e-5)
  a, b = (datasets.load_from_disk(str(d / "presample/data")).to_dict() for d in (single, pair))
  assert len(a["index"]) == 16
  assert {k: v for k, v in a.items() if k != "preview_logps"} == {
    k: v for k, v in b.items() if k != "preview_logps"
  }
  for x, y in zip(a["preview_logps"], b["preview_logps"]):
    np.testing.assert_allclose(np.concatenate(x), np.concatenate(y), atol=1e-5)
  ra, rb = _json(single / "results.json"), _json(pair / "results.json")
  for when in ("before", "after"):
    assert ra[when] == rb[when], when  # pass@k with its CIs, lengths, truncation
  assert ra["after"]["pass@4"] > 0 and ra["after"]["num_problems"] == 8
  assert _eval_results(pair) == _eval_results(single)  # summaries and per-problem records
  assert _json(pair / "strategy_previews.json") == _json(single / "strategy_previews.json")
  # The warm start's rows, its validation, the presample and evaluation split, not repeated.
  assert work(pair) == work(single) and work(single)["graded_rows"] > 0


@pytest.mark.slow
def test_dynamic_sampling_with_online_strategy(tmp_path, launcher_env):
  """DAPO dynamic sampling over up to 3 rounds with online previews: groups whose rewards are
  all equal are dropped, so some step samples a second round; both runs keep the same groups,
  stop after the same round, consume the same prompts and log the same dapo/* metrics."""
  extra = [
    *STRATEGY,
    "--config.strategy.source=online",
    "--config.dapo.dynamic_sampling=true",
    "--config.dapo.max_sampling_rounds=3",
  ]
  single, pair = tmp_path / "single", tmp_path / "pair"
  run_single(launcher_env, single, extra)
  run_pair(launcher_env, pair, extra)
  dapo = ("dapo/kept_groups", "dapo/rounds", "dapo/sampled_groups", "dapo/informative_frac")
  keys = ("loss/total", "reward/mean", "grad/norm", *dapo, "dapo/sampled_reward_mean")
  assert_same_run(single, pair, keys=keys + STRATEGY_KEYS)
  steps = metrics(single)
  # Without filtering every step is one round of 8 groups, all kept.
  assert any(m["dapo/rounds"] > 1 and m["dapo/sampled_groups"] > 8 for m in steps), steps
  assert all(m["dapo/kept_groups"] == 8 for m in steps)
  (state_a, _), (state_b, _) = final(single), final(pair)
  assert int(np.asarray(state_a["data_pos"])) == int(np.asarray(state_b["data_pos"])) > 16
  assert work(pair) == work(single)  # every round's prompts sampled and graded once
