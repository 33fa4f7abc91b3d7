"""One writer per kind of run-directory file (names in ``grpo_jax.rundir.names``), on any
epath; ``grpo_jax.rundir.read`` reads them back.

JSON files are pretty-printed with sorted keys; line files hold one ``{"step": s, ...}`` object
per line, appended (``paths.append_text``), and are cut back to a step on resume. Multi-host:
the caller writes from process 0 only (``grpo_jax.sharding.distributed.is_primary``).
"""

from __future__ import annotations

import json

from etils import epath

from grpo_jax.rundir import paths
from grpo_jax.rundir.paths import PathLike


def json_file(path: PathLike, obj) -> None:
  """``obj`` as indented JSON with sorted keys (anything else as its ``str``), replacing the
  file whole; parent folders are created."""
  path = epath.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  paths.write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def step_lines(path: PathLike, step: int, rows: list[dict]) -> None:
  """Appends ``{"step": step, **row}`` for each of ``rows``, one JSON line each (sorted keys)."""
  if rows:
    lines = (json.dumps({"step": step, **row}, sort_keys=True) + "\n" for row in rows)
    paths.append_text(path, "".join(lines))


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


__all__ = ["json_file", "keep_steps_through", "step_lines"]
