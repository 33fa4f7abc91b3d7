"""logging.samples_per_step: a few of each step's rollouts, readable, spread over the groups."""

import numpy as np

from grpo_jax.data import CountdownTask
from grpo_jax.train.samples import as_markdown, step_samples


def test_samples_per_step_picks_rows_across_groups(rollout_batch):
  task = CountdownTask(eval_size=4)
  problems = task.train_problems(0, 3)
  problems_N = [p for p in problems for _ in range(2)]
  batch = rollout_batch(
    group_ids_N=np.array([0, 0, 1, 1, 2, -1]),  # the last row is padding
    subgroup_ids_N=np.array([0, 1, 2, 3, 4, -1]),
    rewards_N=np.array([1.0, 0.0, 0.5, 0.0, 1.0, 0.0], np.float32),
    accuracy_N=np.array([1.0, 0.0, 1.0, 0.0, 1.0, 0.0], np.float32),
    truncated_N=np.array([False, True, False, False, False, False]),
    problems_N=problems_N,
    completions_N=[f"*-;{i}" for i in range(6)],
  )
  assert step_samples(batch, task, 0) == []
  records = step_samples(batch, task, 3)
  assert [r["group"] for r in records] == [0, 1, 2]  # evenly spread, padding never picked
  assert records[1] == {
    "problem_id": None,  # countdown problems carry no id; math rows their row id
    "prompt": task.prompt_text(problems[1]),
    "completion": "*-;2",
    "answer": task.answer_of("*-;2"),
    "reward": 0.5,
    "accuracy": 1.0,
    "group": 1,
    "subgroup": 2,
    "truncated": False,
  }
  assert len(step_samples(batch, task, 10)) == 5
  assert as_markdown(records).count("\n") == 4  # header, rule, three rows
