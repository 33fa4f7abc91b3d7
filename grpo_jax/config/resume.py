"""The run directory's ``config.json`` and the guard against resuming under another config.

A run directory with a checkpoint resumes from it. The config it resumes under must be the one
it started with, except for the keys in :data:`RESUMABLE` (declared on the fields, ``spec(...,
resumable=True)``, and on whole groups, ``RESUMABLE = True``), which change how long the run
goes on, how often it saves, evaluates and logs, but never the update a step computes:

  steps                     extending (or shortening) a run: the learning rate is warmup then
                            constant and per-step keys are fold_in(rng, step), so steps 1..n of
                            a longer run equal those of the shorter one (a presampled strategy
                            run sized by steps then says its presample is too small);
  checkpoint.*              how often and how many checkpoints are kept;
  eval.every_steps, eval.before, eval.after
                            when held-out evaluation runs (it never feeds back into training);
  logging.*                 TensorBoard, plots, progress bars, samples written;
  data.reward_workers       how many processes grade (the grades are the same);
  rollout.join_timeout_s    how long a failed step waits for the rollout thread.

Any other changed key stops the run with a ValueError (:class:`ConfigChanged`) naming each key
with its old → new value, before anything is written. ``allow_change=True``
(``launch.py --allow_config_change``) resumes anyway and appends the change to ``config.json``'s
``config_changes``.

``config.json`` holds ``config`` (the resolved config), ``hash`` (over all of it),
``resume_hash`` (over the keys that must not change), ``provenance``
(:mod:`grpo_jax.config.provenance`) of this invocation, ``history`` (the provenance and hashes
of the earlier invocations of this directory) and ``config_changes``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json

from etils import epath

from grpo_jax.config import experiment, legacy
from grpo_jax.config.fields import ConfigError
from grpo_jax.rundir import names
from grpo_jax.rundir import read as read_files

# Declared on the fields (``spec(..., resumable=True)``) and groups (``RESUMABLE = True``).
RESUMABLE = experiment.RESUMABLE

_ABSENT = "<absent>"


class ConfigChanged(ConfigError):
  """A run directory's checkpoint was trained under another config."""


def flatten(tree: dict, prefix: str = "") -> dict:
  """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; tuples become lists (as JSON stores them)."""
  out = {}
  for k, v in tree.items():
    name = f"{prefix}{k}"
    if isinstance(v, dict):
      out.update(flatten(v, name + "."))
    else:
      out[name] = list(v) if isinstance(v, tuple | list) else v
  return out


def resumable(key: str) -> bool:
  return any(fnmatch.fnmatchcase(key, pattern) for pattern in RESUMABLE)


def resume_hash(config: dict) -> str:
  """Hash of the resolved config without the :data:`RESUMABLE` keys."""
  kept = {k: v for k, v in sorted(flatten(config).items()) if not resumable(k)}
  blob = json.dumps(kept, sort_keys=True, default=str).encode()
  return hashlib.sha256(blob).hexdigest()[:16]


def changed_keys(old: dict, new: dict, defaults: dict | None = None) -> dict:
  """``{key: (old, new)}`` for every non-resumable key whose value differs.

  ``defaults`` (flattened base config): a key the old config lacks (added to grpo_jax after the
  run started) counts as unchanged when the new value is its default."""
  old_f, new_f = flatten(old), flatten(new)
  defaults = defaults or {}
  out = {}
  for key in sorted(set(old_f) | set(new_f)):
    if resumable(key):
      continue
    a, b = old_f.get(key, _ABSENT), new_f.get(key, _ABSENT)
    if a == _ABSENT and key in defaults and b == defaults[key]:
      continue
    if a != b:
      out[key] = (a, b)
  return out


def format_changes(changes: dict) -> str:
  return "\n".join(f"  {k}: {a!r} → {b!r}" for k, (a, b) in changes.items())


def has_checkpoint(workdir) -> bool:
  """True if ``workdir/checkpoints`` holds a step (orbax names step directories by number)."""
  ckpts = epath.Path(workdir) / names.CHECKPOINTS
  return ckpts.is_dir() and any(p.name.isdigit() for p in ckpts.iterdir())


def read(workdir) -> dict | None:
  """``config.json`` of ``workdir`` (None when absent), its ``config`` in today's keys: a run
  recorded under keys since replaced (``grpo_jax.config.legacy``) resumes as before."""
  saved = read_files.config(workdir)
  if saved and isinstance(saved.get("config"), dict):
    where = f"{epath.Path(workdir) / names.CONFIG}"
    saved = {**saved, "config": legacy.upgrade(saved["config"], where)}
  return saved


def check(saved: dict | None, config: dict, workdir, allow_change: bool = False) -> dict:
  """The changed keys between ``saved`` (``config.json`` of ``workdir``, None if absent) and
  ``config``; raises :class:`ConfigChanged` naming them unless ``allow_change``."""
  if not saved or "config" not in saved:
    return {}
  from grpo_jax.config import base_config  # noqa: PLC0415

  changes = changed_keys(saved["config"], config, flatten(base_config().to_dict()))
  if changes and not allow_change:
    raise ConfigChanged(
      f"{workdir} holds a run started under another config (resume hash "
      f"{saved.get('resume_hash', '?')} → {resume_hash(config)}); changed keys:\n"
      f"{format_changes(changes)}\n"
      "use a new --workdir, or pass --allow_config_change to resume under the new config "
      f"(keys that may change on resume: {', '.join(RESUMABLE)})"
    )
  return changes


def record(
  saved: dict | None, config: dict, content_hash: str, provenance: dict, changes: dict
) -> dict:
  """The new ``config.json``: this config and invocation, earlier ones kept in ``history``."""
  saved = saved or {}
  history = list(saved.get("history", []))
  if saved.get("config") is not None:
    history.append(
      {
        "hash": saved.get("hash"),
        "resume_hash": saved.get("resume_hash"),
        "provenance": saved.get("provenance"),
      }
    )
  config_changes = list(saved.get("config_changes", []))
  if changes:
    config_changes.append(
      {
        "time": provenance.get("time"),
        "command": provenance.get("command"),
        "keys": {k: [a, b] for k, (a, b) in changes.items()},
      }
    )
  return {
    "config": config,
    "hash": content_hash,
    "resume_hash": resume_hash(config),
    "provenance": provenance,
    "history": history,
    "config_changes": config_changes,
  }


__all__ = [
  "ConfigChanged",
  "RESUMABLE",
  "changed_keys",
  "check",
  "flatten",
  "format_changes",
  "has_checkpoint",
  "read",
  "record",
  "resumable",
  "resume_hash",
]
