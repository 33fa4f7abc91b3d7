"""The character tokenizer: ids, determinism, decoding, save/load round trip, and its plain
Python twin."""

import json
import pickle
import string
import subprocess
import sys
import time

import numpy as np
import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from grpo_jax.data import build_tokenizer
from grpo_jax.data.tokenizer import CHARACTERS, SPECIAL_TOKENS, CharTokenizer


def test_special_ids_and_size():
  tok = build_tokenizer()
  assert isinstance(tok, PreTrainedTokenizerFast)
  assert tok.pad_token_id == 0
  assert tok.eos_token_id == 1
  assert tok.unk_token_id == 2
  assert len(tok) == len(SPECIAL_TOKENS) + len(CHARACTERS)
  assert len(set(CHARACTERS)) == len(CHARACTERS)


def test_one_token_per_character_and_no_added_specials():
  tok = build_tokenizer()
  text = "69=3,8,9:*-;8*9-3"
  ids = tok(text)["input_ids"]
  assert len(ids) == len(text)
  assert ids == [len(SPECIAL_TOKENS) + CHARACTERS.index(c) for c in text]
  assert tok.decode(ids) == text


def test_every_character_round_trips():
  tok = build_tokenizer()
  for c in CHARACTERS:
    (i,) = tok(c)["input_ids"]
    assert tok.convert_ids_to_tokens(i) == c
    assert tok.decode([i]) == c


def test_special_tokens_and_unknown_characters():
  tok = build_tokenizer()
  ids = tok("1+2<eos>")["input_ids"]
  assert ids[-1] == tok.eos_token_id and len(ids) == 4
  assert tok.decode(ids, skip_special_tokens=True) == "1+2"
  assert tok("a/b")["input_ids"] == [tok.unk_token_id] * 3


def test_deterministic_and_fast():
  start = time.perf_counter()
  a, b = build_tokenizer(), build_tokenizer()
  assert time.perf_counter() - start < 1.0
  assert a.get_vocab() == b.get_vocab()
  assert json.loads(a.backend_tokenizer.to_str()) == json.loads(b.backend_tokenizer.to_str())


def test_save_load_round_trip(tmp_path):
  tok = build_tokenizer()
  tok.save_pretrained(tmp_path)
  text = "07=1,2,9:+*;9*1-2"
  for loaded in (
    PreTrainedTokenizerFast.from_pretrained(tmp_path),
    AutoTokenizer.from_pretrained(tmp_path),
  ):
    assert loaded.get_vocab() == tok.get_vocab()
    assert loaded.pad_token_id == 0 and loaded.eos_token_id == tok.eos_token_id
    assert loaded(text)["input_ids"] == tok(text)["input_ids"]
    assert loaded.decode(tok(text)["input_ids"]) == text
    batch = loaded(["1+2", "1"], padding=True)["input_ids"]
    assert batch[1][1:] == [0, 0]  # right-padded with pad id 0


@pytest.mark.parametrize("characters", [CHARACTERS, string.printable])
def test_plain_tokenizer_equals_the_transformers_one(characters, tmp_path):
  """``CharTokenizer`` (the built-in tasks' tokenizer, no transformers) gives the ids and texts
  of ``build_tokenizer``: random texts with special tokens and unknown characters, random id
  rows decoded with and without the special tokens, and the same saved files."""
  plain, hf = CharTokenizer(characters), build_tokenizer(characters)
  assert len(plain) == len(hf) and plain.get_vocab() == hf.get_vocab()
  for name in ("pad_token_id", "eos_token_id", "unk_token_id", "all_special_ids", "unk_token"):
    assert getattr(plain, name) == getattr(hf, name), name
  rng = np.random.default_rng(0)
  pieces = [*characters, *SPECIAL_TOKENS, "é", "<", "eos>"]
  for _ in range(50):
    text = "".join(rng.choice(pieces, size=int(rng.integers(0, 20))))
    assert plain.encode(text) == hf.encode(text, add_special_tokens=False), text
  rows = [rng.integers(0, len(hf), size=int(rng.integers(0, 20))).tolist() for _ in range(50)]
  for skip in (False, True):
    assert plain.batch_decode(rows, skip_special_tokens=skip) == hf.batch_decode(
      rows, skip_special_tokens=skip
    )
  assert pickle.loads(pickle.dumps(plain)).batch_decode(rows) == hf.batch_decode(rows)
  plain.save_pretrained(tmp_path / "plain")
  hf.save_pretrained(tmp_path / "hf")
  for f in (tmp_path / "hf").iterdir():
    assert (tmp_path / "plain" / f.name).read_bytes() == f.read_bytes(), f.name


def test_a_countdown_run_leaves_transformers_unimported():
  """The countdown task's tokenizer is the plain one: the launcher, the loop and the task do not
  import transformers (about 0.65 s of CPU in every launcher process)."""
  code = (
    "import sys\nimport grpo_jax.runs.launcher, grpo_jax.train.modes\n"
    "from grpo_jax.data.countdown import CountdownTask\n"
    "task = CountdownTask()\nassert task.decode([task.tokenizer.encode('1+2')], [[1, 1, 1]])"
    " == ['1+2']\nprint('transformers' in sys.modules)"
  )
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
  assert out.stdout.split() == ["False"], out.stdout
