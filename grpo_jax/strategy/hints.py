"""Strategies a researcher writes (``strategy.source = 'file'``): stage 1's previews read from a
JSONL of hints written by a person or a stronger model (as NudgeRL does), not by the policy.

One row per line, ``{"id": <problem id>, "strategies": [text, ...]}``; the row with id ``"*"``
serves every problem without a row of its own. A problem's id (:func:`problem_id`) is its row's
``id`` for the math and dataset tasks (the generated arithmetic set's ``arithmetic-train-0-17``,
a dataset row's own id or ``file:line``) and its prompt for countdown (``"69=3,8,9:"``).

Each step, K = ``strategy.num_previews`` of a problem's strategies are drawn without
replacement, from a generator seeded by the step's preview key and the problem's stream
position (so the draw does not depend on how a batch is split over processes). A strategy is
one preview: the delimiter is appended when the text does not end with it, so it ends where a
self-written preview that stopped on it ends, and the completions follow it as they follow one.

Checked when the file is read (the rollout is built before any model, ``train.run.load_data``);
each bad row raises :class:`DataError` naming ``file:line``: malformed JSON, a row that is not
``{id, strategies}``, an id that is no problem of the task's training set, an id given twice,
an empty list, fewer than K strategies, a strategy that is empty, repeats another, holds the
delimiter before its end, or is longer than ``strategy.max_preview_tokens`` tokens.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re

import jax
import numpy as np

from grpo_jax.data.countdown import Problem
from grpo_jax.data.dataset_task import DataError
from grpo_jax.strategy.layout import normalize_preview
from grpo_jax.strategy.presample import stream_index
from grpo_jax.strategy.previews import Previews, PreviewSpec

ANY = "*"  # the id of the row that serves every problem without its own
SHIPPED = pathlib.Path(__file__).parent / "files"  # strategy files installed with the package


def resolve(path: str) -> str:
  """A shipped file's name (``"arithmetic"``: ``grpo_jax/strategy/files/arithmetic.jsonl``) as
  its path; any other value is a path and is returned as it is."""
  shipped = SHIPPED / f"{path}.jsonl"
  return str(shipped) if os.sep not in path and shipped.exists() else path


def problem_id(task, problem) -> str:
  """The problem's stable id: a data row's ``id``, else (countdown) its prompt text."""
  if isinstance(problem, dict):
    return str(problem["id"])
  return str(task.prompt_text(problem))


def train_ids(task):
  """``is_train(id) -> bool``, and the set of every training id where the task holds them as
  rows (None for countdown's unbounded stream, whose ids are checked one by one: a prompt in the
  task's canonical form whose numbers are in range, whose target they reach, and which is not
  a held-out problem)."""
  pool = getattr(task, "train_pool", None)
  if pool is not None:
    ids = {str(row["id"]) for row in pool}
    return ids.__contains__, ids
  held_out = {p.key for p in task.eval_problems()}

  def is_train(text: str) -> bool:
    m = re.fullmatch(r"(\d+)=(\d+(?:,\d+)*):", text)
    if not m:
      return False
    p = Problem(tuple(int(x) for x in m.group(2).split(",")), int(m.group(1)), 0)
    in_range = all(1 <= n <= task.max_number for n in p.numbers)
    canonical = len(p.numbers) == task.num_numbers and task.prompt_text(p) == text
    return in_range and canonical and bool(task.solutions(p)) and p.key not in held_out

  return is_train, None


@dataclasses.dataclass(frozen=True)
class Hints:
  """One row's strategies: the texts (delimiter appended) and their token ids."""

  where: str  # file:line
  texts: tuple[str, ...]
  ids: tuple[tuple[int, ...], ...]


def _json_lines(path: str):
  if not os.path.isfile(path):
    raise DataError(f"{path}: no such file (strategy.file)")
  with open(path) as f:
    for number, line in enumerate(f, start=1):
      if not line.strip():
        continue
      where = f"{path}:{number}"
      try:
        yield where, json.loads(line)
      except json.JSONDecodeError as e:
        raise DataError(f"{where}: not valid JSON: {e.msg}") from None


def _strategies(where: str, raw, spec: PreviewSpec, encode) -> Hints:
  """The row's strategies checked (see the module doc) and tokenized."""
  texts = raw.get("strategies")
  if not isinstance(texts, list):
    raise DataError(f"{where}: 'strategies' is {type(texts).__name__}, not a list of texts")
  if not texts:
    raise DataError(f"{where}: 'strategies' is an empty list")
  K, M, delimiter = spec.num_previews, spec.max_preview_tokens, spec.delimiter
  if len(texts) < K:
    raise DataError(
      f"{where}: {len(texts)} strategies, fewer than strategy.num_previews = {K} "
      "(K distinct ones are drawn per prompt)"
    )
  seen, out, ids = set(), [], []
  for i, text in enumerate(texts):
    if not isinstance(text, str) or not text.strip():
      raise DataError(f"{where}: strategy {i} is {text!r}, not a non-empty text")
    if normalize_preview(text) in seen:
      raise DataError(f"{where}: strategy {i} repeats an earlier one: {text!r}")
    seen.add(normalize_preview(text))
    full = text if text.endswith(delimiter) else text + delimiter
    if delimiter in full[: -len(delimiter)]:
      raise DataError(
        f"{where}: strategy {i} holds strategy.delimiter {delimiter!r} before its end: {text!r}"
      )
    tokens = tuple(int(t) for t in encode(full))
    if len(tokens) > M:
      raise DataError(
        f"{where}: strategy {i} is {len(tokens)} tokens with its delimiter, over "
        f"strategy.max_preview_tokens = {M}: {text!r}"
      )
    out.append(full)
    ids.append(tokens)
  return Hints(where, tuple(out), tuple(ids))


class StrategyFile:
  """The rows of a strategy file by problem id, and the per-step draw of K previews."""

  def __init__(self, path: str, rows: dict[str, Hints], spec: PreviewSpec):
    self.path, self.rows, self.spec = path, rows, spec

  def hints(self, task, problem) -> Hints:
    pid = problem_id(task, problem)
    row = self.rows.get(pid, self.rows.get(ANY))
    if row is None:
      raise DataError(f"{self.path}: no row for problem {pid!r} and no {ANY!r} row")
    return row

  def draw(self, task, problems, rng) -> list[list[int]]:
    """Per problem, the K strategies (indices into its row) of this step: without replacement,
    from ``rng`` (the step's preview key) and the problem's stream position."""
    words = np.asarray(jax.random.key_data(rng)).ravel().tolist()
    K = self.spec.num_previews
    out = []
    for p in problems:
      n = len(self.hints(task, p).texts)
      gen = np.random.default_rng([*words, stream_index(p)])
      out.append(gen.choice(n, K, replace=False).tolist())
    return out

  def previews(self, task, problems, rng) -> Previews:
    """Stage 1 read from the file: B·K previews laid out as ``draw_previews`` lays out the
    policy's (right-padded to M, ending on the delimiter; log-probs 0, as no policy wrote
    them and they are never trained)."""
    K, M, pad = self.spec.num_previews, self.spec.max_preview_tokens, self.spec.pad_id
    tokens = np.full((len(problems) * K, M), pad, np.int32)
    mask = np.zeros(tokens.shape, np.int32)
    for b, (p, chosen) in enumerate(zip(problems, self.draw(task, problems, rng))):
      row = self.hints(task, p)
      for k, j in enumerate(chosen):
        ids = row.ids[j]
        tokens[b * K + k, : len(ids)], mask[b * K + k, : len(ids)] = ids, 1
    return Previews(tokens, mask, np.zeros(tokens.shape, np.float32), np.ones(len(tokens), bool))


def load_strategy_file(path: str, task, spec: PreviewSpec) -> StrategyFile:
  """Reads and checks ``path`` (``strategy.file``, a shipped name resolved by :func:`resolve`)
  against the task's training problems and the preview spec; raises :class:`DataError`."""
  path = resolve(path)
  is_train, every_id = train_ids(task)
  encode = lambda text: task.tokenizer.encode(text, add_special_tokens=False)
  rows: dict[str, Hints] = {}
  for where, raw in _json_lines(path):
    if not isinstance(raw, dict) or "id" not in raw or "strategies" not in raw:
      raise DataError(f"{where}: a row is {{'id': ..., 'strategies': [text, ...]}}, got {raw!r}")
    pid = str(raw["id"])
    if pid in rows:
      raise DataError(f"{where}: id {pid!r} again (first at {rows[pid].where})")
    if pid != ANY and not is_train(pid):
      raise DataError(f"{where}: id {pid!r} is not a problem of the task's training set")
    rows[pid] = _strategies(where, raw, spec, encode)
  if not rows:
    raise DataError(f"{path}: no rows")
  if ANY not in rows and every_id is not None and not every_id <= set(rows):
    missing = sorted(every_id - rows.keys())
    raise DataError(
      f"{path}: no row for {len(missing)} training problems (e.g. {missing[:3]}) and no "
      f"{ANY!r} row to serve them"
    )
  return StrategyFile(path, rows, spec)


__all__ = [
  "ANY",
  "Hints",
  "StrategyFile",
  "load_strategy_file",
  "problem_id",
  "resolve",
  "train_ids",
]
