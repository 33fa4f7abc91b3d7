"""Loading experiment files (``configs/*.py``) and command-line overrides.

``load("configs/quickstart.py:steps=20", ["loss.kind=dapo"])`` imports the file, checks the
argument's names against the file's ``ARGS`` (:func:`parse_arg`: a misspelt one is an error
naming the valid ones), calls its ``get_config(arg)``, applies ``key=value``
overrides (parsed like ``ml_collections.config_flags``, to the type of the value they replace:
:func:`parse_value`), checks every key against :func:`grpo_jax.config.base_config` and returns
the typed, validated :class:`~grpo_jax.config.experiment.Experiment` (every value checked,
``grpo_jax.config.experiment``; its ConfigDict, locked, is ``.cfg``).
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import importlib.util
import json
import pathlib

from ml_collections import ConfigDict

from grpo_jax.config import base as config_lib
from grpo_jax.config.experiment import Experiment
from grpo_jax.config.fields import AUTO

_TRUE, _FALSE = ("true", "t", "1", "yes", "on"), ("false", "f", "0", "no", "off")


def _literal(text: str):
  """A Python literal, else the text itself (an unquoted string), as ``config_flags``' literal
  parser does; ``true`` / ``false`` in any case are booleans."""
  if text.lower() in ("true", "false"):
    return text.lower() == "true"
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text


def _tuple(text: str) -> tuple:
  """``a,b`` / ``(a, b)`` / ``[1, 2]`` / ``1`` -> a tuple; elements are literals or unquoted
  strings; ``''`` and ``()`` are the empty tuple."""
  text = text.strip()
  try:
    value = ast.literal_eval(text) if text else ()
  except (ValueError, SyntaxError):
    inner = text[1:-1] if text[:1] + text[-1:] in ("()", "[]") else text
    value = tuple(_literal(x.strip()) for x in inner.split(",") if x.strip())
  if isinstance(value, tuple | list):
    return tuple(value)
  return (value,)


def parse_value(text: str, current):
  """Parses a command-line value ``text`` to the type of the ``current`` value, as
  ``ml_collections.config_flags`` does for a field of that type:

  * bool: ``true/t/1`` or ``false/f/0`` in any case (and ``yes/on``, ``no/off``);
  * int: a literal integer (``7``, ``0x10``, ``1_000``; ``1e3`` when it is a whole number);
  * float: ``float(text)``;
  * str: the text as is, unquoted (``--config.model.hf_path=/ckpt/x``);
  * tuple / list: ``a,b``, ``(a, b)`` or ``[a, b]``, each element a Python literal or an
    unquoted string (``aime24,aime25`` -> ``('aime24', 'aime25')``; ``1,8`` -> ``(1, 8)``);
  * None (an untyped field): a Python literal, else the text as a string.
  """
  if isinstance(current, bool):
    lowered = text.strip().lower()
    if lowered in _TRUE:
      return True
    if lowered in _FALSE:
      return False
    raise ValueError(f"expected a boolean (true/false/1/0), got {text!r}")
  if isinstance(current, int):
    try:
      return int(text.strip(), 0)
    except ValueError:
      pass
    try:
      number = float(text)
    except ValueError:
      number = None
    if number is None or not number.is_integer():
      raise ValueError(f"expected an integer, got {text!r}")
    return int(number)
  if isinstance(current, float):
    try:
      return float(text)
    except ValueError:
      raise ValueError(f"expected a float, got {text!r}") from None
  if isinstance(current, tuple | list):
    return _tuple(text)
  if current is None:
    return _literal(text.strip())
  return text


def parse_arg(arg: str | None, allowed=None) -> dict[str, str]:
  """``"steps=20,hadw=1"`` -> ``{"steps": "20", "hadw": "1"}`` for ``get_config(arg)``.

  ``allowed``: the argument names the config file reads (its ``ARGS``; every ``configs/*.py``
  passes them); any other name is a ValueError naming the nearest and every valid one, so a
  misspelt argument never passes unnoticed. None (the sweep and aggregation tools, which only
  split an argument they pass on) accepts any name."""
  if not arg:
    return {}
  out = {}
  for part in arg.split(","):
    if "=" not in part:
      raise ValueError(f"config argument {part!r} must look like key=value")
    key, value = part.split("=", 1)
    key = key.strip()
    if allowed is not None and key not in allowed:
      allowed = tuple(allowed)
      near = difflib.get_close_matches(key, allowed, n=1, cutoff=0.0)
      hint = f"did you mean {near[0]!r}? " if near else ""
      raise ValueError(
        f"unknown config argument {key!r}; {hint}valid arguments: {sorted(allowed) or 'none'}"
      )
    out[key] = value.strip()
  return out


def load_module(path: str):
  """A Python file (a config, a script) as a module; a file that does not run is a ValueError
  naming it (and the line of a syntax error)."""
  spec = importlib.util.spec_from_file_location(pathlib.Path(path).stem, path)
  if spec is None or spec.loader is None:
    raise FileNotFoundError(f"config file {path} not found")
  module = importlib.util.module_from_spec(spec)
  try:
    spec.loader.exec_module(module)
  except SyntaxError as e:
    raise ValueError(f"config file {path}:{e.lineno}: {e.msg}") from None
  except Exception as e:
    raise ValueError(f"config file {path} failed to run: {type(e).__name__}: {e}") from e
  return module


def load(spec: str, overrides: list[str] = ()) -> Experiment:
  """The Experiment of the config named by ``path[:arg]`` with ``key=value`` ``overrides``."""
  path, _, arg = spec.partition(":")
  if not pathlib.Path(path).exists():
    raise FileNotFoundError(f"config file {path} not found")
  module = load_module(path)
  if not callable(getattr(module, "get_config", None)):
    raise ValueError(f"config file {path} defines no get_config(arg) function")
  if arg and getattr(module, "ARGS", None) is not None:
    parse_arg(arg, module.ARGS)  # checked here too, whatever get_config does with it
  cfg = module.get_config(arg or None)
  config_lib.check_keys(cfg)
  seen = set()
  for item in overrides:
    key, sep, text = item.partition("=")
    if not sep:
      raise ValueError(f"override {item!r} must look like key=value")
    current = _get(cfg, key)
    try:
      value = _parse(key, text, current)
    except ValueError as e:
      raise ValueError(f"config key {key}: {e}") from None
    if isinstance(current, tuple | list) and key in seen:
      value = tuple(current) + value  # repeated flags append, as in config_flags
    seen.add(key)
    config_lib.override(cfg, key, value)
  return config_lib.finalize(cfg)


def _parse(key: str, text: str, current):
  """:func:`parse_value`; an ``int | str`` key (``config.fields.auto_spec``) takes an int or
  ``auto``, whichever it holds now."""
  if key not in config_lib.auto_keys():
    return parse_value(text, current)
  if text.strip() == AUTO:
    return AUTO
  try:
    return parse_value(text, 0)
  except ValueError:
    raise ValueError(f"expected an integer or {AUTO!r}, got {text!r}") from None


def _get(cfg: ConfigDict, key: str):
  node = cfg
  for part in key.split("."):
    if not isinstance(node, ConfigDict) or part not in node:
      raise KeyError(config_lib.unknown_key(cfg, key))
    node = node[part]
  return node


def content_hash(e: Experiment | ConfigDict) -> str:
  """The hash of the whole config (``config.json``'s ``hash``)."""
  blob = json.dumps(e.to_dict(), sort_keys=True, default=str).encode()
  return hashlib.sha256(blob).hexdigest()[:16]
