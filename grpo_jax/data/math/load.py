"""Load a catalogued math dataset (hub id or local copy) as ``{id, problem, answer, meta}``.

Source, in order: ``path`` if given — a ``save_to_disk`` folder, a folder of ``*.parquet`` /
``*.jsonl`` / ``*.json`` files, or one such file — else, for a ``generated:arithmetic`` hub id,
``arithmetic.generate(split)``, else ``datasets.load_dataset(hub_id, config, split=split)``.
Rows are normalised by the spec's column mapping:

* ``problem``: a string, or a chat list whose last user message is taken; DAPO's instruction
  is stripped; OlympiadBench's ``context`` is prepended.
* ``answer``: a string (stripped), an int, a float (``27.0`` → ``"27"``), a list (joined
  with ``", "``), the last ``\\boxed{}`` of a solution column (``boxed:``), or the text
  after the last marker (``after:####:answer``, thousands commas dropped).
* ``solution`` (only for specs with one, see ``has_solutions``): the reference worked
  solution as a stripped string — a column, or the text before the last marker
  (``before:####:answer``); a missing or empty one makes the row malformed.
* ``id``: the id column as a string, else ``"<name>-<row>"``.

A row with a missing/empty problem or answer, an unreadable type, or a solution without a
box is skipped and counted; the first few are reported (``LoadReport.examples`` and a log
warning). Duplicate problems are dropped when the spec says so and counted.
"""

import dataclasses
import glob
import logging
import os
import re

from grpo_jax.data.math import arithmetic
from grpo_jax.data.math.catalogue import MathDatasetSpec, get_spec
from grpo_jax.data.math.templates import strip_dapo_instruction
from grpo_jax.rewards.math.extract import last_boxed
from grpo_jax.rewards.math.normalize import number_to_string

log = logging.getLogger(__name__)


@dataclasses.dataclass
class LoadReport:
  """What happened while loading: rows read, kept, skipped (with the first few reasons)."""

  name: str
  source: str
  rows_read: int = 0
  rows_kept: int = 0
  malformed: int = 0
  duplicates: int = 0
  conflicting_duplicates: int = 0  # same problem, different answer (first kept)
  examples: list = dataclasses.field(default_factory=list)  # [(row, reason), ...]


class MalformedRow(ValueError):
  pass


def _get(row: dict, path: str):
  """``row["a"]["b"]`` for ``path="a.b"``; raises MalformedRow when absent."""
  value = row
  for key in path.split("."):
    if not isinstance(value, dict) or key not in value:
      raise MalformedRow(f"missing column {path!r}")
    value = value[key]
  return value


def _problem_text(value) -> str:
  if isinstance(value, list):  # chat messages: the last user turn
    users = [m for m in value if isinstance(m, dict) and m.get("role", "user") == "user"]
    if not users:
      raise MalformedRow("prompt has no user message")
    value = users[-1].get("content")
  if not isinstance(value, str) or not value.strip():
    raise MalformedRow("empty or non-text problem")
  return value.strip()


def answer_to_string(value) -> str:
  """A gold of any stored type as a non-empty string (see module docstring)."""
  if isinstance(value, (list, tuple)):
    parts = [answer_to_string(v) for v in value]
    if not parts:
      raise MalformedRow("empty answer list")
    return ", ".join(parts)
  if value is None:
    raise MalformedRow("answer is null")
  if isinstance(value, str):
    s = value.strip()
    if not s:
      raise MalformedRow("empty answer")
    return s
  try:
    return number_to_string(value)
  except (TypeError, ValueError) as e:
    raise MalformedRow(f"unreadable answer: {e}") from None


_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")


def _split_on_marker(row: dict, spec_value: str, side: str) -> str:
  """``"<side>:<marker>:<column>"``: the stripped text after/before the last ``marker``."""
  _, marker, column = spec_value.split(":", 2)
  text = _get(row, column)
  if not isinstance(text, str) or marker not in text:
    raise MalformedRow(f"{column!r} has no {marker!r} marker")
  head, _, tail = text.rpartition(marker)
  out = (tail if side == "after" else head).strip()
  if not out:
    raise MalformedRow(f"nothing {side} {marker!r} in {column!r}")
  return out


def _solution(row: dict, spec: MathDatasetSpec) -> str:
  if spec.solution.startswith("before:"):
    return _split_on_marker(row, spec.solution, "before")
  value = _get(row, spec.solution)
  if not isinstance(value, str) or not value.strip():
    raise MalformedRow("empty or non-text solution")
  return value.strip()


def normalize_row(row: dict, index: int, spec: MathDatasetSpec, name: str) -> dict:
  """One source row as ``{id, problem, answer, meta}`` (+ ``solution``); raises MalformedRow."""
  problem = _problem_text(_get(row, spec.problem))
  if spec.strip_dapo_instruction:
    problem = strip_dapo_instruction(problem)
    if not problem:
      raise MalformedRow("empty problem after removing the instruction")
  if spec.prefix and isinstance(row.get(spec.prefix), str) and row[spec.prefix].strip():
    problem = row[spec.prefix].strip() + "\n\n" + problem
  if spec.answer.startswith("boxed:"):
    solution = _get(row, spec.answer[len("boxed:") :])
    answer = last_boxed(solution) if isinstance(solution, str) else None
    if not answer:
      raise MalformedRow("solution has no \\boxed{} answer")
  elif spec.answer.startswith("after:"):
    answer = _split_on_marker(row, spec.answer, "after")
    if _THOUSANDS.match(answer):
      answer = answer.replace(",", "")
  else:
    answer = answer_to_string(_get(row, spec.answer))
  rid = None
  if spec.id:
    try:
      rid = _get(row, spec.id)
    except MalformedRow:
      rid = None
  rid = f"{name}-{index}" if rid is None or str(rid) == "" else str(rid)
  meta = {k: row[k] for k in spec.meta if k in row}
  meta.update(source=name, row=index)
  out = {"id": rid, "problem": problem, "answer": answer, "meta": meta}
  if spec.solution:
    out["solution"] = _solution(row, spec)
  return out


def _local_files(path: str) -> tuple[str, list[str]]:
  if os.path.isfile(path):
    files = [path]
  else:
    files = sorted(
      f
      for ext in ("parquet", "jsonl", "json")
      for f in glob.glob(os.path.join(path, "**", f"*.{ext}"), recursive=True)
      if os.path.basename(f) not in ("dataset_info.json", "state.json", "dataset_dict.json")
    )
  if not files:
    raise FileNotFoundError(f"no parquet/jsonl/json files under {path!r}")
  kinds = {"parquet" if f.endswith(".parquet") else "json" for f in files}
  if len(kinds) > 1:
    raise ValueError(f"mixed parquet and json files under {path!r}")
  return kinds.pop(), files


def open_source(
  spec: MathDatasetSpec,
  path: str | None = None,
  revision: str | None = None,
  level_weights: tuple[float, ...] | None = None,
):
  """The raw ``datasets.Dataset`` for ``spec`` from ``path`` or the Hub, and a description; for
  a generated set, an iterator of its rows (a reader that stops early generates no more).
  ``level_weights``: the generated set's level frequencies (``arithmetic.iterate``)."""
  if path is None and spec.hub_id.startswith("generated:"):
    return arithmetic.iterate(spec.split, level_weights=level_weights or None), spec.hub_id
  import datasets

  if path is None:
    ds = datasets.load_dataset(spec.hub_id, spec.config, split=spec.split, revision=revision)
    return ds, f"hub:{spec.hub_id}" + (f"/{spec.config}" if spec.config else "")
  is_saved = os.path.isdir(path) and any(
    os.path.exists(os.path.join(path, f)) for f in ("state.json", "dataset_dict.json")
  )
  if is_saved:
    ds = datasets.load_from_disk(path)
    if isinstance(ds, datasets.DatasetDict):
      ds = ds[spec.split] if spec.split in ds else ds[next(iter(ds))]
    return ds, f"saved:{path}"
  kind, files = _local_files(path)
  ds = datasets.load_dataset(kind, data_files=files, split="train")
  return ds, f"{kind}:{path}"


def _dedupe_key(problem: str) -> str:
  return re.sub(r"\s+", " ", problem).strip()


def load_math_dataset(
  name: str,
  path: str | None = None,
  *,
  limit: int | None = None,
  revision: str | None = None,
  max_examples: int = 5,
  level_weights: tuple[float, ...] | None = None,
) -> tuple[list[dict], LoadReport]:
  """Rows of catalogue dataset ``name`` as ``{id, problem, answer, meta}`` dicts.

  Sets with reference solutions (``has_solutions(name)``: MATH train, GSM8K, arithmetic)
  also carry ``row["solution"]``, the worked solution text.

  Args:
    name: a key of ``CATALOGUE`` (e.g. ``"math500"``, ``"dapo_math_17k"``).
    path: local copy to read instead of the Hub.
    limit: stop after this many kept rows.
    revision: Hub revision (commit sha) to pin.
    max_examples: how many malformed rows to report by index and reason.
    level_weights: for the generated arithmetic sets, the level frequencies (None = defaults).

  Returns:
    (rows, report).
  """
  spec = get_spec(name)
  ds, source = open_source(spec, path, revision, level_weights)
  report = LoadReport(name=name, source=source)
  rows: list[dict] = []
  seen: dict[str, str] = {}
  for index, raw in enumerate(ds):
    report.rows_read += 1
    try:
      row = normalize_row(raw, index, spec, name)
    except MalformedRow as e:
      report.malformed += 1
      if len(report.examples) < max_examples:
        report.examples.append((index, str(e)))
      continue
    if spec.dedupe:
      key = _dedupe_key(row["problem"])
      if key in seen:
        report.duplicates += 1
        report.conflicting_duplicates += seen[key] != row["answer"]
        continue
      seen[key] = row["answer"]
    rows.append(row)
    if limit is not None and len(rows) >= limit:
      break
  report.rows_kept = len(rows)
  if report.malformed:
    log.warning(
      "%s: skipped %d malformed of %d rows; first: %s",
      name,
      report.malformed,
      report.rows_read,
      report.examples,
    )
  return rows, report
