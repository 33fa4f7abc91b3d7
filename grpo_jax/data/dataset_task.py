"""``data.task = "dataset"``: a researcher's own prompts, from local files or a ``datasets`` name,
rewarded by their own functions (``reward.functions``; docs/custom_task.md).

Sources (``data.train_path``; ``data.eval_paths``, one evaluation set each, named by the file's
stem): a ``.jsonl`` / ``.json`` (a list of objects, or JSON lines) / ``.csv`` / ``.parquet``
file, a ``save_to_disk`` folder, or a ``datasets`` hub name (``name`` or ``name:split``). With no
``data.eval_paths``, ``data.eval_size`` training rows (a seeded choice) are held out as the
evaluation set ``heldout``.

Each row's ``data.prompt_key`` is the prompt: a string (the user message, wrapped in the chat
template) or a list of chat messages ``{"role", "content"}``. ``data.answer_key``, when set,
must be present and becomes the row's ``answer`` (what the built-in ``math`` grader reads).
Every other column reaches the reward functions. A malformed row (a missing key, a prompt of
the wrong type, a prompt over ``data.max_prompt_tokens``) is reported by file and line; under
``data.bad_rows = "error"`` it stops the load with a :class:`DataError` (the launcher exits
2 with its message, before the run directory or any model exists), under ``"skip"`` it is
dropped and counted (``data/skipped_rows``, in every step's metrics).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import os

import numpy as np

from grpo_jax.data.math.load import MalformedRow, answer_to_string
from grpo_jax.data.math.task import MathOptions, MathTask

log = logging.getLogger(__name__)

FILE_KINDS = (".jsonl", ".json", ".csv", ".parquet")
BAD_ROWS = ("error", "skip")


class DataError(ValueError):
  """The researcher's data cannot be read as rows: the message names the file and line."""


@dataclasses.dataclass(frozen=True)
class Keys:
  """Which columns are the prompt and the answer, and what a malformed row does."""

  prompt: str = "prompt"
  answer: str = ""
  bad_rows: str = "error"


def _json_rows(path: str):
  with open(path) as f:
    text = f.read()
  if path.endswith(".json") and text.lstrip().startswith("["):
    try:
      rows = json.loads(text)
    except json.JSONDecodeError as e:
      raise DataError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None
    yield from ((f"{path}[{i}]", row) for i, row in enumerate(rows))
    return
  for number, line in enumerate(text.splitlines(), start=1):
    if line.strip():
      try:
        yield f"{path}:{number}", json.loads(line)
      except json.JSONDecodeError as e:
        yield f"{path}:{number}", MalformedRow(f"not valid JSON: {e.msg}")


def _csv_rows(path: str):
  with open(path, newline="") as f:
    reader = csv.DictReader(f)
    for row in reader:
      yield f"{path}:{reader.line_num}", row


def _datasets_rows(source: str):
  import datasets  # noqa: PLC0415

  if source.endswith(".parquet"):
    ds = datasets.load_dataset("parquet", data_files=[source], split="train")
  elif os.path.isdir(source):
    ds = datasets.load_from_disk(source)
    if isinstance(ds, datasets.DatasetDict):
      ds = ds["train"] if "train" in ds else ds[next(iter(ds))]
  else:
    name, _, split = source.partition(":")
    ds = datasets.load_dataset(name, split=split or "train")
  yield from ((f"{source}[{i}]", row) for i, row in enumerate(ds))


def read_rows(source: str):
  """``(where, raw row)`` of every row of ``source``: ``where`` is ``file:line`` (JSON lines,
  CSV), ``file[i]`` (a JSON list, Parquet, a dataset); a line that does not parse comes as a
  ``MalformedRow`` in place of the row."""
  if source.endswith(FILE_KINDS[:3]) and not os.path.exists(source):
    raise DataError(f"no file {source}")
  if source.endswith((".jsonl", ".json")):
    return _json_rows(source)
  if source.endswith(".csv"):
    return _csv_rows(source)
  return _datasets_rows(source)


def _prompt(value):
  if isinstance(value, str) and value.strip():
    return value
  ok_message = lambda m: isinstance(m, dict) and isinstance(m.get("content"), str) and "role" in m
  if isinstance(value, list) and value and all(ok_message(m) for m in value):
    return [{"role": m["role"], "content": m["content"]} for m in value]
  raise MalformedRow(f"prompt is {type(value).__name__}, not a string or a list of chat messages")


def normalize(raw, where: str, keys: Keys) -> dict:
  """A raw row as the task's row: every column, ``prompt`` checked, ``answer`` when asked,
  ``id`` (the row's own, else ``where``); raises MalformedRow."""
  if isinstance(raw, MalformedRow):
    raise raw
  if not isinstance(raw, dict):
    raise MalformedRow(f"row is {type(raw).__name__}, not an object")
  if keys.prompt not in raw:
    raise MalformedRow(f"no prompt column {keys.prompt!r} (columns: {sorted(raw)})")
  row = dict(raw)
  row[keys.prompt] = _prompt(raw[keys.prompt])
  if keys.answer:
    if keys.answer not in raw:
      raise MalformedRow(f"no answer column {keys.answer!r} (columns: {sorted(raw)})")
    row["answer"] = answer_to_string(raw[keys.answer])
  row["id"] = str(raw["id"]) if raw.get("id") not in (None, "") else where
  return {**row, "where": where}


def split_heldout(rows: list[dict], count: int, seed: int) -> tuple[list[dict], list[dict]]:
  """``(train, heldout)``: ``count`` rows chosen by ``seed`` held out, both in file order."""
  if count >= len(rows):
    raise ValueError(
      f"data.eval_size = {count} holds out every one of the {len(rows)} rows; set "
      "data.eval_paths or a smaller data.eval_size"
    )
  chosen = set(np.random.default_rng([seed, 1]).choice(len(rows), count, replace=False).tolist())
  train = [r for i, r in enumerate(rows) if i not in chosen]
  return train, [r for i, r in enumerate(rows) if i in chosen]


class DatasetTask(MathTask):
  """A :class:`MathTask` whose rows are the researcher's own (see the module docstring): the
  same prompt encoding, stream, evaluation and stop tokens; rewards by ``reward.functions``."""

  def __init__(self, tokenizer, sources, keys: Keys, options: MathOptions, heldout: int = 0):
    """``sources``: ``{"train": source, <eval name>: source, ...}``; with no evaluation
    source, ``heldout`` training rows (a seeded choice) are the evaluation set ``heldout``."""
    self.keys = keys
    self.skipped = 0
    rows = {name: self._load(source) for name, source in sources.items()}
    train = rows.pop("train")
    if not rows and heldout:
      train, rows["heldout"] = split_heldout(train, heldout, options.seed)
    super().__init__(tokenizer, train, rows, options)

  @classmethod
  def from_config(cls, cfg, tokenizer) -> DatasetTask:
    d = cfg.data
    sources = {"train": d.train_path}
    for path in d.eval_paths:
      sources[os.path.splitext(os.path.basename(path.rstrip("/")))[0]] = path
    options = MathOptions.from_config(cfg, tokenizer)
    keys = Keys(d.prompt_key, d.answer_key, d.bad_rows)
    return cls(tokenizer, sources, keys, options, heldout=d.eval_size)

  def _bad(self, where: str, reason: str) -> None:
    if self.keys.bad_rows == "error":
      raise DataError(f"{where}: {reason} (data.bad_rows = 'skip' drops such rows)")
    self.skipped += 1
    if self.skipped <= 5:
      log.warning("skipped %s: %s", where, reason)

  def _load(self, source: str) -> list[dict]:
    out = []
    for where, raw in read_rows(source):
      try:
        out.append(normalize(raw, where, self.keys))
      except MalformedRow as e:
        self._bad(where, str(e))
    return out

  def prompt_text(self, row: dict):
    """The prompt as the dataset holds it: a user message, or a list of chat messages."""
    return row[self.keys.prompt]

  def _fit(self, rows: list[dict]) -> list[dict]:
    if self.chat_template is None and any(not isinstance(self.prompt_text(r), str) for r in rows):
      raise ValueError("chat-message prompts need a chat template (data.chat_template)")
    return super()._fit(rows)

  def _drop(self, row: dict, num_tokens: int) -> None:
    reason = f"prompt of {num_tokens} tokens, over data.max_prompt_tokens = {self.prompt_len}"
    self._bad(row["where"], reason)

  @property
  def load_metrics(self) -> dict[str, float]:
    return {"data/skipped_rows": float(self.skipped)}

  @property
  def votes(self) -> bool:
    """maj@k only where a grader reads answers (``data.answer_key``): the final answer is then
    extracted as the math task's is."""
    return bool(self.keys.answer)

  def rewards(self, rows, completions):
    raise ValueError("data.task = 'dataset' is rewarded by reward.functions; none is set")


__all__ = [
  "BAD_ROWS",
  "DataError",
  "DatasetTask",
  "Keys",
  "normalize",
  "read_rows",
  "split_heldout",
]
