"""One reader per run-directory file (names in ``grpo_jax.rundir.names``), on any epath
(``grpo_jax.rundir.write`` holds the writers).

Each returns what the file holds, or its empty value (None, ``[]``) when the file is absent;
a line or a file that does not parse is an error naming the file (and line), so a damaged run
directory is never read as an empty one. The evaluation's results are gathered by
``grpo_jax.eval.benchmarks.read_results``, the difficulty profile by
``grpo_jax.data.pass_rates.read`` (it tolerates a half-written last line), a presample's
``meta.json`` by ``grpo_jax.strategy.presample`` (through :func:`json_file`).
"""

from __future__ import annotations

import json

from etils import epath

from grpo_jax.rundir import names
from grpo_jax.rundir.paths import PathLike


def json_file(path: PathLike):
  """The JSON value of ``path``, or None when it does not exist."""
  path = epath.Path(path)
  if not path.exists():
    return None
  try:
    return json.loads(path.read_text())
  except json.JSONDecodeError as e:
    raise ValueError(f"{path} is not valid JSON: {e}") from None


def json_lines(path: PathLike) -> list:
  """The JSON value of each non-blank line of ``path`` (``[]`` when it does not exist)."""
  path = epath.Path(path)
  if not path.exists():
    return []
  out = []
  for number, line in enumerate(path.read_text().splitlines(), start=1):
    if line.strip():
      try:
        out.append(json.loads(line))
      except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{number} is not valid JSON: {e}") from None
  return out


def is_run(path: PathLike) -> bool:
  """True for a run directory (it has a ``config.json``)."""
  return (epath.Path(path) / names.CONFIG).exists()


def config(run_dir: PathLike) -> dict | None:
  """``config.json``: ``{"config": ..., "hash": ..., ...}`` (``grpo_jax.config.resume.record``)."""
  return json_file(epath.Path(run_dir) / names.CONFIG)


def metrics(run_dir: PathLike) -> list[dict]:
  """``metrics.jsonl``: ``{"step": s, **scalars}`` per logged step."""
  return json_lines(epath.Path(run_dir) / names.METRICS)


def samples(run_dir: PathLike) -> list[dict]:
  """``samples.jsonl``: the sampled rollouts logged per step."""
  return json_lines(epath.Path(run_dir) / names.SAMPLES)


def results(run_dir: PathLike) -> dict | None:
  """``results.json``: a finished run's summary (None while the run is unfinished)."""
  return json_file(epath.Path(run_dir) / names.RESULTS)


def warmstart(run_dir: PathLike) -> list[dict] | None:
  """``warmstart.json``: the warm start's history."""
  return json_file(epath.Path(run_dir) / names.WARMSTART)


def strategy_previews(run_dir: PathLike) -> dict | None:
  """``strategy_previews.json``: success rate per preview (two-stage runs)."""
  return json_file(epath.Path(run_dir) / names.STRATEGY_PREVIEWS)


def run_info(run_dir: PathLike) -> dict | None:
  """``sweep_run.json``: a sweep member's name, overrides and status."""
  return json_file(epath.Path(run_dir) / names.RUN_INFO)


def sweep_info(root: PathLike) -> dict | None:
  """``sweep.json``: a sweep's summary at its root."""
  return json_file(epath.Path(root) / names.SWEEP_INFO)


__all__ = [
  "config",
  "is_run",
  "json_file",
  "json_lines",
  "metrics",
  "results",
  "run_info",
  "samples",
  "strategy_previews",
  "sweep_info",
  "warmstart",
]
