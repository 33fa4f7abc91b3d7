"""The built-in tasks and rollouts implement the ``Task`` and ``Rollout`` protocols, and an
object that lacks a member does not."""

import pathlib

import pytest
import real_model

from grpo_jax import models
from grpo_jax.config import files as config_file
from grpo_jax.data.countdown import CountdownTask
from grpo_jax.data.dataset_task import DatasetTask, Keys
from grpo_jax.data.math.task import MathOptions, MathTask
from grpo_jax.data.rewarded import RewardedTask
from grpo_jax.rewards.functions import RewardFunctions
from grpo_jax.rollout.one_stage import ROLLOUTS, OneStageRollout
from grpo_jax.rollout.protocols import Rollout, Task

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROWS = [{"id": str(i), "problem": f"{i} + 1?", "answer": str(i + 1)} for i in range(4)]


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
  tokenizer = models.load_tokenizer(str(real_model.hf_dir()))
  math = MathTask(tokenizer, ROWS, {"eval": ROWS[:2]}, MathOptions(max_prompt_tokens=64))
  path = tmp_path_factory.mktemp("rows") / "rows.jsonl"
  path.write_text('{"prompt": "Hi"}\n{"prompt": "Bye"}\n')
  dataset = DatasetTask(tokenizer, {"train": str(path)}, Keys(), MathOptions())
  rewarded = RewardedTask(dataset, RewardFunctions.load(["countdown"]))
  return {"countdown": CountdownTask(eval_size=4), "math": math, "dataset": dataset, "r": rewarded}


def test_every_task_is_a_task(tasks):
  for name, task in tasks.items():
    assert isinstance(task, Task), name
  assert tasks["math"].votes and not tasks["dataset"].votes and not tasks["r"].votes


def test_a_task_without_rewards_is_not_one(tasks):
  class NoRewards:
    def __init__(self, task):
      self.__dict__.update(vars(task))
      for member in ("train_problems", "eval_problems", "benchmarks", "encode_prompts"):
        setattr(self, member, getattr(task, member))
      for member in ("decode", "prompt_text", "answer_of"):
        setattr(self, member, getattr(task, member))

  assert not isinstance(NoRewards(tasks["countdown"]), Task)


def test_every_rollout_kind_is_a_rollout(tasks):
  cfg = config_file.load(str(ROOT / "configs/tiny_test.py"), ["strategy.num_previews=2"])
  for kind in ROLLOUTS.values():
    rollout = kind(cfg, tasks["countdown"])
    assert isinstance(rollout, Rollout), kind
  assert OneStageRollout(cfg, tasks["dataset"]).majority_vote is False
