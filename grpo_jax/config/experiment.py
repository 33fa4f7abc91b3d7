"""The validated, typed experiment: :class:`Experiment` holds one frozen group per config
group (``groups_run``, ``groups_method``) and is what the library's entry points pass on.

:func:`build` turns a whole config into an :class:`Experiment`, checking every field's type,
choices and range and the cross-group rules (``grpo_jax.config.checks``);
:func:`grpo_jax.config.finalize` runs it when a config is loaded, so a bad value fails at load
with the key and its valid choices, before a model is built or a file written. Field names are
the config keys, so ``e.loss.kind`` reads as on the ConfigDict. Loading a file
(``grpo_jax.config.files.load``) or finalizing a ConfigDict (``grpo_jax.config.finalize``:
``finalize(cfg)`` after editing ``base_config()``, as tests and notebooks do) returns the
Experiment; :meth:`Experiment.with_overrides` derives another. :func:`of` converts a ConfigDict
group into its typed form.
"""

from __future__ import annotations

import dataclasses
import typing

from ml_collections import ConfigDict

from grpo_jax.config.checks import check_experiment
from grpo_jax.config.fields import Group, build_group, check_field, coerce, leaf_fields, spec
from grpo_jax.config.groups_method import (
  Advantage,
  Dapo,
  Hadw,
  Loss,
  Optimizer,
  Reward,
  Strategy,
)
from grpo_jax.config.groups_run import (
  Checkpoint,
  Data,
  Eval,
  Logging,
  Mesh,
  Model,
  Profile,
  Rollout,
  Sampling,
  Warmstart,
)

# In base_config's order.
GROUPS: dict[str, type[Group]] = {
  cls.GROUP: cls
  for cls in (
    Model,
    Data,
    Profile,
    Sampling,
    Rollout,
    Strategy,
    Reward,
    Advantage,
    Hadw,
    Loss,
    Dapo,
    Optimizer,
    Warmstart,
    Mesh,
    Eval,
    Checkpoint,
    Logging,
  )
}

# The names each enum-valued key accepts, from the groups' declarations.
CHOICES: dict[str, tuple[str, ...]] = {
  key: f.metadata["choices"]
  for name, cls in GROUPS.items()
  for key, f in leaf_fields(cls, f"{name}.")
  if f.metadata["choices"]
}

# key -> "module.TABLE", the registry whose names an enum key's choices are (the choices are
# written on the field so that loading a config imports neither jax nor the model stack).
REGISTRIES: dict[str, str] = {
  key: f.metadata["registry"]
  for name, cls in GROUPS.items()
  for key, f in leaf_fields(cls, f"{name}.")
  if f.metadata["registry"]
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Experiment:
  """Every group, the top-level keys, and the ConfigDict they were built from (``cfg``: what
  is written to config.json and hashed). Reads like the config (``e.loss.kind``,
  ``"hadw" in e``, ``e["advantage"]``)."""

  seed: int = spec(0, doc="the run's seed (initialisation, sampling, data order)")
  steps: int = spec(
    60, ge=0, resumable=True, doc="RL steps (one batch of B prompts x G rollouts each)"
  )
  model: Model
  data: Data
  profile: Profile
  sampling: Sampling
  rollout: Rollout
  strategy: Strategy
  reward: Reward
  advantage: Advantage
  hadw: Hadw
  loss: Loss
  dapo: Dapo
  optimizer: Optimizer
  warmstart: Warmstart
  mesh: Mesh
  eval: Eval
  checkpoint: Checkpoint
  logging: Logging
  cfg: ConfigDict = dataclasses.field(repr=False, compare=False)

  def __getitem__(self, key: str):
    return getattr(self, key)

  def __contains__(self, key: str) -> bool:
    return key in TOP or key in GROUPS

  def to_dict(self) -> dict:
    return self.cfg.to_dict()

  def with_overrides(self, overrides: dict[str, typing.Any]) -> Experiment:
    """A new validated Experiment: this one's config with the dotted ``overrides`` set
    (``{"steps": 5, "sampling.group_size": 2}``); a bad value fails as at load, an unknown key
    with a KeyError naming it."""
    cfg = ConfigDict(self.cfg.to_dict())
    for key, value in overrides.items():
      *path, leaf = key.split(".")
      node = cfg
      for part in path:
        node = node[part] if part in node and isinstance(node[part], ConfigDict) else None
        if node is None:
          break
      if node is None or leaf not in node or isinstance(node[leaf], ConfigDict):
        raise KeyError(f"unknown config key '{key}'")
      node[leaf] = value
    e = build(cfg)
    cfg.lock()
    return e


def build(cfg: ConfigDict, cross: bool = True) -> Experiment:
  """The typed groups of a whole experiment config; raises ValueError naming the first bad key.

  ``cross=False`` skips the cross-group rules (``checks.check_experiment``)."""
  hints = typing.get_type_hints(Experiment)
  fields = {f.name: f for f in dataclasses.fields(Experiment)}
  top = {}
  for name in TOP:
    top[name] = coerce(name, cfg[name], hints[name])
    check_field(name, top[name], fields[name].metadata)
  groups = {name: build_group(cls, name, cfg[name]) for name, cls in GROUPS.items()}
  e = Experiment(cfg=cfg, **top, **groups)
  if cross:
    check_experiment(e)
  return e


def of(x, group: str | None = None):
  """The typed form of ``x``: a group or Experiment as is; a whole ConfigDict config as an
  Experiment (group rules only); a ConfigDict group as its typed group (``group`` names it, else
  its key set does)."""
  if isinstance(x, Group | Experiment):
    return x
  keys = set(x.keys())
  if group is None:
    if {"advantage", "loss"} <= keys:
      return build(x, cross=False)
    matches = [n for n, cls in GROUPS.items() if keys == {f.name for f in dataclasses.fields(cls)}]
    if len(matches) != 1:
      raise ValueError(f"cannot tell which config group has the keys {sorted(keys)}")
    group = matches[0]
  return build_group(GROUPS[group], group, x)


# The top-level keys, declared on Experiment.
TOP = ("seed", "steps")


def _resumable() -> tuple[str, ...]:
  """The key patterns that may change on resume (``grpo_jax.config.resume``): the fields
  declared ``resumable`` and ``group.*`` for a group declared ``RESUMABLE``."""
  top = [f.name for f in dataclasses.fields(Experiment) if f.name in TOP]
  keys = [n for n in top if Experiment.__dataclass_fields__[n].metadata["resumable"]]
  for name, cls in GROUPS.items():
    if cls.RESUMABLE:
      keys.append(f"{name}.*")
    else:
      keys += [key for key, f in leaf_fields(cls, f"{name}.") if f.metadata["resumable"]]
  return tuple(keys)


RESUMABLE = _resumable()


__all__ = [
  "CHOICES",
  "GROUPS",
  "REGISTRIES",
  "RESUMABLE",
  "TOP",
  "Experiment",
  "Group",
  "build",
  "of",
  *(c.__name__ for c in GROUPS.values()),
]
