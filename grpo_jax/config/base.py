"""The base experiment config and its keys: :func:`base_config` (every key with its default,
derived from the groups declared in ``grpo_jax.config.groups_run`` / ``groups_method``), key
checks and :func:`finalize`.

Experiment files in ``configs/`` start from :func:`base_config` and change fields. Loading
validates the result and returns the typed Experiment (:func:`finalize`): an unknown or misspelt
key is an error
naming it and the nearest valid key (a replaced key: the key that replaced it,
``grpo_jax.config.legacy``), a bad value one naming the key and its valid choices or range.
``docs/config.md`` lists every key.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing

import ml_collections
from ml_collections import ConfigDict

from grpo_jax.config import legacy
from grpo_jax.config.fields import leaf_fields

if typing.TYPE_CHECKING:
  from grpo_jax.config.experiment import Experiment


def base_config() -> ConfigDict:
  """Every key with its default, from the groups' declarations (``grpo_jax.config.experiment``)."""
  from grpo_jax.config import experiment

  c = ConfigDict()
  for f in dataclasses.fields(experiment.Experiment):
    if f.name in experiment.TOP:
      c[f.name] = f.default
  for name, cls in experiment.GROUPS.items():
    c[name] = _group(cls)
  return c


def _group(cls) -> ConfigDict:
  return ConfigDict({f.name: _field(f) for f in dataclasses.fields(cls)})


def _field(f: dataclasses.Field):
  """A key's default; a nested group's keys as a ConfigDict (``model.lora``); an ``int | str``
  key's as an untyped reference, so a config file may set it to an int or ``"auto"`` (a typed
  ConfigDict field refuses a change of type)."""
  if f.metadata.get("group"):
    return _group(f.metadata["group"])
  if f.metadata.get("auto"):
    return ml_collections.FieldReference(f.default, field_type=object)
  return f.default


def auto_keys() -> frozenset[str]:
  """The dotted keys that take an int or ``"auto"`` (``config.fields.auto_spec``)."""
  from grpo_jax.config import experiment

  return frozenset(
    key
    for name, cls in experiment.GROUPS.items()
    for key, f in leaf_fields(cls, f"{name}.")
    if f.metadata.get("auto")
  )


def _all_keys(cfg: ConfigDict, prefix: str = "") -> list[str]:
  keys = []
  for k, v in cfg.items():
    name = f"{prefix}{k}"
    keys.append(name)
    if isinstance(v, ConfigDict):
      keys.extend(_all_keys(v, name + "."))
  return keys


def nearest_key(cfg: ConfigDict, key: str) -> str | None:
  """The valid dotted key closest to ``key`` (for error messages)."""
  match = difflib.get_close_matches(key, _all_keys(cfg), n=1, cutoff=0.0)
  return match[0] if match else None


def override(cfg: ConfigDict, key: str, value) -> None:
  """Sets a dotted key, raising a KeyError that names the nearest valid key if unknown."""
  *path, leaf = key.split(".")
  node = cfg
  for i, part in enumerate(path):
    if part not in node or not isinstance(node[part], ConfigDict):
      raise KeyError(unknown_key(cfg, ".".join(path[: i + 1])))
    node = node[part]
  if leaf not in node:
    raise KeyError(unknown_key(cfg, key))
  with node.unlocked():
    node[leaf] = value


def unknown_key(cfg: ConfigDict, key: str) -> str:
  """The error for a key ``cfg`` lacks: a replaced key names its replacement
  (``grpo_jax.config.legacy``), any other the nearest valid key."""
  return (
    legacy.replaced(key) or f"unknown config key '{key}'; did you mean '{nearest_key(cfg, key)}'?"
  )


def check_keys(cfg: ConfigDict, reference: ConfigDict | None = None, prefix: str = "") -> None:
  """Every key of ``cfg`` must exist in the base config (catches misspelt keys in files)."""
  reference = base_config() if reference is None else reference
  root = base_config()
  for k, v in cfg.items():
    name = f"{prefix}{k}"
    if k not in reference:
      raise KeyError(unknown_key(root, name))
    if isinstance(v, ConfigDict):
      if not isinstance(reference[k], ConfigDict):
        raise KeyError(f"config key '{name}' is a value, not a group")
      check_keys(v, reference[k], name + ".")


def finalize(cfg: ConfigDict) -> Experiment:
  """The typed :class:`~grpo_jax.config.experiment.Experiment` of ``cfg``: validates its keys
  against the base config, resolves the defaults that depend on other keys, builds the groups
  (``grpo_jax.config.experiment.build``: every value's type, choices and range, and the
  cross-key rules) and locks ``cfg``, which the Experiment keeps as ``.cfg`` (config.json, the
  content hash). Raises KeyError / ValueError naming the first bad key."""
  from grpo_jax.config import experiment

  check_keys(cfg)
  resolve_defaults(cfg)
  e = experiment.build(cfg)
  cfg.lock()
  return e


def defaults(overrides: dict[str, typing.Any] | None = None) -> Experiment:
  """The base config with the dotted ``overrides`` set (``{"loss.kind": "dapo"}``), validated:
  the typed Experiment a test or a notebook starts from, as :func:`finalize` returns it."""
  cfg = base_config()
  for key, value in (overrides or {}).items():
    override(cfg, key, value)
  return finalize(cfg)


def resolve_defaults(cfg: ConfigDict) -> None:
  """Keys whose default depends on another key, set in place: ``loss.rollout_correction =
  'auto'`` is ``token_tis`` when the sampler's log-probs are not the trainer's (an external
  engine: other kernels, other numerics; ``rollout.off_policy_steps > 0``: parameters one update
  stale, which the μ = 1 ratio of exactly 1 would not weigh) and ``none`` otherwise."""
  if cfg.loss.rollout_correction == "auto":
    foreign = cfg.sampling.engine != "jax" or cfg.rollout.off_policy_steps > 0
    cfg.loss.rollout_correction = "token_tis" if foreign else "none"


def to_dict(cfg: ConfigDict) -> dict:
  return cfg.to_dict()


__all__ = [
  "base_config",
  "defaults",
  "finalize",
  "override",
  "nearest_key",
  "check_keys",
  "unknown_key",
  "ml_collections",
]
