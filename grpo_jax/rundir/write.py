"""One writer per run-directory file (names in ``grpo_jax.rundir.names``), on any epath, from
plain data (dicts, lists, strings); ``grpo_jax.rundir.read`` reads them back.

The loop's JSON files are pretty-printed with sorted keys; its line files hold one
``{"step": s, ...}`` object per line, appended (``paths.append_text``), and are cut back to a step
on resume. The other files keep the layout they have always had (noted per writer). Multi-host:
the caller writes from process 0 only (``grpo_jax.sharding.distributed.is_primary``).
"""

from __future__ import annotations

import json

from etils import epath

from grpo_jax.rundir import names, paths
from grpo_jax.rundir.paths import PathLike


def json_file(path: PathLike, obj) -> None:
  """``obj`` as indented JSON with sorted keys (anything else as its ``str``), replacing the
  file whole; parent folders are created."""
  path = epath.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  paths.write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def _lines(rows) -> str:
  return "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows)


def json_lines(path: PathLike, rows) -> None:
  """One JSON line (sorted keys) per row, replacing the file whole; parent folders are created."""
  path = epath.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  paths.write_text(path, _lines(rows))


def append_json_lines(path: PathLike, rows) -> None:
  """Appends one JSON line (sorted keys) per row; nothing for no rows."""
  if rows:
    paths.append_text(path, _lines(rows))


def step_lines(path: PathLike, step: int, rows: list[dict]) -> None:
  """Appends ``{"step": step, **row}`` for each of ``rows``, one JSON line each (sorted keys)."""
  append_json_lines(path, [{"step": step, **row} for row in rows])


def keep_steps_through(path: PathLike, step: int) -> None:
  """Drops the lines of steps after ``step`` (a resumed run redoes them); nothing when the file
  does not exist."""
  path = epath.Path(path)
  if not path.exists():
    return
  lines = [
    ln
    for ln in path.read_text().splitlines()
    if ln.strip() and json.loads(ln).get("step", 0) <= step
  ]
  paths.write_text(path, "".join(ln + "\n" for ln in lines))


def _indented(path: PathLike, obj, **kw) -> epath.Path:
  """``obj`` as indented JSON in the key order it has (``kw``: ``json.dumps``'s)."""
  path = epath.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  paths.write_text(path, json.dumps(obj, indent=2, **kw) + "\n")
  return path


def text_file(path: PathLike, text: str) -> epath.Path:
  """``text`` and a newline, replacing the file whole; parent folders are created."""
  path = epath.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  paths.write_text(path, text + "\n")
  return path


# The evaluation (``grpo_jax.eval``).


def eval_result(workdir: PathLike, benchmark: str, step: int, result: dict) -> epath.Path:
  """``eval/<benchmark>_step<k>.json``: ``result`` with its benchmark and step."""
  path = paths.eval_result(workdir, benchmark, step)
  json_file(path, {"benchmark": benchmark, "step": step, **result})
  return path


def eval_problems(workdir: PathLike, benchmark: str, step: int, records: list[dict]):
  """``eval/<benchmark>_step<k>_problems.jsonl``: one line per problem."""
  path = paths.eval_problems(workdir, benchmark, step)
  json_lines(path, records)
  return path


def eval_summary(workdir: PathLike, table: str) -> epath.Path:
  """``eval/summary.md``: the Markdown table of every result."""
  return text_file(epath.Path(workdir) / names.EVAL / names.EVAL_SUMMARY, table)


# The strategy (``grpo_jax.strategy``); keys in the order given.


def strategy_previews(workdir: PathLike, rows: list[dict]) -> epath.Path:
  """``strategy_previews.json``: ``[{"preview", "rollouts", "success_rate"}, ...]``."""
  return _indented(epath.Path(workdir) / names.STRATEGY_PREVIEWS, rows)


def presample_meta(path: PathLike, meta: dict) -> epath.Path:
  """``<presample>/meta.json``, written last: its presence marks a complete presample."""
  return _indented(epath.Path(path) / names.PRESAMPLE_META, meta)


def presample_part_done(part: PathLike) -> None:
  """The empty ``done`` marker of a complete presample part."""
  (epath.Path(part) / names.PRESAMPLE_PART_DONE).write_text("")


# The sweeps (``grpo_jax.runs``); keys in the order given, anything else as its ``str``.


def run_info(run_dir: PathLike, info: dict) -> epath.Path:
  """``sweep_run.json``: a member's name, spec, overrides and config hash."""
  return _indented(epath.Path(run_dir) / names.RUN_INFO, info, default=str)


def sweep_info(root: PathLike, summary: dict) -> epath.Path:
  """``sweep.json`` at a sweep's root: its spec, overrides and one entry per member."""
  return _indented(epath.Path(root) / names.SWEEP_INFO, summary, default=str)


def error(run_dir: PathLike, text: str) -> epath.Path:
  """``error.txt``: a failed member's traceback (as given, no newline added)."""
  path = epath.Path(run_dir) / names.ERROR
  path.parent.mkdir(parents=True, exist_ok=True)
  paths.write_text(path, text)
  return path


# The plan (``grpo_jax.planning``).


def compiled_report(out_dir: PathLike, report: dict, table: str) -> tuple:
  """``compiled.json`` (``report``, keys in the order given) and ``compiled.md`` (``table``)
  under ``out_dir`` (``<workdir>/plan``); returns their paths."""
  out = epath.Path(out_dir)
  js = _indented(out / names.COMPILED_JSON, report, default=str)
  return js, text_file(out / names.COMPILED_MD, table)


__all__ = [
  "append_json_lines",
  "compiled_report",
  "error",
  "eval_problems",
  "eval_result",
  "eval_summary",
  "json_file",
  "json_lines",
  "keep_steps_through",
  "presample_meta",
  "presample_part_done",
  "run_info",
  "step_lines",
  "strategy_previews",
  "sweep_info",
  "text_file",
]
