"""The one batch a rollout hands the update: shape-named host arrays, checked, plus texts and
rollout metrics as fields beside them.

N rows, L = P + T token slots (P prompt slots, left-padded; T response slots, right-padded).
Every rollout kind (``grpo_jax.rollout.registry.ROLLOUTS``) returns a :class:`RolloutBatch`;
DAPO's shaping (``grpo_jax.rollout.dynamic_sampling``) returns another one;
:class:`UpdateBatch` (:meth:`RolloutBatch.device_batch`) is what the jitted update
(``grpo_jax.train.update``) reads.
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
from flax import struct

from grpo_jax import sharding as shard_lib
from grpo_jax.models.packing import Packed

# Per-row arrays and their dtypes, in the order of the dataclass fields.
ARRAYS = {
  "tokens_NxL": np.int32,
  "input_mask_NxL": np.int32,  # 1 = real token
  "completion_mask_NxT": np.int32,  # 1 = a token the loss sees (completion up to its stop)
  "sample_logps_NxT": np.float32,  # the sampler's log-probs, aligned with the response
  "rewards_N": np.float32,  # the rewards the advantages read (shaped by DAPO, if at all)
  "group_ids_N": np.int32,  # prompt instance in the step, −1 = padding row
  "subgroup_ids_N": np.int32,  # strategy subgroup (= group without strategy), −1 = padding
  "truncated_N": np.bool_,  # the sampler's: no stop token within the window
  "lengths_N": np.int32,  # completion tokens (a strategy preview never counts)
  "accuracy_N": np.float32,  # raw verifier accuracy, before shaping (HA-DW's p̂_g)
  "loss_mask_N": np.int32,  # 0 = in the group's baseline, out of the loss (overlong filter)
}


@struct.dataclass
class UpdateBatch:
  """What the jitted update reads (``grpo_jax.train.update``): N-row arrays, host-side from
  :meth:`RolloutBatch.device_batch` or global device arrays from :meth:`RolloutBatch.to_device`
  (a pytree: one batch sharding splits every field's rows)."""

  tokens_NxL: jax.Array
  input_mask_NxL: jax.Array
  completion_mask_NxT: jax.Array
  sample_logps_NxT: jax.Array
  rewards_N: jax.Array
  accuracy_N: jax.Array
  group_ids_N: jax.Array
  subgroup_ids_N: jax.Array
  loss_mask_N: jax.Array
  step_accuracy_N: jax.Array  # HA-DW's y_t on every row (RolloutBatch.device_batch)
  # With loss.pack: the rows' real tokens in packed rows (grpo_jax.train.packing), whose
  # forward passes replace the padded rows'; its rows split over the devices like N's.
  packed: Packed | None = None


DEVICE_KEYS = tuple(f.name for f in dataclasses.fields(UpdateBatch))


@dataclasses.dataclass
class RolloutBatch:
  """One step's rows. ``accuracy_N`` defaults to ``rewards_N`` (no shaping), ``loss_mask_N``
  to ones, ``step_accuracy`` (HA-DW's y_t, METHODS §3) to the mean accuracy of these rows."""

  tokens_NxL: np.ndarray
  input_mask_NxL: np.ndarray
  completion_mask_NxT: np.ndarray
  sample_logps_NxT: np.ndarray
  rewards_N: np.ndarray
  group_ids_N: np.ndarray
  subgroup_ids_N: np.ndarray
  truncated_N: np.ndarray
  lengths_N: np.ndarray
  accuracy_N: np.ndarray | None = None
  loss_mask_N: np.ndarray | None = None
  step_accuracy: float | None = None
  completions_N: list = dataclasses.field(default_factory=list)  # texts ('' on padding)
  problems_N: list = dataclasses.field(default_factory=list)  # problems (None on padding)
  metrics: dict = dataclasses.field(default_factory=dict)  # flat slash-namespaced floats

  def __post_init__(self):
    if self.accuracy_N is None:
      self.accuracy_N = self.rewards_N
    if self.loss_mask_N is None:
      self.loss_mask_N = np.ones(len(self.rewards_N), np.int32)
    for key, dtype in ARRAYS.items():
      setattr(self, key, np.asarray(getattr(self, key), dtype))
    if self.step_accuracy is None:
      self.step_accuracy = float(np.float32(np.mean(self.accuracy_N)))
    self.validate()

  @property
  def num_rows(self) -> int:
    return len(self.rewards_N)

  def validate(self, num_ids: int | None = None) -> None:
    """Raises ValueError unless shapes agree and ids are in [0, num_ids) or −1 (padding).
    ``num_ids``: the job's row count, default N × processes (each process holds an equal
    share of the rows and carries job-wide ids, ``multihost.offset_ids``)."""
    N, (_, L) = self.num_rows, self.tokens_NxL.shape
    T = self.completion_mask_NxT.shape[1]
    want = {"tokens_NxL": (N, L), "input_mask_NxL": (N, L)}
    want.update({"completion_mask_NxT": (N, T), "sample_logps_NxT": (N, T)})
    want.update({k: (N,) for k in ARRAYS if k.endswith("_N")})
    for key, shape in want.items():
      if getattr(self, key).shape != shape:
        raise ValueError(f"RolloutBatch.{key} has shape {getattr(self, key).shape}, not {shape}")
    if T > L:
      raise ValueError(f"RolloutBatch: T = {T} response slots exceed L = {L} token slots")
    num_ids = N * jax.process_count() if num_ids is None else num_ids
    for key in ("group_ids_N", "subgroup_ids_N"):
      ids = getattr(self, key)
      if np.any((ids < -1) | (ids >= num_ids)):
        raise ValueError(f"RolloutBatch.{key} must lie in [0, {num_ids}) or be -1 (padding)")
    for key in ("completions_N", "problems_N"):
      if getattr(self, key) and len(getattr(self, key)) != N:
        raise ValueError(f"RolloutBatch.{key} has {len(getattr(self, key))} entries, not {N}")

  def replace(self, **changes) -> RolloutBatch:
    return dataclasses.replace(self, **changes)

  def arrays(self) -> dict[str, np.ndarray]:
    """The per-row arrays by name."""
    return {k: getattr(self, k) for k in ARRAYS}

  def take(self, rows_N, real_N) -> RolloutBatch:
    """Rows ``rows_N`` of this batch; where ``real_N`` is False the row is padding: ids −1,
    masks, rewards and accuracy 0, no texts. Keeps ``step_accuracy`` and ``metrics``."""
    arrays = {k: v[rows_N] for k, v in self.arrays().items()}
    for key in ("group_ids_N", "subgroup_ids_N"):
      arrays[key] = np.where(real_N, arrays[key], -1)
    arrays["completion_mask_NxT"] = np.where(real_N[:, None], arrays["completion_mask_NxT"], 0)
    for key in ("loss_mask_N", "rewards_N", "accuracy_N"):
      arrays[key] = np.where(real_N, arrays[key], 0)
    arrays["truncated_N"] = real_N & arrays["truncated_N"]
    texts = lambda xs, blank: [xs[i] if r else blank for i, r in zip(rows_N, real_N)] if xs else []
    return self.replace(
      **arrays,
      completions_N=texts(self.completions_N, ""),
      problems_N=texts(self.problems_N, None),
    )

  def device_batch(self) -> UpdateBatch:
    """The arrays the jitted update reads, host-side, every one with N rows so one batch
    sharding splits them all. ``step_accuracy_N`` carries the scalar y_t on every
    row: the update averages it over the rows, the rounding HA-DW runs have always had (a
    replicated 0-d argument rounds y_t differently in the last place, which changes a run)."""
    step_accuracy_N = np.full(self.num_rows, self.step_accuracy, np.float32)
    arrays = {k: getattr(self, k) for k in DEVICE_KEYS if k in ARRAYS}
    return UpdateBatch(**arrays, step_accuracy_N=step_accuracy_N)

  def to_device(self, mesh) -> UpdateBatch:
    """:meth:`device_batch` as global arrays on ``mesh``, rows split over the batch axes."""
    return shard_lib.shard_batch(self.device_batch(), mesh)


def concat_rows(batches: list[RolloutBatch], key: str) -> np.ndarray:
  """``key`` of every batch, rows concatenated."""
  return np.concatenate([getattr(b, key) for b in batches])


__all__ = ["ARRAYS", "DEVICE_KEYS", "RolloutBatch", "UpdateBatch", "concat_rows"]
