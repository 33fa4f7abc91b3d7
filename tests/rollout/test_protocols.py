"""The built-in tasks and rollouts implement the ``Task`` and ``Rollout`` protocols, an object
that lacks a member does not, and a reward call's metrics are its own on every thread."""

import dataclasses
import pathlib
import threading

import numpy as np
import pytest

from grpo_jax import models
from grpo_jax.config import files as config_file
from grpo_jax.data.countdown import CountdownTask
from grpo_jax.data.dataset_task import DatasetTask, Keys
from grpo_jax.data.math.task import MathOptions, MathTask
from grpo_jax.data.rewarded import RewardedTask
from grpo_jax.rewards.functions import RewardFunctions
from grpo_jax.rollout.one_stage import OneStageRollout
from grpo_jax.rollout.protocols import Rollout, Task
from grpo_jax.rollout.registry import ROLLOUTS
from tests.support import real_model

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


# Each call waits for the other (a barrier): a training rollout's grading and an evaluation's
# run at once, as with rollout.off_policy_steps = 1.
BOTH_AT_ONCE = """
import threading
BOTH = threading.Barrier(2, timeout=60)

def length(prompts, completions, **columns):
  BOTH.wait()
  return [float(len(c)) for c in completions]
"""


def test_two_threads_grading_at_once_each_log_their_own_reward_metrics(tmp_path, monkeypatch):
  """A reward call returns its metrics with its rewards and the rollout logs those: the rollout
  thread's batch never carries an evaluation's counters, and no task keeps a last call's."""
  from grpo_jax.rollout import one_stage
  from grpo_jax.sampling.generate import Samples

  (tmp_path / "r.py").write_text(BOTH_AT_ONCE)
  task = RewardedTask(CountdownTask(eval_size=4), RewardFunctions.load([f"{tmp_path}/r.py:length"]))

  def generate_with(engine, policy, task, prompts_NxP, prompt_mask_NxP, rng, group_size=1):
    N, text = len(prompts_NxP), policy  # the "policy" is the text every row completes with
    zeros_NxT = np.zeros((N, 2), np.int32)
    samples = Samples(zeros_NxT, zeros_NxT, zeros_NxT.astype(np.float32), np.zeros(N, bool), 0, 0)
    return dataclasses.replace(samples, completions=(text,) * N), 0.0

  monkeypatch.setattr(one_stage, "generate_with", generate_with)
  cfg = config_file.load(str(ROOT / "configs/tiny_test.py"))
  rollout = OneStageRollout(cfg, task)
  problems, batches = task.eval_problems(2), {}

  def sample(name, text):
    batches[name] = rollout.sample(text, problems, 2, rng=None)

  train = threading.Thread(target=sample, args=("train", "ab"))
  train.start()
  sample("eval", "abcd")
  train.join(60)
  assert batches["train"].metrics["reward/length/mean"] == 2.0
  assert batches["eval"].metrics["reward/length/mean"] == 4.0
  np.testing.assert_array_equal(batches["train"].rewards_N, [2.0] * 4)
  for each in (task, task._task):
    assert not hasattr(each, "last_reward_metrics")
