"""Plots written into a run directory (matplotlib, no display needed)."""

from __future__ import annotations

import io

import numpy as np
from etils import epath

from grpo_jax.rundir import names, paths, read


def reward_curve(workdir: paths.PathLike, window: int = 5) -> epath.Path | None:
  """``plots/reward_curve.png``: mean training reward per step and its running mean."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  rows = read.metrics(workdir)
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
  out = epath.Path(workdir) / names.PLOTS / names.REWARD_CURVE
  out.parent.mkdir(parents=True, exist_ok=True)
  fig.tight_layout()
  png = io.BytesIO()
  fig.savefig(png, format="png", dpi=120)
  plt.close(fig)
  paths.write_bytes(out, png.getvalue())
  return out
