"""Own reward functions (``reward.functions``): loaded by module, file or built-in name, called
TRL's way, weighted with None as "no score", and every misbehaviour named."""

import math

import numpy as np
import pytest

from grpo_jax.config import base_config, finalize
from grpo_jax.rewards import functions as fns

FILE = """
def length(prompts, completions, **columns):
    return [float(len(c)) for c in completions]

def echo_target(prompts, completions, target, **columns):
    return [1.0 if str(t) in c else None for c, t in zip(completions, target)]

def seen(prompts, completions, **columns):
    seen.calls.append((list(prompts), sorted(columns)))
    return [0.0] * len(completions)
seen.calls = []

def raises(prompts, completions, **columns):
    raise KeyError("no such column")

def short(prompts, completions, **columns):
    return [1.0]

def nan(prompts, completions, **columns):
    return [float("nan")] * len(completions)
"""


@pytest.fixture
def rewards_file(tmp_path):
  path = tmp_path / "my_rewards.py"
  path.write_text(FILE)
  return str(path)


def test_weighted_sum_with_none_as_no_score(rewards_file):
  rf = fns.RewardFunctions.load(
    [f"{rewards_file}:length", f"{rewards_file}:echo_target"], (0.5, 2.0)
  )
  assert rf.names == ("length", "echo_target")
  columns = {"target": [7, 8, 9]}
  total, metrics = rf(["p"] * 3, ["a7", "bb", "ccc9"], columns)
  # 0.5·len + 2·(1 where the target is in the completion); row 1 has no echo_target score.
  np.testing.assert_allclose(total, [0.5 * 2 + 2.0, 0.5 * 2, 0.5 * 4 + 2.0])
  assert metrics["reward/echo_target/scored_frac"] == pytest.approx(2 / 3)
  assert metrics["reward/echo_target/mean"] == 1.0
  assert metrics["reward/length/max"] == 4.0 and metrics["reward/length/min"] == 2.0
  assert metrics["reward/unscored_frac"] == 0.0


def test_prompts_and_the_other_columns_reach_the_function(rewards_file):
  rf = fns.RewardFunctions.load([f"{rewards_file}:seen"])
  rf(["q1", "q2"], ["a", "b"], {"answer": ["1", "2"], "level": [3, 4]})
  assert rf.fns[0].calls == [(["q1", "q2"], ["answer", "level"])]


def test_importable_and_builtin_names():
  rf = fns.RewardFunctions.load(["countdown"])
  total, _ = rf(["p"], ["a;3+4"], {"numbers": [(3, 4)], "target": [7]})
  assert total.tolist() == [1.0]
  assert fns.load("grpo_jax.rewards.functions:describe") is fns.describe


@pytest.mark.parametrize(
  "name,needle",
  [
    ("raises", r"reward function raises raised KeyError"),
    ("short", r"reward function short returned 1 values for 2 completions"),
    ("nan", r"reward function nan returned nan for row 0"),
  ],
)
def test_a_misbehaving_function_stops_naming_itself_and_the_row(rewards_file, name, needle):
  rf = fns.RewardFunctions.load([f"{rewards_file}:{name}"])
  with pytest.raises(fns.RewardError, match=needle):
    rf(["p", "q"], ["a", "b"], {"id": ["r0", "r1"]})


def test_bad_names_and_weights_fail_at_load(rewards_file, tmp_path):
  cases = [
    (("nope",), (), "neither a built-in"),
    ((str(tmp_path / "missing.py") + ":f",), (), "no file"),
    ((f"{rewards_file}:length",), (1.0, 2.0), "one weight per function"),
  ]
  for functions, weights, needle in cases:
    cfg = base_config()
    cfg.reward.functions, cfg.reward.weights = functions, weights
    with pytest.raises(ValueError, match=needle):
      finalize(cfg)
  with pytest.raises(ValueError, match="has no function 'missing'"):
    fns.load(f"{rewards_file}:missing")


def test_describe_of_nothing_is_nan():
  assert all(math.isnan(v) for v in fns.describe("reward/x", []).values())
