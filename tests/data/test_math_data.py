"""Math dataset loading, normalisation, dedupe and prompt templates, on fixture files this
module writes itself (no Hub access)."""

import json
import os

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import datasets  # noqa: E402
import pytest  # noqa: E402

from grpo_jax.data import math as dm  # noqa: E402
from grpo_jax.rewards import math as rm  # noqa: E402

DAPO_Q = ["What is $1+1$?", "Find the number of primes below 10.", "Compute $3^3$."]
DAPO_A = ["2", "4", "27"]


def dapo_row(q, a, idx):
  return {
    "data_source": "math_dapo",
    "prompt": [{"role": "user", "content": dm.format_prompt(q, "dapo")}],
    "ability": "MATH",
    "reward_model": {"ground_truth": a, "style": "rule-lighteval/MATH_v2"},
    "extra_info": {"index": idx},
  }


def write_jsonl(path, rows):
  with open(path, "w") as f:
    for r in rows:
      f.write(json.dumps(r) + "\n")
  return str(path)


def test_dapo_raw_release_is_deduplicated(tmp_path):
  # The raw release repeats every problem; here 3 problems x 5 copies (+ whitespace jitter).
  rows = []
  for rep in range(5):
    for i, (q, a) in enumerate(zip(DAPO_Q, DAPO_A)):
      rows.append(dapo_row(q + (" " if rep % 2 else ""), a, f"uuid-{i}"))
  path = write_jsonl(tmp_path / "dapo.jsonl", rows)
  out, report = dm.load_math_dataset("dapo_math_17k", path)
  assert report.rows_read == 15 and report.duplicates == 12 and report.rows_kept == 3
  assert [r["problem"] for r in out] == DAPO_Q  # the DAPO instruction is stripped
  assert [r["answer"] for r in out] == DAPO_A
  assert [r["id"] for r in out] == ["uuid-0", "uuid-1", "uuid-2"]
  assert out[0]["meta"] == {"data_source": "math_dapo", "source": "dapo_math_17k", "row": 0}
  assert report.conflicting_duplicates == 0


def test_dapo_dedup_variant_from_parquet_counts_conflicts(tmp_path):
  rows = [
    {
      "prompt": dm.format_prompt(q, "dapo"),
      "solution": a,
      "data_source": "math_dapo",
      "extra_info": {"index": str(i)},
    }
    for i, (q, a) in enumerate(zip(DAPO_Q, DAPO_A))
  ]
  rows.append(dict(rows[0], solution="3"))  # same problem, different answer
  path = str(tmp_path / "train.parquet")
  datasets.Dataset.from_list(rows).to_parquet(path)
  out, report = dm.load_math_dataset("dapo_math_17k_dedup", str(tmp_path))
  assert len(out) == 3 and report.duplicates == 1 and report.conflicting_duplicates == 1
  assert out[0]["answer"] == "2"


def test_malformed_rows_are_skipped_counted_and_reported(tmp_path):
  good = {"problem": "p", "answer": "1", "level": "Level 1", "subject": "Algebra", "unique_id": "a"}
  rows = [
    good,
    dict(good, answer=""),
    dict(good, answer=None),
    dict(good, problem="   "),
    dict(good, unique_id="b", answer="\\frac12"),
    dict(good, problem=None),
    {"unique_id": "c", "answer": "2"},  # no problem column in this row
  ]
  path = write_jsonl(tmp_path / "m500.jsonl", rows)
  out, report = dm.load_math_dataset("math500", path, max_examples=3)
  assert [r["id"] for r in out] == ["a", "b"]
  assert report.rows_read == 7 and report.malformed == 5 and report.rows_kept == 2
  assert [i for i, _ in report.examples] == [1, 2, 3]  # only the first few
  assert "empty answer" in report.examples[0][1]
  assert out[1]["meta"]["level"] == "Level 1" and out[1]["meta"]["subject"] == "Algebra"


def test_numeric_and_list_answers_become_strings(tmp_path):
  amc = [
    {"id": 1, "question": "q1", "answer": 27.0, "url": "u"},
    {"id": 2, "question": "q2", "answer": 3.5, "url": "u"},
    {"id": 3, "question": "q3", "answer": float("nan"), "url": "u"},
  ]
  out, report = dm.load_math_dataset("amc23", write_jsonl(tmp_path / "amc.jsonl", amc))
  assert [r["answer"] for r in out] == ["27", "3.5"] and report.malformed == 1
  assert [r["id"] for r in out] == ["1", "2"]
  ob = [
    {
      "id": 7,
      "question": "Find x and y.",
      "final_answer": ["$1$", "$2$"],
      "context": None,
      "is_multiple_answer": True,
      "unit": None,
      "answer_type": "Numerical",
      "subfield": "Algebra",
    },
    {
      "id": 8,
      "question": "q",
      "final_answer": [],
      "context": "Let n = 3.",
      "is_multiple_answer": False,
      "unit": None,
      "answer_type": "Numerical",
      "subfield": "Algebra",
    },
  ]
  out, report = dm.load_math_dataset("olympiadbench", write_jsonl(tmp_path / "ob.jsonl", ob))
  assert out[0]["answer"] == "$1$, $2$" and out[0]["meta"]["is_multiple_answer"] is True
  assert report.malformed == 1 and report.examples[0] == (1, "empty answer list")
  # The joined gold grades as a set through the reward layer.
  assert rm.score(r"\boxed{2, 1}", out[0]["answer"]) == 1.0


def test_math_train_takes_the_last_box_of_the_solution(tmp_path):
  rows = [
    {
      "problem": "p1",
      "solution": r"So $x=\boxed{3}$, hence $\boxed{\frac{1}{2}}$.",
      "level": "Level 2",
      "type": "Algebra",
    },
    {"problem": "p2", "solution": "No box here.", "level": "Level 1", "type": "Algebra"},
  ]
  out, report = dm.load_math_dataset("math_train", write_jsonl(tmp_path / "m.jsonl", rows))
  assert out[0]["answer"] == r"\frac{1}{2}" and out[0]["id"] == "math_train-0"
  assert out[0]["meta"]["level"] == "Level 2" and report.malformed == 1


def test_saved_dataset_folder_and_dataset_dict(tmp_path):
  rows = [{"problem_idx": i, "problem": f"Problem {i}", "answer": i * 7} for i in range(1, 4)]
  datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "flat"))
  out, report = dm.load_math_dataset("aime26", str(tmp_path / "flat"))
  assert [r["answer"] for r in out] == ["7", "14", "21"] and report.source.startswith("saved:")
  datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(
    str(tmp_path / "dd")
  )
  out2, _ = dm.load_math_dataset("aime26", str(tmp_path / "dd"), limit=2)
  assert [r["id"] for r in out2] == ["1", "2"]


def test_every_catalogue_entry_is_complete_and_loadable_from_a_fixture(tmp_path):
  assert set(dm.TRAIN_SETS) | set(dm.BENCHMARKS) == set(dm.CATALOGUE)
  for name in (
    "aime24",
    "aime25",
    "aime26",
    "hmmt_feb25",
    "amc23",
    "minerva",
    "olympiadbench",
    "math500",
    "math_train",
    "dapo_math_17k",
    "dapo_math_17k_dedup",
  ):
    spec = dm.get_spec(name)
    assert spec.hub_id.count("/") == 1 and spec.split in ("train", "test")
    row = {}
    for col in (spec.problem, spec.answer.removeprefix("boxed:"), spec.id):
      if col:
        head, *rest = col.split(".")
        row[head] = {rest[0]: "1"} if rest else "1"
    row[spec.problem.split(".")[0]] = "What is 0+1?"
    if spec.answer.startswith("boxed:"):
      row[spec.answer[6:]] = r"\boxed{1}"  # also the solution column
    path = write_jsonl(tmp_path / f"{name}.jsonl", [row])
    out, report = dm.load_math_dataset(name, path)
    assert report.malformed == 0, (name, report.examples)
    assert out[0]["answer"] == "1" and out[0]["problem"] == "What is 0+1?"
    keys = {"id", "problem", "answer", "meta"} | ({"solution"} if dm.has_solutions(name) else set())
    assert set(out[0]) == keys
  with pytest.raises(KeyError, match="known"):
    dm.get_spec("aime2024")


def test_minerva_golds_grade_after_normalisation(tmp_path):
  rows = [{"question": "Mass?", "answer": "4.5e33"}, {"question": "Ratio?", "answer": "-1./3"}]
  out, _ = dm.load_math_dataset("minerva", write_jsonl(tmp_path / "mv.jsonl", rows))
  assert rm.score(r"\boxed{4.5 \times 10^{33}}", out[0]["answer"]) == 1.0
  assert rm.score(r"\boxed{-\frac{1}{3}}", out[1]["answer"]) == 1.0
  assert out[0]["id"] == "minerva-0"


def test_templates():
  p = dm.format_prompt("  What is 2+2?  ", "dapo")
  assert p.startswith("Solve the following math problem step by step.")
  assert "What is 2+2?" in p and p.endswith('its own line after "Answer:".')
  assert dm.strip_dapo_instruction(p) == "What is 2+2?"
  h = dm.format_prompt("What is 2+2?", "hadw")
  assert h == "What is 2+2?. Let's think step by step and output the final answer within \\boxed{}."
  assert dm.format_prompt("Q", "boxed").endswith("within \\boxed{}.")
  assert dm.ANSWER_FORMAT["dapo"] == "answer_line" and dm.ANSWER_FORMAT["hadw"] == "boxed"
  with pytest.raises(KeyError, match="hadw"):
    dm.format_prompt("Q", "nope")
  # A completion in each template's format grades through the same reward.
  assert rm.extract_answer("...\nAnswer: 4") == "4"
  assert rm.extract_answer("... so \\boxed{4}.") == "4"


def test_missing_local_files_raise(tmp_path):
  with pytest.raises(FileNotFoundError):
    dm.load_math_dataset("aime24", str(tmp_path))
