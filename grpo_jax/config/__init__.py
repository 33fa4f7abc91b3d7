"""Experiment configs: the base config (every key and its default), loading experiment files
with command-line overrides, the value checks run at load, and the loss recipes.

``base``: :func:`base_config`, key checks and :func:`finalize`; ``files``: ``configs/*.py``
loading (``load``) and the content hash; ``checks``: value and cross-key checks; ``recipes``:
the papers' loss and optimizer settings.
"""

from grpo_jax.config.base import (
  base_config,
  check_keys,
  defaults,
  finalize,
  nearest_key,
  override,
  to_dict,
)

__all__ = [
  "base_config",
  "check_keys",
  "defaults",
  "finalize",
  "nearest_key",
  "override",
  "to_dict",
]
