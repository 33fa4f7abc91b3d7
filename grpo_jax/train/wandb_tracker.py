"""Weights & Biases beside metrics.jsonl and TensorBoard (``logging.wandb``, off by default):
step metrics, evaluation pass@k over steps, the resolved config and the sampled rollouts (a
``wandb.Table`` per step). Process 0 logs; a resumed run continues the same W&B run (its id
is kept in the run directory). W&B stages its files in a local folder: the run directory, or
for a ``gs://`` one, ``<tmp>/grpo_jax_wandb/<bucket path>``."""

from __future__ import annotations

import os
import uuid

from etils import epath

from grpo_jax.config.experiment import Experiment
from grpo_jax.rundir import names, paths, write
from grpo_jax.train.metrics import eval_scalars

# logging.wandb_mode: wandb.init's modes ('offline' writes under <workdir>/wandb, synced later
# with ``wandb sync``).
MODES = ("disabled", "offline", "online")
SAMPLE_COLUMNS = ("prompt", "completion", "answer", "reward", "accuracy", "group", "truncated")


def _run_id(workdir: epath.Path) -> str:
  path = workdir / names.WANDB_ID
  if path.exists():
    return path.read_text().strip()
  run_id = uuid.uuid4().hex[:12]
  write.text_file(path, run_id)
  return run_id


class WandbTracker:
  """One W&B run per run directory. ``module``: the ``wandb`` module (a stand-in in tests)."""

  def __init__(self, cfg: Experiment, workdir: paths.PathLike, module=None):
    if module is None:
      import wandb as module  # noqa: PLC0415 (optional: the 'wandb' extra)
    self._wandb = module
    workdir = epath.Path(workdir)
    local = str(workdir)
    if paths.is_uri(workdir):
      local = paths.local_staging(workdir, "wandb")
      os.makedirs(local, exist_ok=True)
    lg = cfg.logging
    self.run = module.init(
      project=lg.wandb_project,
      entity=lg.wandb_entity or None,
      mode=lg.wandb_mode,
      dir=local,
      id=_run_id(workdir),
      name=workdir.name,
      resume="allow",
      config=cfg.to_dict(),
    )

  def log(self, step: int, metrics: dict[str, float]) -> None:
    self.run.log(dict(metrics), step=step)

  def log_eval(self, step: int, results: dict) -> None:
    """``results``: ``{benchmark: summary}``; its finite numbers (pass@k, ...) as
    ``eval/<benchmark>/<key>``."""
    row = eval_scalars(results)
    if row:
      self.run.log(row, step=step)

  def log_samples(self, step: int, records: list[dict]) -> None:
    if records:
      data = [[r.get(c) for c in SAMPLE_COLUMNS] for r in records]
      table = self._wandb.Table(columns=list(SAMPLE_COLUMNS), data=data)
      self.run.log({"samples": table}, step=step)

  def close(self) -> None:
    self.run.finish()
