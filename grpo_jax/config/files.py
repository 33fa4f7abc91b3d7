"""Loading experiment files (``configs/*.py``) and command-line overrides.

``load("configs/quickstart.py:steps=20", ["loss.kind=dapo"])`` imports the file, calls its
``get_config(arg)``, applies ``key=value`` overrides (typed like the value they replace), checks
every key against :func:`grpo_jax.config.base_config` and locks the result.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import pathlib

from ml_collections import ConfigDict

from grpo_jax.config import base as config_lib


def parse_value(text: str, current):
  """Parses ``text`` to the type of ``current`` (bool, int, float, str, tuple)."""
  if isinstance(current, bool):
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
      return True
    if lowered in ("0", "false", "no", "off"):
      return False
    raise ValueError(f"expected a boolean, got {text!r}")
  if isinstance(current, int):
    return int(float(text)) if float(text).is_integer() else _raise(text, "an integer")
  if isinstance(current, float):
    return float(text)
  if isinstance(current, tuple | list):
    value = (
      ast.literal_eval(text)
      if text.strip()[:1] in "(["
      else tuple(ast.literal_eval(x) for x in text.split(",") if x.strip())
    )
    return tuple(value) if isinstance(value, tuple | list) else (value,)
  if current is None:
    try:
      return ast.literal_eval(text)
    except (ValueError, SyntaxError):
      return text
  return text


def _raise(text, what):
  raise ValueError(f"expected {what}, got {text!r}")


def parse_arg(arg: str | None) -> dict[str, str]:
  """``"steps=20,hadw=1"`` -> ``{"steps": "20", "hadw": "1"}`` for ``get_config(arg)``."""
  if not arg:
    return {}
  out = {}
  for part in arg.split(","):
    if "=" not in part:
      raise ValueError(f"config argument {part!r} must look like key=value")
    key, value = part.split("=", 1)
    out[key.strip()] = value.strip()
  return out


def load_module(path: str):
  spec = importlib.util.spec_from_file_location(pathlib.Path(path).stem, path)
  if spec is None or spec.loader is None:
    raise FileNotFoundError(f"config file {path} not found")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def load(spec: str, overrides: list[str] = ()) -> ConfigDict:
  """Builds, overrides, validates and locks the config named by ``path[:arg]``."""
  path, _, arg = spec.partition(":")
  if not pathlib.Path(path).exists():
    raise FileNotFoundError(f"config file {path} not found")
  cfg = load_module(path).get_config(arg or None)
  config_lib.check_keys(cfg)
  for item in overrides:
    key, sep, text = item.partition("=")
    if not sep:
      raise ValueError(f"override {item!r} must look like key=value")
    current = _get(cfg, key)
    config_lib.override(cfg, key, parse_value(text, current))
  return config_lib.finalize(cfg)


def _get(cfg: ConfigDict, key: str):
  node = cfg
  for part in key.split("."):
    if not isinstance(node, ConfigDict) or part not in node:
      raise KeyError(
        f"unknown config key '{key}'; did you mean '{config_lib.nearest_key(cfg, key)}'?"
      )
    node = node[part]
  return node


def content_hash(cfg: ConfigDict) -> str:
  blob = json.dumps(cfg.to_dict(), sort_keys=True, default=str).encode()
  return hashlib.sha256(blob).hexdigest()[:16]
