"""Run-directory metrics: one JSON line per step (slash-named keys) plus TensorBoard events, and
a few sampled rollouts per step (``samples.jsonl``, TensorBoard text)."""

from __future__ import annotations

import math

import jax
import numpy as np
from etils import epath

from grpo_jax.rundir import names, paths, write
from grpo_jax.train import tb_events


def to_host(metrics: dict) -> dict[str, float]:
  """Device scalars -> Python floats (one transfer for the whole dict)."""
  host = jax.device_get(metrics)
  return {k: float(np.asarray(v)) for k, v in host.items()}


def check_finite(step: int, metrics: dict[str, float], keys=("loss/total", "grad/norm")) -> None:
  """Stops the run, naming the step, when a loss or gradient is NaN/Inf."""
  bad = {k: metrics[k] for k in keys if k in metrics and not math.isfinite(metrics[k])}
  if bad:
    raise FloatingPointError(
      f"non-finite values at step {step}: {bad}; no checkpoint was written from this step"
    )


def eval_scalars(results: dict) -> dict[str, float]:
  """``{benchmark: summary}`` of an evaluation as ``eval/<benchmark>/<key>`` scalars: every
  finite number of each summary (pass@k, maj@k, lengths, truncation, the problem count)."""
  return {
    f"eval/{name}/{k}": float(v)
    for name, summary in results.items()
    for k, v in summary.items()
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
  }


class MetricsWriter:
  """Appends ``{"step": s, **metrics}`` lines to ``metrics.jsonl`` and mirrors to TensorBoard."""

  def __init__(
    self,
    workdir: paths.PathLike,
    tensorboard: bool = True,
    enabled: bool = True,
    resume_step: int | None = None,
    tracker=None,
  ):
    """``resume_step``: the restored checkpoint's step; lines and TensorBoard events of later
    steps are dropped (the resumed run redoes them). ``tracker``: also logs each step's metrics
    and samples (``grpo_jax.train.wandb_tracker.WandbTracker``; its owner closes it)."""
    self.tracker = tracker if enabled else None
    self.path = epath.Path(workdir) / names.METRICS
    self.samples_path = epath.Path(workdir) / names.SAMPLES
    self.tb_dir = epath.Path(workdir) / names.TENSORBOARD
    self.enabled = enabled
    self._tb = None
    if enabled and resume_step is not None:
      self.truncate_after(resume_step)
    if enabled and tensorboard:
      SummaryWriter = tb_events.tensorboardx().SummaryWriter

      # purge_step: TensorBoard itself also hides earlier files' events from this step on.
      purge = None if resume_step is None else resume_step + 1
      # The suffix names the first step: a file is never reopened (tensorboardX names files by
      # the second and host, which a run and its resume could share).
      suffix = f".from{0 if resume_step is None else resume_step}"
      self._tb = SummaryWriter(str(self.tb_dir), purge_step=purge, filename_suffix=suffix)

  def truncate_after(self, step: int) -> None:
    """On resume, drops lines and TensorBoard events of steps after the restored checkpoint
    (they will be redone)."""
    if self.enabled:
      tb_events.truncate_after(self.tb_dir, step)
      for path in (self.path, self.samples_path):
        write.keep_steps_through(path, step)

  def write(self, step: int, metrics: dict[str, float]) -> None:
    if not self.enabled:
      return
    write.step_lines(self.path, step, [metrics])
    if self._tb is not None:
      for k, v in metrics.items():
        self._tb.add_scalar(k, v, step)
    if self.tracker is not None:
      self.tracker.log(step, metrics)

  def write_samples(self, step: int, records: list[dict]) -> None:
    """One JSON line per sampled rollout, and the step's records as TensorBoard text."""
    if not (self.enabled and records):
      return
    write.step_lines(self.samples_path, step, records)
    if self._tb is not None:
      from grpo_jax.train.samples import as_markdown

      self._tb.add_text("samples", as_markdown(records), step)
    if self.tracker is not None:
      self.tracker.log_samples(step, records)

  def write_eval(self, step: int, results: dict) -> None:
    """``{benchmark: summary}`` of an evaluation at ``step`` (pass@k over steps) as TensorBoard
    scalars (:func:`eval_scalars`) and to the tracker; the files under eval/ are written by the
    evaluation itself."""
    if self._tb is not None:
      for k, v in eval_scalars(results).items():
        self._tb.add_scalar(k, v, step)
    if self.tracker is not None:
      self.tracker.log_eval(step, results)

  def close(self) -> None:
    if self._tb is not None:
      self._tb.close()
