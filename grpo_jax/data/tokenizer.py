"""The character tokenizer of the built-in tasks: one token per character.

Built with the ``tokenizers`` library (a WordLevel model over single characters behind a Split
pre-tokenizer that isolates every character, a Fuse decoder that joins them back without spaces)
and wrapped as a ``transformers.PreTrainedTokenizerFast`` so it saves, loads and pads like any
Hugging Face tokenizer. The vocabulary is a fixed list, so the build is deterministic and takes
a few milliseconds. No special tokens are added when encoding: callers append EOS themselves.

:class:`CharTokenizer` is the same tokenizer in plain Python, for the built-in tasks: what the
library reads of a tokenizer (size, special ids, encoding, decoding) without importing
``transformers`` (about 0.65 s of CPU in every launcher process); it builds the
``transformers`` one for anything else (saving it, calling it).

Ids: ``<pad>`` 0, ``<eos>`` 1, ``<unk>`` 2, then :data:`CHARACTERS` in order.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
  from transformers import PreTrainedTokenizerFast

PAD_TOKEN = "<pad>"
EOS_TOKEN = "<eos>"
UNK_TOKEN = "<unk>"
SPECIAL_TOKENS = (PAD_TOKEN, EOS_TOKEN, UNK_TOKEN)
# Digits, the operators, and the prompt/plan punctuation of the countdown task ("69=3,8,9:" then
# "*-;8*9-3"). Changing this list changes every token id: keep it append-only.
CHARACTERS = "0123456789+-*=,:;"


def vocabulary(characters: str = CHARACTERS) -> dict[str, int]:
  """{token: id}: the special tokens, then each distinct character in order."""
  return {tok: i for i, tok in enumerate(list(SPECIAL_TOKENS) + list(dict.fromkeys(characters)))}


def build_tokenizer(characters: str = CHARACTERS) -> PreTrainedTokenizerFast:
  """A fresh character tokenizer; pad id 0, eos id 1, unknown characters map to ``<unk>``.

  ``characters`` defaults to the countdown alphabet; tests of other tasks pass their own.
  """
  from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
  from transformers import PreTrainedTokenizerFast

  vocab = vocabulary(characters)
  backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK_TOKEN))
  # Every character is its own word; special tokens are matched before this split runs.
  backend.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
  backend.decoder = decoders.Fuse()
  return PreTrainedTokenizerFast(
    tokenizer_object=backend,
    pad_token=PAD_TOKEN,
    eos_token=EOS_TOKEN,
    unk_token=UNK_TOKEN,
    padding_side="right",
  )


class CharTokenizer:
  """:func:`build_tokenizer`'s ids and texts without ``transformers``: ``len``, ``get_vocab``,
  the special tokens and ids, ``encode``, ``decode`` and ``batch_decode`` as the
  ``transformers`` tokenizer gives them. Anything else (calling it, ``save_pretrained``,
  ``convert_tokens_to_ids``) goes to that tokenizer, built on first use (``hf``)."""

  pad_token, eos_token, unk_token = PAD_TOKEN, EOS_TOKEN, UNK_TOKEN
  bos_token_id = None

  def __init__(self, characters: str = CHARACTERS):
    self.characters = characters
    self._vocab = vocabulary(characters)
    self._tokens = list(self._vocab)  # id -> token
    self.pad_token_id, self.eos_token_id, self.unk_token_id = (
      self._vocab[t] for t in SPECIAL_TOKENS
    )
    # In transformers' order of the special-token attributes (eos, unk, pad).
    self.all_special_ids = [self.eos_token_id, self.unk_token_id, self.pad_token_id]
    # Special tokens match before the split into characters, as in the backend.
    self._special = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")

  def __len__(self) -> int:
    return len(self._vocab)

  def get_vocab(self) -> dict[str, int]:
    return dict(self._vocab)

  def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
    """One id per character (``<unk>`` for one outside the vocabulary); a special token's text
    is its id. ``add_special_tokens`` adds none, as the ``transformers`` tokenizer."""
    del add_special_tokens
    ids = []
    for i, part in enumerate(self._special.split(text)):
      if i % 2:
        ids.append(self._vocab[part])
      else:
        ids.extend(self._vocab.get(c, self.unk_token_id) for c in part)
    return ids

  def decode(self, ids, skip_special_tokens: bool = False) -> str:
    special = set(self.all_special_ids) if skip_special_tokens else set()
    return "".join(self._tokens[int(i)] for i in ids if int(i) not in special)

  def batch_decode(self, sequences, skip_special_tokens: bool = False) -> list[str]:
    return [self.decode(ids, skip_special_tokens) for ids in sequences]

  @functools.cached_property
  def hf(self) -> PreTrainedTokenizerFast:
    """The same tokenizer in ``transformers`` (:func:`build_tokenizer`)."""
    return build_tokenizer(self.characters)

  def __call__(self, *args, **kwargs):
    return self.hf(*args, **kwargs)

  def __getattr__(self, name: str):
    if name.startswith("_"):  # copy and pickle probe these before __init__ has run
      raise AttributeError(name)
    return getattr(self.hf, name)


__all__ = [
  "CHARACTERS",
  "EOS_TOKEN",
  "PAD_TOKEN",
  "SPECIAL_TOKENS",
  "UNK_TOKEN",
  "CharTokenizer",
  "build_tokenizer",
  "vocabulary",
]
