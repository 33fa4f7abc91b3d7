"""What a task's ``rewards`` call returns: the rewards and that call's own scalars together.

The rollout thread (``rollout.off_policy_steps = 1``) grades the next batch while evaluation
grades on the main thread; each caller logs the metrics its own call returned, so a step never
reports another call's counters (a task keeps no per-call state).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Graded(NamedTuple):
  """float32 ``rewards_N`` (``rewards_N[i]`` grades completion i) and ``metrics``, the call's
  flat scalars (``reward/<fn>/*``, the math grader's counters; empty when there are none)."""

  rewards_N: np.ndarray
  metrics: dict[str, float]


__all__ = ["Graded"]
