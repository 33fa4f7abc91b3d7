"""Value checks run when a config is loaded (``config.finalize``), before any model is built.

Every key whose value is one of a few names is checked against the table of the module that
reads it, and the error names the key and the valid choices. Cross-key rules that would
otherwise fail minutes into a run (a warm start on a set without reference solutions) are
checked here too.
"""

from __future__ import annotations

import os


def _choices() -> dict[str, tuple[str, ...]]:
  from grpo_jax.advantages.baselines import BASELINES
  from grpo_jax.advantages.hadw import ANCHORS, SIGMA_OF
  from grpo_jax.advantages.normalize import SCALE_OF, SCALES
  from grpo_jax.advantages.shuffle import SCOPES
  from grpo_jax.data.math.templates import TEMPLATES
  from grpo_jax.data.registry import TASKS
  from grpo_jax.losses.aggregation import AGGREGATIONS
  from grpo_jax.losses.kl import KL_ESTIMATORS
  from grpo_jax.losses.policy import LOSS_KINDS

  return {
    "data.task": tuple(TASKS),
    "data.template": tuple(TEMPLATES),
    "strategy.source": ("presampled", "online"),
    "advantage.baseline": tuple(BASELINES),
    "advantage.scale": tuple(SCALES),
    "advantage.scale_of": SCALE_OF,
    "advantage.offset_shuffle_scope": SCOPES,
    "hadw.anchor": ANCHORS,
    "hadw.sigma_of": SIGMA_OF,
    "loss.kind": tuple(LOSS_KINDS),
    "loss.aggregation": tuple(AGGREGATIONS),
    "loss.kl_estimator": tuple(KL_ESTIMATORS),
    "model.remat": ("none", "full", "dots"),
  }


def _get(cfg, key: str):
  node = cfg
  for part in key.split("."):
    node = node[part]
  return node


def check_values(cfg) -> None:
  """Raises ValueError naming the first bad key and its valid choices."""
  for key, valid in _choices().items():
    value = _get(cfg, key)
    if value not in valid:
      raise ValueError(f"config key {key} = {value!r} is not one of {sorted(valid)}")
  d = cfg.data
  if d.chat_template not in ("auto", "none") and not os.path.isfile(d.chat_template):
    raise ValueError(
      f"config key data.chat_template = {d.chat_template!r} is neither 'auto', 'none' nor an "
      "existing template file"
    )
  if d.task == "math" and cfg.warmstart.enabled and not d.train_path:
    from grpo_jax.data.math import TRAIN_SETS, has_solutions

    if not has_solutions(d.train_set):
      with_solutions = sorted(n for n in TRAIN_SETS if has_solutions(n))
      raise ValueError(
        f"warmstart.enabled needs reference solutions, and data.train_set = {d.train_set!r} "
        f"has none; sets with solutions: {with_solutions} (or warmstart.enabled = False)"
      )
  from grpo_jax import strategy

  strategy.check_config(cfg)  # METHODS §5: K against G, source, delimiter, preview length


__all__ = ["check_values"]
