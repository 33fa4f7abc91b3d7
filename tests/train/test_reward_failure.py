"""A reward function that fails mid-run stops the run naming the function, and the failed step
is neither logged nor checkpointed: the run resumes from the step before."""

import pathlib

import numpy as np
import pytest

from grpo_jax.config import files as config_file
from grpo_jax.rewards.functions import RewardError
from grpo_jax.rundir import read
from grpo_jax.train import modes
from grpo_jax.train.checkpoint import Checkpointer
from tests.support import metrics_doc

ROOT = pathlib.Path(__file__).resolve().parents[2]
FLAKY = """
def flaky(prompts, completions, **columns):
    flaky.calls += 1
    if flaky.calls == 2:
        raise ZeroDivisionError("the grader's server went away")
    return [0.5] * len(completions)
flaky.calls = 0
"""


def test_a_failing_reward_function_stops_before_the_step_is_kept(tmp_path):
  (tmp_path / "flaky.py").write_text(FLAKY)
  overrides = [
    "steps=3",
    "eval.before=false",
    "eval.after=false",
    "logging.plot=false",
    "logging.tensorboard=false",
    f"reward.functions=('countdown', '{tmp_path}/flaky.py:flaky')",
    "reward.weights=(1.0, 2.0)",
  ]
  cfg = config_file.load(str(ROOT / "configs/tiny_test.py"), overrides)
  workdir = tmp_path / "run"
  with pytest.raises(RewardError, match="reward function flaky raised ZeroDivisionError"):
    modes.train(cfg, workdir, log=lambda *_: None)
  (step1,) = read.metrics(workdir)
  assert step1["step"] == 1
  # Every row scored 0.5 by flaky (weight 2) beside the countdown grader (weight 1).
  assert step1["reward/flaky/mean"] == 0.5 and step1["reward/flaky/std"] == 0.0
  expected = step1["reward/countdown/mean"] + 2 * 0.5
  np.testing.assert_allclose(step1["reward/mean"], expected, rtol=1e-6)
  assert Checkpointer(workdir / "checkpoints", 1, 2).latest_step() == 1
  assert metrics_doc.undocumented(step1) == []  # docs/metrics.md


def test_the_documentation_check_expands_shorthand_and_flags_the_rest():
  page = "| `reward/<fn>/mean`, `/std` | x |\n| `response/len_mean`, `/len_max` | y |\n"
  keys = ["reward/label/std", "response/len_max", "reward/a/b/std", "response/len_min", "step"]
  assert metrics_doc.undocumented(keys, page) == ["response/len_min", "reward/a/b/std"]
