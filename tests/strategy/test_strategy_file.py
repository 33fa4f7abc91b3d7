"""Strategies a researcher writes (``strategy.source = 'file'``): previews read from a JSONL of
hints, K distinct per prompt drawn from the step's key, the ``"*"`` row, each bad row named by
file and line before any model exists, and the shipped arithmetic file."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import json
import pathlib
import string

import jax
import numpy as np
import pytest

from grpo_jax import models
from grpo_jax import sharding as shard_lib
from grpo_jax.config import files as config_file
from grpo_jax.config.fields import ConfigError
from grpo_jax.data import CountdownTask
from grpo_jax.data.dataset_task import DataError
from grpo_jax.data.math import arithmetic
from grpo_jax.data.math.task import MathTask
from grpo_jax.data.tokenizer import build_tokenizer
from grpo_jax.rollout.one_stage import Policy, SampleSettings
from grpo_jax.rollout.two_stage import TwoStageRollout
from grpo_jax.strategy import hints
from grpo_jax.strategy.previews import PreviewSpec
from grpo_jax.train.run import load_data

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLANS = ["++", "+-", "+*", "-+", "--", "-*", "*+", "*-", "**"]
K = 3


def _write(path, rows) -> str:
  path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
  return str(path)


def _cfg(**overrides):
  over = {
    "strategy.enabled": "true",
    "strategy.num_previews": K,
    "strategy.preview_template": "=",
    "strategy.max_preview_tokens": 3,
    **overrides,
  }
  return config_file.load(str(ROOT / "configs/tiny_test.py"), [f"{k}={v}" for k, v in over.items()])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  """A tiny countdown policy, its task, and a file with a row for problem 0 and a '*' row."""
  cfg = _cfg(**{"strategy.source": "online"})
  task = CountdownTask.from_config(cfg)
  model_cfg = models.ModelConfig.from_config(cfg.model, vocab_size=len(task.tokenizer))
  graphdef, params = models.init_params(model_cfg, cfg.seed)
  mesh = shard_lib.make_mesh(cfg.mesh, devices=jax.devices()[:1])
  policy = Policy(
    graphdef, shard_lib.replicate(params, mesh), mesh, SampleSettings.from_config(cfg.sampling)
  )
  problems = task.train_problems(0, cfg.sampling.prompts_per_step)
  own = ["**", "*+", "*-"]
  path = _write(
    tmp_path_factory.mktemp("hints") / "plans.jsonl",
    [{"id": task.prompt_text(problems[0]), "strategies": own}, {"id": "*", "strategies": PLANS}],
  )
  return task, policy, problems, path, own


def _previews_of(batch, texts_N, group_size):
  """Per prompt, the previews of its subgroups (one text per subgroup, in subgroup order)."""
  out = []
  for b in range(len(texts_N) // group_size):
    rows = range(b * group_size, (b + 1) * group_size)
    first = {int(batch.subgroup_ids_N[n]): texts_N[n] for n in rows}
    out.append([first[s] for s in sorted(first)])
  return out


def test_previews_come_from_the_file_k_distinct_per_prompt(tiny):
  task, policy, problems, path, own = tiny
  cfg = _cfg(**{"strategy.source": "file", "strategy.file": path})
  rollout = TwoStageRollout(cfg, task)
  G = cfg.sampling.group_size
  batch, texts_N = rollout.sample(policy, problems, G, jax.random.PRNGKey(3))
  per_prompt = _previews_of(batch, texts_N, G)
  assert sorted(per_prompt[0]) == sorted(p + ";" for p in own)  # its own row: all 3 of 3
  for texts in per_prompt[1:]:  # the '*' row serves the others
    assert len(texts) == K and len(set(texts)) == K
    assert all(t[:-1] in PLANS and t.endswith(";") for t in texts)
  # The preview is context: out of the loss, and the reward reads the completion only.
  P = rollout.prompt_len
  for n in range(len(texts_N)):
    response = batch.tokens_NxL[n, P:][batch.input_mask_NxL[n, P:] == 1]
    loss = batch.completion_mask_NxT[n][batch.input_mask_NxL[n, P:] == 1]
    preview, completion = response[loss == 0], response[loss == 1]
    assert task.decode(preview[None], np.ones((1, len(preview))))[0] == texts_N[n]
    text = task.decode(completion[None], np.ones((1, len(completion))))[0]
    assert batch.rewards_N[n] == task.reward(problems[n // G], ";" + text)
    assert np.all(batch.sample_logps_NxT[n][: len(preview)] == 0.0)


def test_the_draw_follows_the_step_key_and_is_reproducible(tiny):
  task, _, _, path, _ = tiny
  spec = PreviewSpec.from_config(_cfg().strategy, task.tokenizer, task.stop_ids)
  strategies = hints.load_strategy_file(path, task, spec)
  problems = task.train_problems(0, 16)
  draw = lambda seed, ps=problems: strategies.draw(task, ps, jax.random.PRNGKey(seed))
  assert draw(0) == draw(0)
  assert draw(0) != draw(1)
  assert draw(0)[4:9] == draw(0, problems[4:9])  # a problem's draw is its own, in any batch
  assert all(len(set(chosen)) == K for chosen in draw(0))
  # Over many steps every one of the '*' row's strategies is drawn.
  assert {j for s in range(20) for j in draw(s)[5]} == set(range(len(PLANS)))


def test_flipping_source_or_file_changes_the_batch(tiny, tmp_path):
  task, policy, problems, path, _ = tiny
  key = jax.random.PRNGKey(4)
  G = _cfg().sampling.group_size
  other = _write(tmp_path / "other.jsonl", [{"id": "*", "strategies": ["--", "-*", "-+"]}])
  batches = {
    name: TwoStageRollout(_cfg(**over), task).sample(policy, problems, G, key)[1]
    for name, over in {
      "online": {"strategy.source": "online"},
      "file": {"strategy.source": "file", "strategy.file": path},
      "other": {"strategy.source": "file", "strategy.file": other},
    }.items()
  }
  assert batches["online"] != batches["file"] != batches["other"]
  assert set(batches["other"]) == {"--;", "-*;", "-+;"}


def test_problem_ids_of_each_task():
  task = CountdownTask()
  p = task.train_problems(7, 1)[0]
  assert hints.problem_id(task, p) == task.prompt_text(p)
  is_train, _ = hints.train_ids(task)
  assert is_train(task.prompt_text(p))
  assert not is_train(task.prompt_text(task.eval_problems(1)[0]))  # held out
  assert not is_train("99=1,1,1:")  # unreachable
  assert not is_train("9=1,2,3")  # not the prompt's form
  row = arithmetic.generate("train", 1)[0]
  assert hints.problem_id(None, {**row, "index": 0}) == "arithmetic-train-0-0"


def _bad_cases(task):
  ok = task.prompt_text(task.train_problems(0, 1)[0])
  held_out = task.prompt_text(task.eval_problems(1)[0])
  star = {"id": "*", "strategies": PLANS}
  return {
    "unknown id": ([star, {"id": "99=1,1,1:", "strategies": PLANS}], 2, "not a problem"),
    "held-out id": ([{"id": held_out, "strategies": PLANS}], 1, "not a problem"),
    "empty list": ([star, {"id": ok, "strategies": []}], 2, "empty list"),
    "fewer than K": ([{"id": ok, "strategies": ["++", "--"]}, star], 1, "fewer than"),
    "malformed JSON": ([star, '{"id": "*", "strategies": ['], 2, "not valid JSON"),
    "not a row": ([star, {"strategy": ["++"]}], 2, "a row is"),
    "id twice": ([star, {"id": ok, "strategies": PLANS}, star], 3, "again"),
    "repeated": ([{"id": "*", "strategies": ["++", "+-", " ++ "]}], 1, "repeats"),
    "delimiter inside": ([{"id": "*", "strategies": ["+;+", "++", "--"]}], 1, "delimiter"),
    "too long": ([{"id": "*", "strategies": ["+++", "++", "--"]}], 1, "max_preview_tokens"),
  }


@pytest.mark.parametrize("case", list(_bad_cases(CountdownTask())))
def test_each_bad_row_fails_at_load_naming_file_and_line(case, tmp_path):
  rows, line, reason = _bad_cases(CountdownTask())[case]
  path = _write(tmp_path / "bad.jsonl", rows)
  cfg = _cfg(**{"strategy.source": "file", "strategy.file": path})
  # load_data: the rows and the rollout, before any model is built.
  with pytest.raises(DataError, match=rf"{path}:{line}: .*{reason}"):
    load_data(cfg, log=lambda *_: None)


def test_a_missing_file_and_missing_rows_fail_at_load(tmp_path):
  cfg = _cfg(**{"strategy.source": "file", "strategy.file": str(tmp_path / "none.jsonl")})
  with pytest.raises(DataError, match=r"none.jsonl: no such file"):
    load_data(cfg, log=lambda *_: None)
  task = CountdownTask()
  spec = PreviewSpec.from_config(cfg.strategy, task.tokenizer, task.stop_ids)
  ok = task.prompt_text(task.train_problems(0, 1)[0])
  path = _write(tmp_path / "one.jsonl", [{"id": ok, "strategies": PLANS}])
  strategies = hints.load_strategy_file(path, task, spec)  # no '*' row: the others have none
  with pytest.raises(DataError, match=r"one.jsonl: no row for problem"):
    strategies.previews(task, task.train_problems(0, 2), jax.random.PRNGKey(0))


def test_config_needs_a_file_and_no_training_on_hints():
  with pytest.raises(ConfigError, match="strategy.file"):
    _cfg(**{"strategy.source": "file"})
  with pytest.raises(ConfigError, match="strategy.train_on_preview"):
    _cfg(
      **{"strategy.source": "file", "strategy.file": "x.jsonl", "strategy.train_on_preview": True}
    )
  with pytest.raises(ValueError, match=r"strategy.source = 'model' .*\['file', 'online'"):
    _cfg(**{"strategy.source": "model"})


def test_the_shipped_arithmetic_file_serves_the_arithmetic_set():
  rows = arithmetic.generate("train", 40)
  task = MathTask(
    build_tokenizer(string.printable), rows, {"eval": rows[:2]}, max_prompt_tokens=512
  )
  cfg = _cfg(**{"strategy.max_preview_tokens": 128, "strategy.delimiter": "\n"})
  spec = PreviewSpec.from_config(cfg.strategy, task.tokenizer, task.stop_ids)
  strategies = hints.load_strategy_file("arithmetic", task, spec)
  assert strategies.path.endswith("grpo_jax/strategy/files/arithmetic.jsonl")
  (row,) = strategies.rows.values()
  assert 4 <= len(row.texts) <= 6 and all(
    t.endswith("\n") and t.count("\n") == 1 for t in row.texts
  )
  # The methods say how to compute, never a number that could be an answer.
  assert not any(ch.isdigit() for t in row.texts for ch in t)
  previews = strategies.previews(task, task.train_problems(0, 4), jax.random.PRNGKey(0))
  texts = task.decode(previews.tokens_BKxM, previews.mask_BKxM)
  assert set(texts) <= set(row.texts) and len(texts) == 4 * K
  # An id of the held-out split is no training problem of the arithmetic task.
  path = ROOT / "grpo_jax/strategy/files/arithmetic.jsonl"
  is_train, _ = hints.train_ids(task)
  assert is_train(rows[3]["id"]) and not is_train("arithmetic-eval-0-3")
  assert json.loads(path.read_text().splitlines()[0])["id"] == "*"
