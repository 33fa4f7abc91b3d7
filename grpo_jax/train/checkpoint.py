"""Orbax checkpoints of the whole train state (params, optimizer, anchor, step, RNG, cursor):
one item per set ``TrainState`` field, by name."""

from __future__ import annotations

import jax
import orbax.checkpoint as ocp

from grpo_jax.rundir import paths
from grpo_jax.train.state import TrainState


class Checkpointer:
  """Saves every ``every`` steps, keeps the last ``keep``; restores into given shardings."""

  def __init__(self, directory: paths.PathLike, every: int, keep: int):
    self.every = every
    options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True)
    self._mgr = ocp.CheckpointManager(paths.absolute(directory), options=options)

  def latest_step(self) -> int | None:
    return self._mgr.latest_step()

  def due(self, step: int, last: bool = False) -> bool:
    return (self.every > 0 and step % self.every == 0) or last

  def save(self, step: int, state: TrainState) -> None:
    self._mgr.save(step, args=ocp.args.StandardSave(state.to_dict()))

  def restore(self, abstract_state: TrainState, step: int | None = None) -> TrainState:
    """``abstract_state``: a ``TrainState`` of ``jax.ShapeDtypeStruct`` carrying the target
    shardings (:func:`abstract_like`)."""
    step = self.latest_step() if step is None else step
    target = ocp.args.StandardRestore(abstract_state.to_dict())
    return TrainState.from_dict(self._mgr.restore(step, args=target))

  def reached_preemption(self, step: int) -> bool:
    """Orbax's preemption sync point (multi-host ``jax.distributed``): True on every process at
    the same step after a preemption notice; False where the service is not running."""
    return self._mgr.reached_preemption(step)

  def wait(self) -> None:
    self._mgr.wait_until_finished()

  def close(self) -> None:
    self._mgr.wait_until_finished()
    self._mgr.close()


def abstract_like(state, shardings):
  """ShapeDtypeStructs with shardings, the restore target for :meth:`Checkpointer.restore`."""
  return jax.tree.map(
    lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), state, shardings
  )


def save_tree(path: paths.PathLike, tree) -> None:
  """One pytree written once (orbax, every process its shards), e.g. LoRA's warm-started base."""
  checkpointer = ocp.StandardCheckpointer()
  checkpointer.save(paths.absolute(path), tree)
  checkpointer.wait_until_finished()


def restore_tree(path: paths.PathLike, abstract_tree):
  """:func:`save_tree`'s tree, restored into ``abstract_tree``'s shapes and shardings."""
  return ocp.StandardCheckpointer().restore(paths.absolute(path), abstract_tree)
