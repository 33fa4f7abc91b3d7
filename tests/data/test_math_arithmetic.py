"""The generated arithmetic set, GSM8K's ``####`` answers and the solution field."""

import itertools
import json
import re

import pytest

from grpo_jax.data import math as dm
from grpo_jax.data.math import arithmetic
from grpo_jax.rewards import math as rm


def write_jsonl(path, rows):
  with open(path, "w") as f:
    for r in rows:
      f.write(json.dumps(r) + "\n")
  return str(path)


@pytest.fixture(scope="module")
def train_eval():
  train, train_report = dm.load_math_dataset("arithmetic", None)
  evals, _ = dm.load_math_dataset("arithmetic_eval", None)
  return train, evals, train_report


def test_sizes_and_fields(train_eval):
  train, evals, report = train_eval
  assert len(train) == 20_000 and len(evals) == 1_000 and report.malformed == 0
  assert report.source == "generated:arithmetic"
  row = train[0]
  assert set(row) == {"id", "problem", "answer", "meta", "solution"}
  assert set(row["meta"]) == {"level", "kind", "source", "row"}
  assert row["meta"]["source"] == "arithmetic" and row["id"] == "arithmetic-train-0-0"
  assert len({r["id"] for r in train}) == len(train)


def test_a_limited_load_reads_the_head_of_the_set(train_eval):
  """The loader stops the generator at ``limit`` rows: the same rows as the full set's head."""
  head, report = dm.load_math_dataset("arithmetic", None, limit=300)
  assert head == train_eval[0][:300] and report.rows_read == 300
  assert arithmetic.generate("train", n=300) == list(itertools.islice(arithmetic.iterate(), 300))


def test_train_and_eval_share_no_problem(train_eval):
  train, evals, _ = train_eval
  assert not {r["problem"] for r in train} & {r["problem"] for r in evals}
  assert all(arithmetic.in_eval_split(r["problem"]) for r in evals)


def test_levels_and_default_mix(train_eval):
  train, _, _ = train_eval
  counts = {lv: sum(r["meta"]["level"] == lv for r in train) for lv in arithmetic.LEVELS}
  for lv, w in zip(arithmetic.LEVELS, arithmetic.DEFAULT_WEIGHTS):
    assert abs(counts[lv] / len(train) - w) < 0.02, counts
  assert all(int(r["answer"]) >= 0 and r["answer"] == str(int(r["answer"])) for r in train)


def test_answers_are_right():
  # Recompute each expression-only problem's answer independently of the generator.
  rows = arithmetic.generate("train", n=2000, seed=3, level_weights=(1, 1, 1, 1, 0))
  for r in rows:
    expr = re.sub(r"^(What is|Compute|Calculate|Evaluate) ", "", r["problem"])
    expr = expr.rstrip("?.").replace("×", "*")
    assert eval(expr, {}) == int(r["answer"]), r  # noqa: S307 — digits and + - * ( ) only


def test_word_problem_answers_are_right():
  rows = arithmetic.generate("train", n=600, seed=4, level_weights={5: 1.0})
  for r in rows:
    nums = [int(x) for x in re.findall(r"\d+", r["problem"])]
    if r["kind"] == "word_mul_sub":  # n boxes of per, gives away gone
      expected = nums[0] * nums[1] - nums[2]
    elif r["kind"] == "word_add_div":  # had a, bought b, split among c
      expected, rem = divmod(nums[0] + nums[1], nums[2])
      assert rem == 0
    else:  # n at $p, m at $(p+1), pays
      n, p, m, p1, paid = nums
      assert p1 == p + 1
      expected = paid - n * p - m * p1
    assert expected == int(r["answer"]) >= 0, r


def test_worked_examples_by_hand():
  a = arithmetic._times_steps(23, 47)
  assert a == ["23 × 47 = 23 × 40 + 23 × 7 = 920 + 161 = 1081."]
  assert arithmetic._times_steps(67, 4) == ["67 × 4 = 60 × 4 + 7 × 4 = 240 + 28 = 268."]


def test_level_mix_is_configurable_and_deterministic():
  only5 = arithmetic.generate("train", n=300, seed=1, level_weights={5: 1.0})
  assert {r["level"] for r in only5} == {5} and all("?" in r["problem"] for r in only5)
  assert {r["kind"] for r in only5} == {"word_mul_sub", "word_add_div", "word_change"}
  assert arithmetic.generate("eval", n=50, seed=7) == arithmetic.generate("eval", n=50, seed=7)
  assert arithmetic.generate("eval", n=50, seed=7) != arithmetic.generate("eval", n=50, seed=8)
  with pytest.raises(ValueError):
    arithmetic.generate("train", n=5, level_weights=(1, 0, 0))
  with pytest.raises(ValueError):
    arithmetic.generate("dev", n=5)


def test_every_solution_grades_1_against_its_gold_and_a_wrong_gold_0():
  rows = arithmetic.generate("train", n=200, seed=5, level_weights=(1, 1, 1, 1, 1))
  assert {r["level"] for r in rows} == set(arithmetic.LEVELS)
  kinds = {r["kind"] for r in rows}
  assert len(kinds) == 10  # every template appears
  sols = [r["solution"] for r in rows]
  assert all(
    s.splitlines()[-1] == f"So the answer is \\boxed{{{r['answer']}}}." for s, r in zip(sols, rows)
  )
  right, _ = rm.score_batch(sols, [r["answer"] for r in rows])
  wrong, _ = rm.score_batch(sols, [str(int(r["answer"]) + 1) for r in rows])
  assert right.tolist() == [1.0] * len(rows) and wrong.tolist() == [0.0] * len(rows)


def test_gsm8k_answer_after_marker_and_solution_before(tmp_path):
  rows = [
    {
      "question": "Natalia sold 48 clips in April and half as many in May. How many in all?",
      "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nIn all 48+24 = <<48+24=72>>72."
      "\n#### 72",
    },
    {"question": "A big sum?", "answer": "It is 1,000 + 234.\n####  1,234 "},
    {"question": "No marker?", "answer": "The answer is 5."},
    {"question": "Empty answer?", "answer": "Some work.\n#### "},
  ]
  path = write_jsonl(tmp_path / "gsm8k.jsonl", rows)
  for name in ("gsm8k", "gsm8k_test"):
    out, report = dm.load_math_dataset(name, path)
    assert [r["answer"] for r in out] == ["72", "1234"]
    assert out[0]["solution"] == (
      "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nIn all 48+24 = <<48+24=72>>72."
    )
    assert out[1]["solution"] == "It is 1,000 + 234."
    assert out[0]["problem"].startswith("Natalia") and out[0]["id"] == f"{name}-0"
    assert report.malformed == 2 and report.examples[0][0] == 2
  spec = dm.get_spec("gsm8k_test")
  assert (spec.hub_id, spec.config, spec.split) == ("openai/gsm8k", "main", "test")


def test_math_train_keeps_its_solution(tmp_path):
  rows = [{"problem": "p", "solution": r" So $\boxed{3}$. ", "level": "Level 1", "type": "A"}]
  out, _ = dm.load_math_dataset("math_train", write_jsonl(tmp_path / "m.jsonl", rows))
  assert out[0]["solution"] == r"So $\boxed{3}$." and out[0]["answer"] == "3"


def test_has_solutions():
  with_solutions = {"math_train", "gsm8k", "gsm8k_test", "arithmetic", "arithmetic_eval"}
  assert {n for n in dm.CATALOGUE if dm.has_solutions(n)} == with_solutions
  for name in ("dapo_math_17k", "dapo_math_17k_dedup", "aime24", "aime25", "hmmt_feb25"):
    assert not dm.has_solutions(name)
  with pytest.raises(KeyError):
    dm.has_solutions("gsm8")
