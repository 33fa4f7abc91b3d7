"""Sweep members recorded under config keys since replaced (``grpo_jax.config.legacy``).

A sweep names each run directory by its overrides (``grpo_jax.runs.sweep.run_name``), so a run
recorded before a key was replaced (``advantage.offset_shuffle=true``) sits under another name
than the same member declared today (``advantage.offset_control=shuffle``). :func:`adopt` gives
such a member its recorded directory, so a re-run skips it when finished and resumes it
otherwise (its ``config.json`` read in today's keys, ``grpo_jax.config.resume.read``) instead of
training it again under the new name.
"""

from __future__ import annotations

import dataclasses
import json

from etils import epath

from grpo_jax.config import legacy
from grpo_jax.rundir import read
from grpo_jax.rundir.names import RUN_INFO


def _key(arg, overrides: dict) -> tuple:
  """A member's identity: its config argument and overrides as JSON stores them."""
  return arg, json.dumps(overrides, sort_keys=True, default=str)


def recorded(root) -> dict[tuple, list[str]]:
  """``{(arg, overrides in today's keys): [directory names]}`` of the members under ``root``
  (each directory's ``sweep_run.json``)."""
  out: dict[tuple, list[str]] = {}
  for run_dir in sorted(epath.Path(root).iterdir()):
    info = read.run_info(run_dir) if run_dir.is_dir() else None
    if info is None:
      continue
    where = f"{run_dir / RUN_INFO}"
    overrides = legacy.upgrade_flat(info.get("overrides") or {}, where)
    out.setdefault(_key(info.get("arg"), overrides), []).append(run_dir.name)
  return out


def adopt(root, runs: list) -> list:
  """``runs`` (``sweep.SweepRun``), each one without a directory under ``root`` renamed to the
  one directory that recorded it under replaced keys (same argument, same overrides once
  upgraded); the others as they are."""
  root = epath.Path(root)
  if not root.is_dir() or all((root / r.name).exists() for r in runs):
    return list(runs)
  found = recorded(root)
  out = []
  for run in runs:
    names = found.get(_key(run.arg, run.overrides), [])
    if not (root / run.name).exists() and len(names) == 1:
      run = dataclasses.replace(run, name=names[0])
    out.append(run)
  return out


__all__ = ["adopt", "recorded"]
