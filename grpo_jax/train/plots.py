"""Plots written into a run directory (matplotlib, no display needed)."""

from __future__ import annotations

import pathlib

import numpy as np

from grpo_jax.train.metrics import read_metrics


def reward_curve(workdir: str | pathlib.Path, window: int = 5) -> pathlib.Path | None:
  """``plots/reward_curve.png``: mean training reward per step and its running mean."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  rows = read_metrics(workdir)
  if not rows:
    return None
  steps = np.array([r["step"] for r in rows])
  reward = np.array([r["reward/mean"] for r in rows])
  kernel = np.ones(min(window, len(reward))) / min(window, len(reward))
  smooth = np.convolve(reward, kernel, mode="valid")
  fig, ax = plt.subplots(figsize=(6, 3.5))
  ax.plot(steps, reward, alpha=0.4, label="reward/mean")
  ax.plot(steps[len(steps) - len(smooth) :], smooth, label=f"running mean ({len(kernel)})")
  ax.set_xlabel("RL step")
  ax.set_ylabel("mean reward")
  ax.grid(alpha=0.3)
  ax.legend()
  out = pathlib.Path(workdir) / "plots" / "reward_curve.png"
  out.parent.mkdir(parents=True, exist_ok=True)
  fig.tight_layout()
  fig.savefig(out, dpi=120)
  plt.close(fig)
  return out
