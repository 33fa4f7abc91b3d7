"""``data.task = "dataset"``: a researcher's rows from JSON lines, a JSON list, CSV and Parquet, a
string or chat-message prompt, malformed rows named by file and line (stop or skip and count),
a held-out split, and every other column reaching the reward functions."""

import json

import numpy as np
import pytest

from grpo_jax import config as config_lib
from grpo_jax import models
from grpo_jax.data import hf_tokenizer, registry
from grpo_jax.data.dataset_task import DatasetTask, Keys, split_heldout
from grpo_jax.data.math.task import MathOptions
from grpo_jax.data.rewarded import RewardedTask
from grpo_jax.rewards.functions import RewardError, RewardFunctions
from tests.support import real_model

ROWS = [{"question": f"What is {i} + 2?", "gold": i + 2, "level": i % 3} for i in range(8)]


@pytest.fixture(scope="module")
def tokenizer():
  return models.load_tokenizer(str(real_model.hf_dir()))


def _write(path, rows):
  kind = path.suffix
  if kind == ".jsonl":
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
  elif kind == ".json":
    path.write_text(json.dumps(rows, indent=1))
  elif kind == ".csv":
    keys = list(rows[0])
    path.write_text(
      ",".join(keys) + "\n" + "".join(",".join(str(r[k]) for k in keys) + "\n" for r in rows)
    )
  elif kind == ".parquet":
    import pandas as pd

    pd.DataFrame(rows).to_parquet(path)
  return str(path)


def _task(tokenizer, train, evals=(), heldout=0, chat=True, **keys):
  template = hf_tokenizer.resolve_chat_template(tokenizer, "auto") if chat else None
  options = MathOptions(max_prompt_tokens=64, chat_template=template)
  sources = {"train": train, **{f"eval{i}": p for i, p in enumerate(evals)}}
  keys = Keys(**{"prompt": "question", "answer": "gold", **keys})
  return DatasetTask(tokenizer, sources, keys, options, heldout=heldout)


@pytest.mark.parametrize("kind", [".jsonl", ".json", ".csv", ".parquet"])
def test_every_file_kind_gives_the_same_rows(tokenizer, tmp_path, kind):
  task = _task(tokenizer, _write(tmp_path / f"train{kind}", ROWS))
  rows = task.train_pool
  assert [r["question"] for r in rows] == [r["question"] for r in ROWS]
  assert [r["answer"] for r in rows] == [str(r["gold"]) for r in ROWS]
  assert [str(r["level"]) for r in rows] == [str(r["level"]) for r in ROWS]  # CSV keeps text
  # A row's id is where it came from when it has none of its own.
  first = {".jsonl": ":1", ".json": "[0]", ".csv": ":2", ".parquet": "[0]"}[kind]
  assert rows[0]["id"].endswith(f"train{kind}{first}")
  # The prompt is the user turn of the chat template, every token kept.
  tokens_BxP, mask_BxP = task.encode_prompts(rows[:1])
  text = tokenizer.decode(tokens_BxP[0][mask_BxP[0] == 1])
  assert "<|im_start|>user\nWhat is 0 + 2?<|im_end|>" in text
  assert text.endswith("<|im_start|>assistant\n")


def test_chat_message_prompts_keep_their_roles(tokenizer, tmp_path):
  rows = [
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]}
  ]
  task = _task(tokenizer, _write(tmp_path / "chat.jsonl", rows), prompt="messages", answer="")
  tokens_BxP, mask_BxP = task.encode_prompts(task.train_pool)
  text = tokenizer.decode(tokens_BxP[0][mask_BxP[0] == 1])
  assert "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>" in text
  assert task.prompt_text(task.train_pool[0]) == rows[0]["messages"]
  with pytest.raises(ValueError, match="chat template"):
    _task(
      tokenizer, _write(tmp_path / "chat2.jsonl", rows), prompt="messages", answer="", chat=False
    )


BAD_LINES = [
  json.dumps(ROWS[0]),
  '{"question": "unclosed',  # line 2: not JSON
  json.dumps({"prompt": "wrong key", "gold": 1}),  # line 3: no question
  json.dumps({"question": 7, "gold": 1}),  # line 4: not a string
  json.dumps({"question": "no gold"}),  # line 5: no answer
  json.dumps({"question": "long " * 200, "gold": 1}),  # line 6: over max_prompt_tokens
  json.dumps(ROWS[1]),
]


@pytest.mark.parametrize(
  ("line", "reason"),
  [(2, "not valid JSON"), (3, "no prompt column"), (4, "prompt is int"), (5, "no answer column")],
)
def test_a_malformed_row_stops_the_load_naming_file_and_line(tokenizer, tmp_path, line, reason):
  path = tmp_path / "bad.jsonl"
  path.write_text("\n".join([BAD_LINES[0], BAD_LINES[line - 1], BAD_LINES[-1]]) + "\n")
  with pytest.raises(ValueError, match=rf"bad\.jsonl:2: {reason}"):
    _task(tokenizer, str(path))
  del line


def test_a_prompt_over_the_width_is_named_too(tokenizer, tmp_path):
  path = tmp_path / "long.jsonl"
  path.write_text("\n".join([BAD_LINES[0], BAD_LINES[5]]) + "\n")
  with pytest.raises(ValueError, match=r"long\.jsonl:2: prompt of \d+ tokens, over"):
    _task(tokenizer, str(path))


def test_skip_drops_and_counts_every_malformed_row(tokenizer, tmp_path):
  path = tmp_path / "bad.jsonl"
  path.write_text("\n".join(BAD_LINES) + "\n")
  task = _task(tokenizer, str(path), bad_rows="skip")
  assert [r["question"] for r in task.train_pool] == [ROWS[0]["question"], ROWS[1]["question"]]
  assert task.load_metrics == {"data/skipped_rows": 5.0}


def test_heldout_rows_are_disjoint_seeded_and_only_without_eval_files(tokenizer, tmp_path):
  train = _write(tmp_path / "train.jsonl", ROWS)
  task = _task(tokenizer, train, heldout=3)
  held = [r["question"] for r in task.eval_problems()]
  assert len(held) == 3 and list(task.eval_sets) == ["heldout"]
  assert not set(held) & {r["question"] for r in task.train_pool}
  assert len(task.train_pool) == 5
  assert split_heldout(ROWS, 3, 0) == split_heldout(ROWS, 3, 0)
  assert split_heldout(ROWS, 3, 0) != split_heldout(ROWS, 3, 1)
  with pytest.raises(ValueError, match="holds out every one"):
    split_heldout(ROWS, 8, 0)
  evals = _task(tokenizer, train, [_write(tmp_path / "test.jsonl", ROWS[:2])], heldout=3)
  assert list(evals.eval_sets) == ["eval0"] and len(evals.train_pool) == 8


REWARDS = """
def by_level(prompts, completions, level, gold, **columns):
    by_level.seen = (list(prompts), list(level), list(gold), sorted(columns))
    return [float(lv) if str(g) in c else None for c, lv, g in zip(completions, level, gold)]
"""


def test_every_column_reaches_the_reward_functions(tokenizer, tmp_path):
  (tmp_path / "my_rewards.py").write_text(REWARDS)
  fns = RewardFunctions.load([f"{tmp_path}/my_rewards.py:by_level", "math"], (1.0, 10.0))
  task = RewardedTask(_task(tokenizer, _write(tmp_path / "train.jsonl", ROWS)), fns)
  rows = task.train_problems(0, 3)
  completions = [f"\\boxed{{{r['gold']}}}" for r in rows[:2]] + ["no idea"]
  rewards_N, metrics = task.rewards(rows, completions)
  prompts, levels, golds, others = fns.fns[0].seen
  assert prompts == [r["question"] for r in rows]
  assert levels == [r["level"] for r in rows] and golds == [r["gold"] for r in rows]
  assert others == ["answer", "id", "question"]  # the task's own fields stay hidden
  expected = [rows[0]["level"] + 10.0, rows[1]["level"] + 10.0, 0.0]
  np.testing.assert_allclose(rewards_N, expected)
  assert metrics["reward/by_level/scored_frac"] == pytest.approx(2 / 3)
  assert metrics["reward/math/mean"] == pytest.approx(2 / 3)
  assert task.train_pool is task._task.train_pool  # everything else is the task's


def test_a_bad_reward_names_the_function(tokenizer, tmp_path):
  (tmp_path / "r.py").write_text("def short(prompts, completions, **c):\n    return [1.0]\n")
  task = RewardedTask(
    _task(tokenizer, _write(tmp_path / "train.jsonl", ROWS)),
    RewardFunctions.load([f"{tmp_path}/r.py:short"]),
  )
  with pytest.raises(RewardError, match="reward function short returned 1 values for 2"):
    task.rewards(task.train_problems(0, 2), ["a", "b"])


def _config(overrides):
  cfg = config_lib.base_config()
  for key, value in overrides.items():
    config_lib.override(cfg, key, value)
  return config_lib.finalize(cfg)


def test_the_config_builds_a_rewarded_dataset_task(tmp_path):
  train = _write(tmp_path / "train.jsonl", ROWS)
  (tmp_path / "r.py").write_text(REWARDS)
  overrides = {
    "data.task": "dataset",
    "data.train_path": train,
    "data.prompt_key": "question",
    "data.answer_key": "gold",
    "data.eval_size": 2,
    "model.hf_path": str(real_model.hf_dir()),
    "reward.functions": (f"{tmp_path}/r.py:by_level",),
  }
  task = registry.build_task(_config(overrides))
  assert isinstance(task, RewardedTask) and len(task.train_pool) == 6
  assert task.functions.names == ("by_level",)
  missing = {k: v for k, v in overrides.items() if k != "reward.functions"}
  with pytest.raises(ValueError, match="needs data.train_path .* reward.functions"):
    _config(missing)
