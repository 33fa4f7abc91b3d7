"""The learnable-band keys: bad values fail at load naming the key; each reaches the data."""

import json
import pathlib
import string

import pytest

from grpo_jax.config import files as config_file
from grpo_jax.data.math.load import load_math_dataset
from grpo_jax.data.math.task import MathTask
from grpo_jax.data.tokenizer import build_tokenizer

ROOT = pathlib.Path(__file__).resolve().parents[2]
MATH = ["data.task=math", "data.train_set=arithmetic", "warmstart.enabled=False"]


def _load(*overrides, config="configs/tiny_test.py"):
  return config_file.load(str(ROOT / config), list(overrides))


@pytest.mark.parametrize(
  "overrides, message",
  [
    (MATH + ["data.pass_rate_band=(0.9, 0.1)"], r"data.pass_rate_band = \(0.9, 0.1\)"),
    (MATH + ["data.pass_rate_band=(0.1,)"], r"must be \(lo, hi\)"),
    (MATH + ["data.pass_rate_band=(0.1, 1.5)"], r"data.pass_rate_band = \(0.1, 1.5\) must be"),
    (MATH + ["data.reprofile_every=5"], r"data.reprofile_every needs data.pass_rate_band"),
    (["data.pass_rate_band=(0.1, 0.9)"], r"data.task = 'math', not 'countdown'"),
    (MATH + ["data.level_weights=(1.0, 2.0)"], r"data.level_weights = \(1.0, 2.0\) must be 5"),
    (MATH + ["data.level_weights=(0, 0, 0, 0, 0)"], r"positive sum"),
    (["data.level_weights=(1, 1, 1, 1, 1)"], r"data.train_set = 'arithmetic'"),
    (["data.train_limit=5"], r"data.train_limit = 5 cuts .* not 'countdown'"),
    (MATH + ["data.train_limit=-1"], r"data.train_limit = -1 must be >= 0"),
    (["warmstart.supervise=answers"], r"warmstart.supervise = 'answers' is not one of \['all'"),
    (["profile.num_samples=0"], r"profile.num_samples = 0 must be >= 1"),
  ],
)
def test_bad_band_config_fails_at_load(overrides, message):
  with pytest.raises(ValueError, match=message):
    _load(*overrides)


def test_level_weights_reach_the_generated_sets():
  cfg = _load(*MATH, "data.level_weights=(0, 1, 0, 0, 0)")
  rows, _ = load_math_dataset("arithmetic", level_weights=tuple(cfg.data.level_weights))
  assert {r["meta"]["level"] for r in rows} == {2}
  default, _ = load_math_dataset("arithmetic")
  assert {r["meta"]["level"] for r in default} == {1, 2, 3, 4, 5}
  evals, _ = load_math_dataset("arithmetic_eval", level_weights=(1, 0, 0, 0, 0))
  assert {r["meta"]["level"] for r in evals} == {1}


def test_restrict_train_draws_the_stream_from_the_band(tmp_path):
  path = tmp_path / "train.jsonl"
  rows = [{"id": f"p{a}", "problem": f"What is {a} + {a}?", "answer": str(2 * a)} for a in range(8)]
  path.write_text("".join(json.dumps(r) + "\n" for r in rows))
  loaded, _ = load_math_dataset("aime24", str(path))
  task = MathTask(
    build_tokenizer(string.printable), loaded, {}, template="hadw", max_prompt_tokens=96
  )
  ids = {r["id"] for r in task.train_pool}
  keep = sorted(ids)[:3]
  task.restrict_train(keep)
  assert sorted({r["id"] for r in task.train_problems(0, 30)}) == keep
  task.restrict_train(ids)  # the pool is kept: a later band may widen again
  assert len({r["id"] for r in task.train_problems(0, 64)}) == 8
