"""How prompts meet a checkpoint's tokenizer: its chat template and the end tokens generation
stops on (the tokenizer itself: ``models.load_tokenizer``).

``model.hf_path`` is a Hugging Face directory (or hub id) or a ``.gguf`` file.
``data.chat_template`` chooses how prompts are wrapped: ``auto`` (the tokenizer's own template,
with the generation prompt, when it has one), ``none`` (raw text, BOS as the tokenizer adds it)
or the path of a Jinja template file.
"""

from __future__ import annotations

import json
import os
import pathlib

CHAT_TEMPLATE_CHOICES = ("auto", "none", "<path to a .jinja file>")


def _split_gguf(path: str) -> tuple[str, dict]:
  """(directory or hub id, from_pretrained kwargs) for a checkpoint path."""
  if str(path).endswith(".gguf"):
    p = pathlib.Path(path)
    return str(p.parent), {"gguf_file": p.name}
  return str(path), {}


def _as_ids(value) -> list[int]:
  if value is None:
    return []
  return [int(v) for v in value] if isinstance(value, list | tuple) else [int(value)]


def stop_token_ids(path: str, tokenizer) -> tuple[int, ...]:
  """Every end token the checkpoint declares: the tokenizer's EOS, then the eos ids of
  ``generation_config.json`` (instruct models often list their end-of-turn token there), in
  order, without repeats."""
  ids = _as_ids(tokenizer.eos_token_id)
  where, kwargs = _split_gguf(path) if path else ("", {})
  config = pathlib.Path(where) / "generation_config.json"
  if where and not kwargs and config.exists():
    ids += _as_ids(json.loads(config.read_text()).get("eos_token_id"))
  if not ids:
    raise ValueError(f"tokenizer of {path!r} declares no EOS token; generation could not stop")
  return tuple(dict.fromkeys(ids))


def resolve_chat_template(tokenizer, setting: str) -> str | None:
  """The Jinja template prompts are wrapped in, or None for raw text (``data.chat_template``)."""
  if setting == "none":
    return None
  if setting == "auto":
    return getattr(tokenizer, "chat_template", None) or None
  if os.path.isfile(setting):
    return pathlib.Path(setting).read_text()
  raise ValueError(
    f"data.chat_template {setting!r} is neither a choice nor a file; valid: "
    f"{list(CHAT_TEMPLATE_CHOICES)}"
  )


def encode_prompts(tokenizer, texts: list, chat_template: str | None) -> list[list[int]]:
  """Token ids of prompts: each a user message (a string) or a list of chat messages, wrapped
  in the chat template with the generation prompt (the template writes any BOS itself, so no
  special tokens are added on top), or raw text with the special tokens the tokenizer adds
  (its BOS, if any). One batched call."""
  if not texts:
    return []
  if chat_template is None:
    return [list(ids) for ids in tokenizer(list(texts), add_special_tokens=True)["input_ids"]]
  rendered = tokenizer.apply_chat_template(
    [[{"role": "user", "content": t}] if isinstance(t, str) else list(t) for t in texts],
    chat_template=chat_template,
    tokenize=False,
    add_generation_prompt=True,
  )
  return [list(ids) for ids in tokenizer(rendered, add_special_tokens=False)["input_ids"]]


__all__ = [
  "CHAT_TEMPLATE_CHOICES",
  "encode_prompts",
  "resolve_chat_template",
  "stop_token_ids",
]
