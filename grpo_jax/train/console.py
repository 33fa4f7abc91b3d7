"""Console output of a run: progress bars and log lines, from process 0 only, so a multi-host
job shows one bar and prints each line once (``grpo_jax.sharding.distributed.is_primary``).

The layers below take a plain ``progress`` flag (``EvalLoop``, ``PresamplePlan``) and a ``log``
callable; the train layer resolves both here.
"""

from __future__ import annotations

from tqdm.auto import tqdm

from grpo_jax.sharding import distributed


def shows_progress(enabled: bool) -> bool:
  """Whether this process draws progress bars: ``enabled`` by config, and process 0."""
  return bool(enabled) and distributed.is_primary()


def progress_bar(iterable, enabled: bool = True, **kwargs) -> tqdm:
  """A tqdm bar over ``iterable`` (``kwargs`` to tqdm), drawn when ``enabled`` and on process 0
  only."""
  return tqdm(iterable, disable=not shows_progress(enabled), **kwargs)


def primary_log(log):
  """``log`` on process 0 and a no-op on the others."""
  return log if distributed.is_primary() else (lambda *args, **kwargs: None)


__all__ = ["primary_log", "progress_bar", "shows_progress"]
