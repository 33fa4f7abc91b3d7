"""A made-up study folder with the files the runner writes, for the report and notebook tests:
``make(root, seeds, effect)`` writes one run directory per (condition of configs/study.py,
seed) with ``sweep_run.json``, ``config.json``, ``metrics.jsonl``, ``results.json`` and the
per-problem evaluation files, where ``better`` (α = −0.5) beats the others' pass@k by ``effect``
on every seed (plus seed-level noise shared by all conditions) and every other condition ties.
``config``: another study config with its own CONDITIONS (the real-model arm's); ``recorded``:
the runs as recorded before advantage.offset_control replaced three boolean keys."""

from __future__ import annotations

import json
import pathlib

import numpy as np

from grpo_jax.config import files as config_file
from grpo_jax.runs import sweep

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROBLEMS, SAMPLES, STEPS = 40, 8, 6


def conditions(config: str = "configs/study.py") -> dict[str, dict]:
  return config_file.load_module(str(ROOT / config)).CONDITIONS


def added_keys(config: str = "configs/study.py") -> dict:
  """The config's ADDED_KEYS (keys its earlier runs lack), {} if it has none."""
  return getattr(config_file.load_module(str(ROOT / config)), "ADDED_KEYS", {})


def run_overrides(config: str, condition: dict) -> dict:
  """A condition's overrides as the config's sweep sets them (``run_overrides``, else all)."""
  module = config_file.load_module(str(ROOT / config))
  return getattr(module, "run_overrides", dict)(condition)


def as_recorded(overrides: dict) -> dict:
  """``overrides`` as configs/study.py's runs recorded them before advantage.offset_control
  replaced three booleans: offset_shuffle and offset_noise on every run, the magnitude scramble
  (added after the first 112 runs) on its own runs only."""
  out = {}
  for key, value in overrides.items():
    if key != "advantage.offset_control":
      out[key] = value
      continue
    out["advantage.offset_shuffle"] = value == "shuffle"
    out["advantage.offset_noise"] = value == "noise"
    if value == "magnitude_scramble":
      out["advantage.offset_magnitude_scramble"] = True
  return out


def _problems(path: pathlib.Path, correct_PxN: np.ndarray) -> None:
  lines = [json.dumps({"correct": [bool(x) for x in row]}) for row in correct_PxN]
  path.write_text("\n".join(lines) + "\n")


def make(
  root,
  seeds=(0, 1, 2, 3),
  effect=0.05,
  config="configs/study.py",
  better="alpha=-0.5",
  k=8,
  recorded=False,
) -> pathlib.Path:
  """``recorded``: the runs' names and ``sweep_run.json`` in the keys they held before
  advantage.offset_control (:func:`as_recorded`)."""
  root = pathlib.Path(root)
  for seed in seeds:
    rng = np.random.default_rng(seed)
    level = rng.uniform(0.5, 0.7)  # the seed's own pass@8 level, shared by its conditions
    p_P = rng.uniform(0, 0.6, PROBLEMS)
    before_PxN = rng.random((PROBLEMS, SAMPLES)) < p_P[:, None]
    for name, condition in conditions(config).items():
      overrides = run_overrides(config, condition)  # as the sweep names and records the run
      overrides = as_recorded(overrides) if recorded else overrides
      run = root / sweep.run_name({"seed": seed, **overrides})
      (run / "eval").mkdir(parents=True)
      info = {"name": run.name, "overrides": {"seed": seed, **overrides}}
      (run / "sweep_run.json").write_text(json.dumps(info))
      (run / "config.json").write_text("{}")
      noise = rng.normal(0, 0.002)
      # a partition that separates the rewards (η² above its null) in the "file/" conditions
      share = 0.2 + rng.normal(0, 0.01) + (0.3 if name.startswith("file/") else 0.0)
      after_k = level + (effect if name == better else 0.0) + noise
      metrics = [
        {"step": s + 1, "reward/mean": 0.2 + 0.01 * s, "loss/entropy": 0.4, "hadw/batch_acc": 0.3}
        | {"adv/offset_abs_mean": 0.1 * (name not in ("grpo", "grpo+hadw"))}
        | {"hadw/phi_mean": 1.2 * (name == "grpo+hadw"), "hadw/anchor": 0.25}
        | {"strategy/between_share": share, "strategy/between_share_null": 0.2}
        for s in range(STEPS)
      ]
      (run / "metrics.jsonl").write_text("\n".join(json.dumps(m) for m in metrics) + "\n")
      after_PxN = rng.random((PROBLEMS, SAMPLES)) < np.minimum(p_P + 0.1, 1)[:, None]
      results = {
        "before": {"pass@1": float(before_PxN.mean()), f"pass@{k}": level - 0.1},
        "after": {"pass@1": float(after_PxN.mean()), f"pass@{k}": after_k},
      }
      (run / "results.json").write_text(json.dumps(results))
      _problems(run / "eval" / "countdown_step0_problems.jsonl", before_PxN)
      _problems(run / "eval" / f"countdown_step{STEPS}_problems.jsonl", after_PxN)
  return root
