"""The declaration machinery of the config groups: a key's default, type, choices, range and
doc in one dataclass field (:func:`spec`), and the checks that build a group from a mapping.

A group (``grpo_jax.config.groups_run`` / ``groups_method``) is a frozen dataclass whose fields
are its keys. Building it (:func:`build_group`) checks

* each value's type, from the annotation (``int``, ``float``, ``bool``, ``str``,
  ``tuple[T, ...]``): a string where a number is expected, a float or an int where a bool is,
  fail;
* its choices (the names of the registry of the module that reads the key, so the error lists
  exactly the names the code accepts; the field names that registry, ``registry=``, and
  ``tests/config/test_experiment.py`` checks they agree) and its range (``ge``/``gt``/``le``/
  ``lt``, finite floats);
* the group's own cross-field rules (``Group.check``);
* a nested group (:func:`nested`: ``model.lora``), built and checked the same way under its
  dotted prefix.

Whether a key may change when a run resumes (``grpo_jax.config.resume``) is declared on it too:
``spec(..., resumable=True)``, or ``RESUMABLE = True`` on a group whose every key may.

A key annotated ``int | str`` (:func:`auto_spec`) takes an int or the string ``"auto"``: a
value the run resolves at load (``grpo_jax.train.autofit``), so every reader downstream sees an
int.
"""

from __future__ import annotations

import dataclasses
import math
import typing

import numpy as np


class Group:
  """Base of the groups: read-only mapping access as on a ConfigDict group."""

  GROUP = ""
  RESUMABLE = False  # every key of the group may change on resume

  def __getitem__(self, key: str):
    return getattr(self, key)

  def __contains__(self, key: str) -> bool:
    return key in self.keys()

  def keys(self) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(self))

  def check(self) -> None:
    """The group's cross-field rules (overridden where a group has some)."""

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)


def group(name: str):
  """Class decorator: a frozen dataclass declaring the config group ``name``."""

  def wrap(cls):
    cls = dataclasses.dataclass(frozen=True)(cls)
    cls.GROUP = name
    return cls

  return wrap


RULES = ("ge", "gt", "le", "lt", "off")
AUTO = "auto"  # an ``int | str`` key's value resolved at load


def spec(
  default,
  *,
  choices: tuple[str, ...] = (),
  registry: str = "",
  doc: str = "",
  resumable: bool = False,
  **rules,
):
  """One config key: its default, its valid ``choices`` (an enum key) and the ``registry``
  (``module.TABLE``) of the code that reads them, its ``doc``, whether it may change when a run
  resumes (``resumable``: how long or how often, never what a step computes) and its range
  ``rules``: bounds ``ge``/``gt``/``le``/``lt`` and ``off``, a value outside them that is still
  allowed (e.g. -1 = 'the default')."""
  unknown = set(rules) - set(RULES)
  if unknown:
    raise TypeError(f"spec() rules are {RULES}, not {sorted(unknown)}")
  meta = {
    "choices": choices,
    "registry": registry,
    "doc": doc,
    "resumable": resumable,
    **dict.fromkeys(RULES),
    **rules,
  }
  return dataclasses.field(default=default, metadata=meta)


def nested(cls, *, doc: str = ""):
  """A field holding the group ``cls`` (its keys one level down: ``model.lora.rank``)."""
  meta = {**spec(None, doc=doc).metadata, "group": cls}
  return dataclasses.field(default=cls(), metadata=meta)


def leaf_fields(cls, prefix: str = ""):
  """(dotted key, field) of every key of group ``cls``, a nested group's keys in its place."""
  for f in dataclasses.fields(cls):
    if f.metadata.get("group"):
      yield from leaf_fields(f.metadata["group"], f"{prefix}{f.name}.")
    else:
      yield f"{prefix}{f.name}", f


def auto_spec(default, *, doc: str = "", resumable: bool = False, **rules):
  """A key that takes an int (within ``rules``) or ``"auto"``; annotate it ``int | str``."""
  meta = {**spec(default, doc=doc, resumable=resumable, **rules).metadata, "auto": True}
  return dataclasses.field(default=default, metadata=meta)


def as_int(value, first: int = 0) -> int:
  """An ``int | str`` key's value as an int. The loop resolves "auto" at load
  (``grpo_jax.train.autofit``); a program built without it (a test, a notebook, the memory plan)
  reads an unresolved "auto" as ``first``, the value auto tries first."""
  return first if value == AUTO else int(value)


def is_auto_type(tp) -> bool:
  return set(typing.get_args(tp)) == {int, str}


def _type_name(tp) -> str:
  if is_auto_type(tp):
    return f"an int or {AUTO!r}"
  if typing.get_origin(tp) is tuple:
    return f"a tuple of {typing.get_args(tp)[0].__name__}"
  return {int: "an int", float: "a float", bool: "a bool", str: "a string"}[tp]


def _coerce_scalar(value, tp):
  """``value`` as ``tp``, or raises TypeError. Ints pass as floats; nothing else converts."""
  if tp is bool:
    if isinstance(value, bool | np.bool_):
      return bool(value)
  elif tp is int:
    if isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_):
      return int(value)
  elif tp is float:
    if isinstance(value, int | float | np.integer | np.floating) and not isinstance(
      value, bool | np.bool_
    ):
      return float(value)
  elif tp is str:
    if isinstance(value, str):
      return value
  raise TypeError


def coerce(key: str, value, tp):
  """``value`` checked against the annotation ``tp`` (see the module docstring)."""
  try:
    if is_auto_type(tp):
      return AUTO if value == AUTO else _coerce_scalar(value, int)
    if typing.get_origin(tp) is tuple:
      if not isinstance(value, tuple | list):
        raise TypeError
      (elem, _) = typing.get_args(tp)
      return tuple(_coerce_scalar(v, elem) for v in value)
    return _coerce_scalar(value, tp)
  except TypeError:
    raise ValueError(
      f"config key {key} = {value!r} ({type(value).__name__}) must be {_type_name(tp)}"
    ) from None


def rule_text(meta) -> str:
  """A field's rules in words: its choices, or its bounds (``''`` when it has none)."""
  if meta["choices"]:
    return "one of " + ", ".join(meta["choices"])
  text = _bound_text(meta) if any(meta[k] is not None for k in RULES[:4]) else ""
  return f"{text} or {AUTO!r}" if meta.get("auto") else text


def _bound_text(meta) -> str:
  parts = [f"{op} {meta[k]}" for k, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))]
  parts = [p for p, k in zip(parts, ("ge", "gt", "le", "lt"), strict=True) if meta[k] is not None]
  text = " and ".join(parts)
  return text + (f" (or {meta['off']!r})" if meta["off"] is not None else "")


def check_field(key: str, value, meta) -> None:
  """The choices and range rules of one field (already of its type)."""
  if meta["choices"]:
    valid = meta["choices"]
    if isinstance(value, tuple):  # a tuple key: each element is one of the choices
      for v in value:
        if v not in valid:
          raise ValueError(f"config key {key} = {value!r}: {v!r} is not one of {sorted(valid)}")
    elif value not in valid:
      raise ValueError(f"config key {key} = {value!r} is not one of {sorted(valid)}")
  if meta.get("auto") and value == AUTO:
    return
  if meta["off"] is not None and value == meta["off"]:
    return
  values = value if isinstance(value, tuple) else (value,)
  for v in values:
    bad = (
      (meta["ge"] is not None and not v >= meta["ge"])
      or (meta["gt"] is not None and not v > meta["gt"])
      or (meta["le"] is not None and not v <= meta["le"])
      or (meta["lt"] is not None and not v < meta["lt"])
      or (isinstance(v, float) and not math.isfinite(v))
    )
    if bad:
      raise ValueError(f"config key {key} = {value!r} must be {rule_text(meta)}")


def build_group(cls, group: str, values):
  """``cls`` (a frozen group dataclass) from a mapping ``values`` (a ConfigDict group), every
  field typed and checked; the group's own cross-field rules run in ``cls.check``."""
  hints = typing.get_type_hints(cls)
  names = [f.name for f in dataclasses.fields(cls)]
  missing = [n for n in names if n not in values]
  if missing:
    raise ValueError(f"config group {group} lacks key(s) {missing}")
  kwargs = {}
  for f in dataclasses.fields(cls):
    key = f"{group}.{f.name}"
    if f.metadata.get("group"):
      if not hasattr(values[f.name], "keys"):
        raise ValueError(f"config key {key} is a group of keys, not a value")
      kwargs[f.name] = build_group(f.metadata["group"], key, values[f.name])
      continue
    kwargs[f.name] = coerce(key, values[f.name], hints[f.name])
    check_field(key, kwargs[f.name], f.metadata)
  built = cls(**kwargs)
  built.check()
  return built


class ConfigError(ValueError):
  """A config that cannot run; the message names the key and what it needs. The launcher
  exits with status 2 and the message (no traceback), also when the check needs the data read
  first (``loss.pack_width`` against the prompt width)."""


def fail(message: str) -> typing.NoReturn:
  raise ConfigError(message)


__all__ = [
  "AUTO",
  "ConfigError",
  "as_int",
  "Group",
  "auto_spec",
  "is_auto_type",
  "build_group",
  "leaf_fields",
  "nested",
  "coerce",
  "fail",
  "group",
  "rule_text",
  "spec",
]
