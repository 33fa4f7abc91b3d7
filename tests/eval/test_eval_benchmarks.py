"""Benchmark result files, per-level tables and the summary table."""

import json

import jax
import numpy as np
from ml_collections import ConfigDict

from grpo_jax import data, models
from grpo_jax import sharding as shard_lib
from grpo_jax.eval import benchmarks
from grpo_jax.eval.runner import EvalLoop, benchmark_sets, eval_policy
from grpo_jax.rollout.one_stage import OneStageRollout


def test_by_level_matches_hand_values():
  correct_PxN = np.array([[1, 0], [0, 0], [1, 1]], bool)
  table = benchmarks.by_level(correct_PxN, [1, 2, 1], ks=(1, 2))
  assert table["1"] == {"pass@1": 0.75, "pass@2": 1.0, "num_problems": 2}
  assert table["2"] == {"pass@1": 0.0, "pass@2": 0.0, "num_problems": 1}


def test_levels_only_when_every_problem_has_one():
  assert benchmarks.levels_of([{"meta": {"level": 3}}, {"meta": {"level": 5}}]) == [3, 5]
  assert benchmarks.levels_of([{"meta": {"level": 3}}, {"meta": {}}]) is None


def test_results_and_summary_files(tmp_path):
  result = {
    "pass@1": 0.25,
    "pass@1_ci": [0.1, 0.4],
    "len_mean": 7.0,
    "sampling": {"temperature": 1.0, "top_p": 1.0, "n": 8},
  }
  path = benchmarks.write_result(tmp_path, "aime24", 30, result)
  assert path.name == "aime24_step30.json"
  assert json.loads(path.read_text())["pass@1"] == 0.25
  benchmarks.write_result(tmp_path, "aime24", 0, {**result, "pass@1": 0.125})
  summary = (tmp_path / "eval" / "summary.md").read_text().splitlines()
  assert summary[2].startswith("| aime24 | 0 |") and "0.125 [0.100, 0.400]" in summary[2]
  assert summary[3].startswith("| aime24 | 30 |") and "T=1.0, p=1.0, n=8" in summary[3]


def test_before_and_after_and_the_gain_per_level(tmp_path):
  level = lambda *p1: {str(i + 1): {"pass@1": v, "num_problems": 4} for i, v in enumerate(p1)}
  for step, p1 in ((0, (0.5, 0.25)), (5, (0.5, 0.5)), (20, (0.75, 0.5))):
    benchmarks.write_result(tmp_path, "math500", step, {"pass@1": 0.1, "by_level": level(*p1)})
  benchmarks.write_result(tmp_path, "aime24", 5, {"pass@1": 0.0})
  pairs = benchmarks.before_and_after(benchmarks.read_results(tmp_path))
  assert set(pairs) == {"math500", "aime24"} and pairs["aime24"][0] is None
  before, after = pairs["math500"]
  assert (before["step"], after["step"]) == (0, 20)  # the largest step, not "step5" sorted last
  assert benchmarks.level_gains(before, after) == {"1": 0.25, "2": 0.25}
  assert benchmarks.level_gains(before, pairs["aime24"][1]) == {}  # no levels: no gains


def test_evaluate_benchmarks_on_countdown(tmp_path, load_cfg):
  task = data.CountdownTask(eval_size=16)
  cfg = models.ModelConfig(
    vocab_size=len(task.tokenizer),
    hidden_dim=32,
    num_layers=1,
    num_heads=2,
    num_kv_heads=1,
    head_dim=16,
    mlp_dim=64,
  )
  graphdef, params = models.init_params(cfg, 0)
  eval_cfg = ConfigDict(
    {"num_problems": 16, "num_samples": 4, "ks": (1, 4, 8), "temperature": 1.0, "top_p": 1.0}
  )
  mesh = shard_lib.make_mesh(ConfigDict({"data": 1, "fsdp": 1, "tensor": 1}), jax.devices()[:1])
  policy = eval_policy(graphdef, params, mesh, eval_cfg, 12)
  loop = EvalLoop.from_config(OneStageRollout(load_cfg(), task), eval_cfg, 8, progress=False)
  sets = benchmark_sets(task, eval_cfg, with_strategy=False)
  out = loop.evaluate_benchmarks(policy, sets, jax.random.PRNGKey(0), tmp_path, step=0)
  result = json.loads((tmp_path / "eval" / "countdown_step0.json").read_text())
  assert result["num_problems"] == 16 and result["num_samples"] == 4
  assert "pass@8" not in result  # k > n is skipped, not extrapolated
  assert 0.0 <= result["pass@1"] <= result["pass@4"] <= 1.0
  assert out["countdown"]["pass@1"] == result["pass@1"]
  assert 0.0 <= result["maj@4"] <= result["pass@4"]  # a correct majority needs a correct sample
