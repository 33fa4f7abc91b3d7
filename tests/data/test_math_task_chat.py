"""The math task on a real BPE tokenizer (SmolLM2's): chat prompts, masks when pad == EOS, the
checkpoint's end tokens, chat-format warm-start rows, and preview stop strings."""

import json

import numpy as np
import pytest

from grpo_jax import config as config_lib
from grpo_jax import models
from grpo_jax.data import hf_tokenizer
from grpo_jax.data.math.task import MathTask
from grpo_jax.strategy import previews as two_stage
from tests.support import real_model

ROWS = [
  {
    "id": str(i),
    "problem": f"Calculate {i} + 2.",
    "answer": str(i + 2),
    "solution": f"{i} + 2 = {i + 2}.\nSo the answer is \\boxed{{{i + 2}}}.",
    "meta": {},
  }
  for i in range(6)
]


@pytest.fixture(scope="module")
def tokenizer():
  return models.load_tokenizer(str(real_model.hf_dir()))


def _task(tokenizer, chat_template, **kw):
  return MathTask(
    tokenizer,
    ROWS,
    {"eval": ROWS[:2]},
    template="boxed",
    max_prompt_tokens=80,
    chat_template=chat_template,
    completion_len=32,
    **kw,
  )


def test_chat_prompts_keep_their_end_of_turn_tokens(tokenizer):
  assert tokenizer.pad_token_id == tokenizer.eos_token_id  # SmolLM2 pads with <|im_end|>
  template = hf_tokenizer.resolve_chat_template(tokenizer, "auto")
  task = _task(tokenizer, template)
  tokens_BxP, mask_BxP = task.encode_prompts(task.train_problems(0, 3))
  for tokens_P, mask_P in zip(tokens_BxP, mask_BxP):
    real = tokens_P[mask_P == 1].tolist()
    text = tokenizer.decode(real)
    assert text.startswith("<|im_start|>system") and text.endswith("<|im_start|>assistant\n")
    assert "\\boxed{}" in text
    # The system and user turns end with <|im_end|> = pad: a mask re-derived as
    # tokens != pad_id would drop them from every prompt.
    assert real.count(task.pad_id) == 2
    assert (mask_P == 1).sum() > (tokens_P != task.pad_id).sum()


def test_raw_prompts_without_a_template(tokenizer):
  task = _task(tokenizer, hf_tokenizer.resolve_chat_template(tokenizer, "none"))
  tokens_BxP, mask_BxP = task.encode_prompts(task.eval_problems())
  real = tokens_BxP[0][mask_BxP[0] == 1].tolist()
  assert real == tokenizer(task.prompt_text(ROWS[0]))["input_ids"]  # BOS as the tokenizer adds


def test_template_file_is_used(tokenizer, tmp_path):
  path = tmp_path / "t.jinja"
  path.write_text("Q: {{ messages[0]['content'] }}\nA:")
  task = _task(tokenizer, hf_tokenizer.resolve_chat_template(tokenizer, str(path)))
  tokens_BxP, mask_BxP = task.encode_prompts(task.eval_problems()[:1])
  assert tokenizer.decode(tokens_BxP[0][mask_BxP[0] == 1]).startswith("Q: Calculate 0 + 2.")
  with pytest.raises(ValueError, match="data.chat_template"):
    hf_tokenizer.resolve_chat_template(tokenizer, str(tmp_path / "missing.jinja"))


def test_stop_ids_include_the_generation_config(tokenizer, tmp_path):
  assert hf_tokenizer.stop_token_ids(str(tmp_path), tokenizer) == (2,)
  (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [7, 2]}))
  assert hf_tokenizer.stop_token_ids(str(tmp_path), tokenizer) == (2, 7)


def test_warm_start_rows_are_chat_turns(tokenizer):
  task = _task(tokenizer, hf_tokenizer.resolve_chat_template(tokenizer, "auto"))
  tokens_BxL, input_mask_BxL, loss_mask_BxL = task.sft_batch(0, 4, np.random.default_rng(0))
  P = task.prompt_len
  problems = task.train_problems(0, 4)
  for b, row in enumerate(problems):
    target = tokens_BxL[b][loss_mask_BxL[b] == 1].tolist()
    assert target[-1] == task.eos_id  # the assistant turn ends with <|im_end|>
    assert tokenizer.decode(target[:-1]) == row["solution"]
    np.testing.assert_array_equal(input_mask_BxL[b, :P], task.encode_prompts([row])[1][0])
  completions = task.decode(tokens_BxL[:, P:], loss_mask_BxL[:, P:])
  assert task.rewards(problems, completions).rewards_N.all()


def test_previews_end_at_a_stop_string_inside_a_larger_token(tokenizer):
  cfg = config_lib.defaults({"strategy.delimiter": "\n", "strategy.max_preview_tokens": 8}).strategy
  spec = two_stage.PreviewSpec.from_config(cfg, tokenizer, (2,))
  for text in ("\n", "\n\n", " \n"):  # "\n\n" and " \n" are single BPE tokens
    (merged,) = tokenizer.encode(text, add_special_tokens=False)
    assert merged in spec.delimiter_ids
  assert not set(tokenizer.encode("Plan: add", add_special_tokens=False)) & set(spec.delimiter_ids)
  # A stop string across two tokens (" add" + a newline token) ends after the second.
  task = _task(tokenizer, None)
  ids = tokenizer.encode("Plan: add\n\nthen", add_special_tokens=False)
  tokens_NxM = np.array([ids, ids], np.int32)
  mask_NxM = np.ones_like(tokens_NxM)
  ends_N = two_stage.stop_string_ends(tokens_NxM, mask_NxM, "d\n", task.decode)
  assert ends_N.tolist() == [ends_N[0]] * 2 and 0 < ends_N[0] < len(ids)
  assert tokenizer.decode(ids[: ends_N[0]]).startswith("Plan: add\n")
  assert "d\n" not in tokenizer.decode(ids[: ends_N[0] - 1])
  assert two_stage.stop_string_ends(tokens_NxM, mask_NxM, "xyz", task.decode).tolist() == [0, 0]


def test_config_values_fail_at_load():
  cfg = config_lib.base_config()
  cfg.data.chat_template = "chatml"
  with pytest.raises(ValueError, match="data.chat_template"):
    config_lib.finalize(cfg)
  cfg = config_lib.base_config()
  cfg.data.task, cfg.data.train_set, cfg.warmstart.enabled = "math", "dapo_math_17k", True
  with pytest.raises(ValueError, match="warmstart.enabled.*arithmetic"):
    config_lib.finalize(cfg)
  cfg = config_lib.base_config()
  cfg.advantage.baseline = "subgroup"
  with pytest.raises(ValueError, match="advantage.baseline.*subgroup_offset"):
    config_lib.finalize(cfg)


def test_presampled_previews_look_up_math_rows_by_stream_position(tokenizer):
  """Math rows are dicts: their stream position travels as row['index'] (it was read as an
  attribute, which math rows lack, so the first RL step crashed after the presample)."""
  import datasets

  from grpo_jax.strategy.presample import PresampledPreviews

  task = _task(tokenizer, None)
  keys = {"strategy.delimiter": "\n", "strategy.num_previews": 2, "strategy.max_preview_tokens": 4}
  cfg = config_lib.defaults(keys).strategy
  spec = two_stage.PreviewSpec.from_config(cfg, tokenizer, (2,))
  problems = task.train_problems(3, 2)
  assert [p["index"] for p in problems] == [3, 4]
  rows = {
    "index": [4, 3],
    "prompt": [task.prompt_text(problems[1]), task.prompt_text(problems[0])],
    "preview_ids": [[[11, 12], [13]], [[21], [22, 23, 24]]],
    "preview_logps": [[[-0.1, -0.2], [-0.3]], [[-0.4], [-0.5, -0.6, -0.7]]],
    "preview_text": [["a", "b"], ["c", "d"]],
    "preview_stopped": [[True, False], [False, True]],
  }
  previews = PresampledPreviews(datasets.Dataset.from_dict(rows), spec, "mem").previews(
    task, problems
  )
  assert previews.tokens_BKxM[:, :3].tolist() == [
    [21, spec.pad_id, spec.pad_id],
    [22, 23, 24],
    [11, 12, spec.pad_id],
    [13, spec.pad_id, spec.pad_id],
  ]
  assert previews.mask_BKxM.sum(1).tolist() == [1, 3, 2, 1]
  assert previews.stopped_BK.tolist() == [False, True, True, False]
