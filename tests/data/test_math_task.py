"""The math task adapter: fixed-width left-padded prompts, a seeded stream, verified rewards."""

import json
import string

import numpy as np
import pytest

from grpo_jax.data.math.load import load_math_dataset
from grpo_jax.data.math.task import MathTask
from grpo_jax.data.tokenizer import build_tokenizer


@pytest.fixture(scope="module")
def task(tmp_path_factory):
  path = tmp_path_factory.mktemp("math") / "train.jsonl"
  rows = [{"problem": f"What is {a} + {a}?", "answer": str(2 * a)} for a in range(1, 13)]
  rows.append({"problem": "x" * 400, "answer": "1"})  # too long for the prompt width
  path.write_text("".join(json.dumps(r) + "\n" for r in rows))
  tok = build_tokenizer(string.printable)
  loaded, _ = load_math_dataset("aime24", str(path))
  return MathTask(tok, loaded, {"aime24": loaded[:4]}, template="hadw", max_prompt_tokens=96)


def test_prompts_are_left_padded_to_the_fixed_width(task):
  rows = task.train_problems(0, 3)
  tokens_BxP, mask_BxP = task.encode_prompts(rows)
  assert tokens_BxP.shape == mask_BxP.shape == (3, task.prompt_len)
  for row, toks, mask in zip(rows, tokens_BxP, mask_BxP):
    real = toks[mask == 1]
    assert task.tokenizer.decode(real.tolist()) == task.prompt_text(row)
    assert np.all(toks[: task.prompt_len - len(real)] == task.pad_id)
    assert np.all(mask[: task.prompt_len - len(real)] == 0)


def test_too_long_prompts_are_dropped_and_counted(task):
  assert task.dropped_too_long == 1 and len(task.train_rows) == 12
  assert all(len(r["input_ids"]) <= task.prompt_len for r in task.train_rows)


def test_training_stream_is_deterministic_and_covers_each_epoch(task):
  n = len(task.train_rows)
  first = [r["id"] for r in task.train_problems(0, n)]
  assert sorted(first) == sorted(r["id"] for r in task.train_rows)
  assert first == [r["id"] for r in task.train_problems(0, n)]
  split = [r["id"] for r in task.train_problems(0, 5) + task.train_problems(5, n - 5)]
  assert split == first
  assert [r["id"] for r in task.train_problems(n, n)] != first  # a new permutation per epoch


def test_rewards_are_verified_and_counted(task):
  rows = task.eval_problems()[:2]
  golds = [r["answer"] for r in rows]
  completions = [f"so \\boxed{{{golds[0]}}}", "I think Answer: 999"]
  rewards_N, metrics = task.rewards(rows, completions)
  np.testing.assert_array_equal(rewards_N, [1.0, 0.0])
  assert metrics["reward/fastpath"] >= 1


def test_decode_uses_only_masked_tokens(task):
  ids = task.tokenizer("Answer: 4", add_special_tokens=False)["input_ids"]
  tokens = np.array([ids + [task.eos_id, 5, 5]])
  mask = np.array([[1] * (len(ids) + 1) + [0, 0]])
  assert task.decode(tokens, mask) == ["Answer: 4"]


def test_data_keys_reach_the_task(tmp_path):
  from grpo_jax.config import defaults

  path = tmp_path / "rows.jsonl"
  path.write_text(
    "".join(
      json.dumps({"problem": f"What is {a} + {a}?", "answer": str(2 * a)}) + "\n"
      for a in range(1, 9)
    )
  )
  tok = build_tokenizer(string.printable)
  cfg = defaults(
    {
      "data.task": "math",
      "data.train_set": "aime24",
      "data.train_path": str(path),
      "data.eval_sets": ("aime25",),
      "data.eval_paths": (str(path),),
      "data.template": "hadw",
      "data.max_prompt_tokens": 96,
    }
  )
  task = MathTask.from_config(cfg, tok)
  assert list(task.benchmarks()) == ["aime25"] and len(task.train_rows) == 8
  assert task.prompt_len == 96 and task.timeout_s == cfg.data.reward_timeout_s
  assert task.prompt_text(task.train_rows[0]).endswith("within \\boxed{}.")
  keys = {"data.template": "boxed", "data.max_prompt_tokens": 40, "data.reward_timeout_s": 1.0}
  other = MathTask.from_config(cfg.with_overrides(keys), tok)
  assert other.prompt_len == 40 and other.timeout_s == 1.0
  assert other.dropped_too_long > 0  # the longer template no longer fits 40 tokens
  assert task.num_workers == 0  # sized from the host when the pool starts
  assert MathTask.from_config(cfg.with_overrides({"data.reward_workers": 3}), tok).num_workers == 3
  head = MathTask.from_config(cfg.with_overrides({"data.train_limit": 3}), tok).train_pool
  assert [r["id"] for r in head] == [r["id"] for r in task.train_pool[:3]]


def test_warm_start_runs_on_the_math_task():
  """``warmstart.enabled`` with data.task='math': supervised steps on the set's worked solutions
  (the task had no sft_batch before), validated by sampling and grading."""
  import jax

  from grpo_jax import config as config_lib
  from grpo_jax import models
  from grpo_jax import sharding as shard_lib
  from grpo_jax.train.warmstart import warm_start

  tok = build_tokenizer(string.printable)
  rows, _ = load_math_dataset("arithmetic", None)
  cfg = config_lib.base_config()
  cfg.data.task, cfg.data.train_set, cfg.data.template = "math", "arithmetic", "boxed"
  cfg.sampling.max_new_tokens, cfg.sampling.group_size = 48, 2
  cfg.warmstart.max_steps, cfg.warmstart.check_every, cfg.warmstart.batch_size = 2, 2, 4
  cfg.warmstart.check_problems, cfg.logging.progress, cfg.mesh.data = 2, False, 1
  cfg = config_lib.finalize(cfg)
  task = MathTask(
    tok, rows[:64], {"eval": rows[:2]}, template="boxed", max_prompt_tokens=96, completion_len=48
  )
  mesh = shard_lib.make_mesh(cfg.mesh, jax.devices()[:1])
  graphdef, params = models.build_policy(cfg, vocab_size=len(tok))
  before = jax.tree.map(np.asarray, params)
  params, history = warm_start(
    graphdef, shard_lib.replicate(params, mesh), task, cfg, mesh, log=lambda *_: None
  )
  assert [h["step"] for h in history] == [2] and np.isfinite(history[0]["loss"])
  assert 0.0 <= history[0]["pass@1"] <= 1.0
  moved = [
    np.abs(np.asarray(a) - b).max()
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(before))
  ]
  assert max(moved) > 0.0
