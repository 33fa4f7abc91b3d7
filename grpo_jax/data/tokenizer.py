"""The character tokenizer of the built-in tasks: one token per character.

Built with the ``tokenizers`` library (a WordLevel model over single characters behind a Split
pre-tokenizer that isolates every character, a Fuse decoder that joins them back without spaces)
and wrapped as a ``transformers.PreTrainedTokenizerFast`` so it saves, loads and pads like any
Hugging Face tokenizer. The vocabulary is a fixed list, so the build is deterministic and takes
a few milliseconds. No special tokens are added when encoding: callers append EOS themselves.

Ids: ``<pad>`` 0, ``<eos>`` 1, ``<unk>`` 2, then :data:`CHARACTERS` in order.
"""

from __future__ import annotations

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

PAD_TOKEN = "<pad>"
EOS_TOKEN = "<eos>"
UNK_TOKEN = "<unk>"
SPECIAL_TOKENS = (PAD_TOKEN, EOS_TOKEN, UNK_TOKEN)
# Digits, the operators, and the prompt/plan punctuation of the countdown task ("69=3,8,9:" then
# "*-;8*9-3"). Changing this list changes every token id: keep it append-only.
CHARACTERS = "0123456789+-*=,:;"


def build_tokenizer(characters: str = CHARACTERS) -> PreTrainedTokenizerFast:
  """A fresh character tokenizer; pad id 0, eos id 1, unknown characters map to ``<unk>``.

  ``characters`` defaults to the countdown alphabet; tests of other tasks pass their own.
  """
  vocab = {tok: i for i, tok in enumerate(list(SPECIAL_TOKENS) + list(dict.fromkeys(characters)))}
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


__all__ = ["CHARACTERS", "EOS_TOKEN", "PAD_TOKEN", "SPECIAL_TOKENS", "UNK_TOKEN", "build_tokenizer"]
