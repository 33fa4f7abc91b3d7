"""Reward functions named in the config (``reward.functions``), called as TRL calls its
``reward_funcs``: ``fn(prompts, completions, **columns) -> list[float | None]``.

A function is named ``"package.module:fn"`` (importable), ``"path/to/file.py:fn"`` (a file,
relative to the working directory) or by a built-in name (:data:`BUILTINS`: ``math``, the
math verifier on the ``answer`` column; ``countdown``, the Countdown grader on ``numbers`` and
``target``). ``columns`` are the dataset's other fields, one list per field, row-aligned with
``prompts`` and ``completions``. An entry ``None`` means "no score" for that row: the row's
reward is the weighted sum over the functions that scored it (TRL's ``nansum``), and a row no
function scored gets 0.

Every call is checked: a function that raises, returns a list of the wrong length, or returns a
value that is neither a finite number nor None stops the run with a :class:`RewardError` naming
the function and the offending row.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import math
import numbers
import os
from collections.abc import Callable, Sequence

import numpy as np


class RewardError(RuntimeError):
  """A reward function failed; the message names it and the row."""


def _math(prompts, completions, answer, timeout_s: float = 5.0, num_workers: int = 0, **_):
  """The built-in math verifier (``grpo_jax.rewards.math``) against the ``answer`` column."""
  del prompts
  from grpo_jax.rewards.math import score_batch  # noqa: PLC0415 (math-verify is heavy)

  rewards_N, _ = score_batch(completions, answer, timeout_s=timeout_s, num_workers=num_workers)
  return [float(r) for r in rewards_N]


def _countdown(prompts, completions, numbers, target, **_):
  """The built-in Countdown grader against the ``numbers`` and ``target`` columns."""
  del prompts
  from grpo_jax.rewards.countdown import countdown_reward  # noqa: PLC0415

  return [countdown_reward(n, t, c) for n, t, c in zip(numbers, target, completions)]


BUILTINS: dict[str, Callable] = {"math": _math, "countdown": _countdown}


def check_name(spec: str) -> str | None:
  """Why ``spec`` cannot name a function (None when it can), without importing it."""
  if spec in BUILTINS:
    return None
  module, sep, fn = spec.rpartition(":")
  if not sep or not module or not fn.isidentifier():
    return f"{spec!r} is neither a built-in ({sorted(BUILTINS)}) nor 'module:fn' / 'file.py:fn'"
  if module.endswith(".py") and not os.path.isfile(module):
    return f"{spec!r}: no file {module}"
  return None


def load(spec: str) -> Callable:
  """The function ``spec`` names (see the module docstring)."""
  problem = check_name(spec)
  if problem:
    raise ValueError(f"config key reward.functions: {problem}")
  if spec in BUILTINS:
    return BUILTINS[spec]
  module_name, _, fn_name = spec.rpartition(":")
  if module_name.endswith(".py"):
    name = "grpo_jax_reward_" + os.path.splitext(os.path.basename(module_name))[0]
    loader = importlib.util.spec_from_file_location(name, module_name)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
  else:
    module = importlib.import_module(module_name)
  fn = getattr(module, fn_name, None)
  if not callable(fn):
    raise ValueError(f"config key reward.functions: {module_name} has no function {fn_name!r}")
  return fn


def short_name(spec: str) -> str:
  """The metric name of ``spec``: the built-in's name or the function's (``reward/<name>``)."""
  return spec.rpartition(":")[2] or spec


def _checked(name: str, out, n: int, columns: dict[str, list]) -> np.ndarray:
  """``out`` as float64 ``[n]`` with NaN for None; raises :class:`RewardError` otherwise."""
  if isinstance(out, np.ndarray):
    out = out.tolist()
  if not isinstance(out, Sequence) or isinstance(out, str):
    raise RewardError(f"reward function {name} returned {type(out).__name__}, not a list")
  if len(out) != n:
    raise RewardError(f"reward function {name} returned {len(out)} values for {n} completions")
  values = np.full(n, np.nan)
  for i, v in enumerate(out):
    if v is None:
      continue
    ok = isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
    if not ok:
      row = {k: c[i] for k, c in columns.items() if k in ("id", "index")}
      raise RewardError(f"reward function {name} returned {v!r} for row {i} {row}")
    values[i] = float(v)
  return values


@dataclasses.dataclass(frozen=True)
class RewardFunctions:
  """The configured functions and their weights (``reward.functions`` / ``reward.weights``)."""

  specs: tuple[str, ...]
  fns: tuple[Callable, ...]
  weights: tuple[float, ...]
  builtin_options: dict = dataclasses.field(default_factory=dict)  # timeout_s, num_workers

  @property
  def names(self) -> tuple[str, ...]:
    return tuple(short_name(s) for s in self.specs)

  @classmethod
  def load(cls, specs: Sequence[str], weights: Sequence[float] = (), **options):
    """``options`` (``timeout_s``, ``num_workers``) reach the built-ins only."""
    weights = tuple(weights) or (1.0,) * len(specs)
    if len(weights) != len(specs):
      raise ValueError(f"reward.weights has {len(weights)} entries for {len(specs)} functions")
    return cls(tuple(specs), tuple(load(s) for s in specs), weights, dict(options))

  def __call__(self, prompts, completions, columns: dict[str, list]):
    """``(rewards_N float32, metrics)``: the weighted sum; ``reward/<name>/{mean,std,min,max}``
    (over the rows it scored) and ``reward/<name>/scored_frac`` of each function, and
    ``reward/unscored_frac`` (rows no function scored, reward 0)."""
    n = len(completions)
    total_N, scored_N, metrics = np.zeros(n), np.zeros(n, bool), {}
    for name, spec, fn, w in zip(self.names, self.specs, self.fns, self.weights):
      kwargs = {**columns, **self.builtin_options} if spec in BUILTINS else columns
      try:
        out = fn(prompts=list(prompts), completions=list(completions), **kwargs)
      except Exception as e:
        raise RewardError(f"reward function {name} raised {type(e).__name__}: {e}") from e
      values = _checked(name, out, n, columns)
      has = ~np.isnan(values)
      total_N += np.where(has, w * values, 0.0)
      scored_N |= has
      metrics.update(describe(f"reward/{name}", values[has]))
      metrics[f"reward/{name}/scored_frac"] = float(np.mean(has)) if n else 0.0
    metrics["reward/unscored_frac"] = float(np.mean(~scored_N)) if n else 0.0
    return total_N.astype(np.float32), metrics


def describe(prefix: str, values) -> dict[str, float]:
  """``{prefix}/mean``, ``/std``, ``/min``, ``/max`` of ``values`` (NaN when empty)."""
  values = np.asarray(values, np.float64)
  if not values.size:
    return {f"{prefix}/{k}": math.nan for k in ("mean", "std", "min", "max")}
  return {
    f"{prefix}/mean": float(values.mean()),
    f"{prefix}/std": float(values.std()),
    f"{prefix}/min": float(values.min()),
    f"{prefix}/max": float(values.max()),
  }


__all__ = ["BUILTINS", "RewardError", "RewardFunctions", "check_name", "describe", "load"]
