"""Figures of the study (grpo_jax/runs/study.py), drawn from its run directories' rows: the
paired differences of the primary comparisons, the training curves, and pass@1 by difficulty.
Each function draws on the axes it is given (or a new figure) and returns the figure."""

from __future__ import annotations

import math
import sys

import numpy as np

from grpo_jax.runs import study

# Training curves of the design: (metric, title). A config may name its own (its ``CURVES``).
CURVES = (
  ("reward/mean", "training reward"),
  ("loss/entropy", "entropy"),
  ("adv/offset_abs_mean", "|offset| (mean over rows)"),
  ("hadw/phi_mean", "HA-DW Φ (mean)"),
  ("hadw/anchor", "HA-DW anchor (solid) vs batch accuracy (dashed)"),
)


def _plt():
  """pyplot; Agg when pyplot is not imported yet (a script), else the backend in use (a
  notebook's inline one: ``matplotlib.use`` would switch it and its figures would not show)."""
  if "matplotlib.pyplot" not in sys.modules:
    import matplotlib  # noqa: PLC0415 (figures only)

    matplotlib.use("Agg", force=False)
  import matplotlib.pyplot as plt  # noqa: PLC0415

  return plt


def forest(tests: list[dict], ax=None):
  """One row per primary comparison: Δ and its 95% t interval, Holm p in the label."""
  plt = _plt()
  size = (10, 0.5 * len(tests) + 1.2)
  fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=size)
  for i, t in enumerate(reversed(tests)):
    ok = math.isfinite(t["lo"])
    err = [[t["mean"] - t["lo"]], [t["hi"] - t["mean"]]] if ok else None
    ax.errorbar(t["mean"], i, xerr=err, fmt="o", color="C0" if t["sign"] > 0 else "C3", capsize=3)
  labels = [
    f"{t['id']}: {t['a']} − {t['b']} ({t['metric'].split('/')[-1]}; Holm p {t['p_holm']:.2f})"
    for t in reversed(tests)
  ]
  ax.set_yticks(range(len(tests)), labels)
  ax.axvline(0, color="k", lw=0.8)
  ax.set_xlabel("paired Δ over seeds [95% t]; blue: predicted > 0, red: predicted < 0")
  fig.tight_layout()
  return fig


def _smooth(x, window: int):
  """Trailing moving average (the first points average what there is)."""
  x = np.asarray(x, np.float64)
  c = np.cumsum(np.insert(x, 0, 0.0))
  n = np.minimum(np.arange(1, len(x) + 1), window)
  return (c[1:] - c[np.arange(1, len(x) + 1) - n]) / n


# A panel's metric → the one drawn dashed beside it, in the same colour.
DASHED = {
  "hadw/anchor": "hadw/batch_acc",
  "strategy/between_share": "strategy/between_share_null",
}


def curve_metrics(panels=CURVES) -> tuple[str, ...]:
  """The training metrics ``panels`` draw: each panel's, and its :data:`DASHED` companion."""
  return tuple(m for metric, _ in panels for m in (metric, DASHED.get(metric)) if m)


def training_curves(
  rows: list[dict], conditions=None, axes=None, smooth: int = 5, record=None, panels=CURVES
):
  """Mean over seeds (line) and 95% t band per condition, one panel per (metric, title) of
  ``panels``, its :data:`DASHED` companion dashed; each series a trailing moving average over
  ``smooth`` steps. ``record``: the series as :func:`grpo_jax.runs.study.curve_record` gives
  them (by default from the rows)."""
  record = record or study.curve_record(rows, curve_metrics(panels))
  plt = _plt()
  if axes is None:
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4))
  fig = np.ravel(axes)[0].figure
  conditions = conditions or list(dict.fromkeys(r["condition"] for r in rows))
  for ax, (metric, title) in zip(np.ravel(axes), panels, strict=True):
    data = record[metric]
    acc = record.get(DASHED.get(metric), {})
    for i, cond in enumerate(conditions):
      c = data.get(cond)
      if c is None or not len(c["step"]) or not np.any(np.asarray(c["mean"]) != 0):
        continue  # a metric the condition does not use (an offset of one-stage GRPO)
      sm = lambda x: _smooth(x, smooth)
      ax.plot(c["step"], sm(c["mean"]), color=f"C{i}", label=cond)
      ax.fill_between(c["step"], sm(c["lo"]), sm(c["hi"]), color=f"C{i}", alpha=0.15, lw=0)
      if cond in acc:
        ax.plot(acc[cond]["step"], sm(acc[cond]["mean"]), color=f"C{i}", ls="--")
    ax.set_title(f"{title}, {smooth}-step average" if smooth > 1 else title, fontsize=9)
    ax.set_xlabel("RL step")
  np.ravel(axes)[0].legend(fontsize=7)
  fig.tight_layout()
  return fig


def strata_bars(strata: list[dict], conditions=None, ax=None):
  """After-RL pass@1 per difficulty stratum (mean over seeds, 95% t interval) per condition."""
  from grpo_jax.runs import aggregate  # noqa: PLC0415

  plt = _plt()
  fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(8, 3.4))
  conditions = conditions or list(dict.fromkeys(r["condition"] for r in strata))
  width = 0.8 / max(1, len(conditions))
  for i, cond in enumerate(conditions):
    stats = [
      aggregate.t_interval(
        [r["after"] for r in strata if r["condition"] == cond and r["stratum"] == s]
      )
      for s in study.STRATA
    ]
    mean = np.array([m for m, _, _ in stats])
    err = np.array([[m - lo, hi - m] for m, lo, hi in stats]).T
    x = np.arange(len(study.STRATA)) + (i - (len(conditions) - 1) / 2) * width
    ax.bar(x, mean, width, yerr=np.nan_to_num(err), capsize=2, label=cond, color=f"C{i}")
  ax.set_xticks(range(len(study.STRATA)), [f"{s} before RL" for s in study.STRATA])
  ax.set_ylabel("held-out pass@1 after RL")
  ax.legend(fontsize=7)
  fig.tight_layout()
  return fig


__all__ = ["CURVES", "DASHED", "curve_metrics", "forest", "strata_bars", "training_curves"]
