"""``loss.pack``: the update's forward passes over the batch's real tokens packed into rows
(``grpo_jax.models.packing``), not over the padded rows.

The update splits its N rows into minibatches, micro-batches and device blocks
(``grpo_jax.train.microbatch``); every part it forms is a set of whole aligned runs of c rows,
c = :func:`cell_size`. Packing each such cell on its own into the same number R_c of packed
rows makes every split of the rows the same split of the packed rows, so each part's forward
pass reads only its own rows' tokens and the loss, its metrics and its gradients equal the
padded update's (up to float rounding: the sums run in another order). The per-token arrays the
loss reads stay N × T; only the decoder's input is packed.

R_c is the most packed rows any cell needs (of every process's rows), rounded up to a multiple
of ceil(c / 8): at most 8 shapes per row width, each one compilation of the update.
"""

from __future__ import annotations

import math

import numpy as np

from grpo_jax.config.fields import ConfigError, as_int
from grpo_jax.models import pack_plan
from grpo_jax.rollout.batch import UpdateBatch
from grpo_jax.sharding import distributed
from grpo_jax.train.microbatch import num_parts, row_blocks

ROW_STEPS = 8  # R_c is a multiple of ceil(c / ROW_STEPS)


def cell_size(num_rows: int, loss, devices: int) -> int:
  """c: the largest run of consecutive rows that no split of the update cuts (the gcd of the
  sub-block sizes of the whole-batch passes, of each minibatch's micro-batches, of a
  minibatch and of a device's rows). ``loss``: the config's loss group."""
  micro, minibatches = as_int(loss.micro_batch_size), loss.num_minibatches
  k = num_parts(num_rows, micro, "loss.micro_batch_size")
  sizes = [num_rows // (row_blocks(num_rows, k, devices) * k), num_rows // minibatches]
  rows = num_rows // minibatches
  k = num_parts(rows, micro, "loss.micro_batch_size")
  sizes.append(rows // (row_blocks(rows, k, devices) * k))
  if devices > 1:
    sizes.append(num_rows // devices)
  return math.gcd(*sizes)


def cell_rows(needed: int, cell: int) -> int:
  """R_c: ``needed`` rounded up to a multiple of ceil(cell / ROW_STEPS)."""
  step = -(-cell // ROW_STEPS)
  return step * -(-max(needed, 1) // step)


def check_width(pack_width: int, prompt_len: int, response_len: int) -> None:
  """``loss.pack_width`` (0: the row width) holds the longest row a rollout can give: its
  ``prompt_len`` P slots (a two-stage preview template included) and ``response_len`` T slots
  (``sampling.max_new_tokens``, after the preview in two-stage runs). Checked once the data is
  read (P is the task's), before any model is built: a narrower width would stop the run at
  its first long completion."""
  longest = prompt_len + response_len
  if 0 < pack_width < longest:
    raise ConfigError(
      f"config key loss.pack_width = {pack_width} is below the longest row a rollout can give, "
      f"{longest} tokens (prompt {prompt_len} + response {response_len}: "
      f"sampling.max_new_tokens, after the preview in two-stage runs); set it to {longest} or "
      "more, or 0 (the row width)"
    )


class Packer:
  """``pack(batch) -> (batch with .packed, metrics)`` for a host ``UpdateBatch`` of this
  process's rows. ``loss``: the loss group (``pack_width``, ``share_prompt`` and the splits);
  ``group_size`` G; ``devices``: data-parallel devices over all processes."""

  def __init__(self, loss, group_size: int, devices: int, processes: int = 1):
    self.loss, self.group_size = loss, group_size
    self.devices, self.processes = devices, processes

  def __call__(self, batch: UpdateBatch) -> tuple[UpdateBatch, dict]:
    tokens_NxL = np.asarray(batch.tokens_NxL)
    N, L = tokens_NxL.shape
    P = L - np.asarray(batch.completion_mask_NxT).shape[1]
    # Each process holds whole cells: c divides the rows of a device, and a process holds
    # whole devices' rows.
    cell = cell_size(N * self.processes, self.loss, self.devices)
    share = math.gcd(self.group_size, cell) if self.loss.share_prompt else 1
    width = self.loss.pack_width or L
    plan = pack_plan.plan(np.asarray(batch.input_mask_NxL), P, cell, share, width)
    rows_c = cell_rows(distributed.global_max(plan.rows_needed), cell)
    packed = plan.arrays(tokens_NxL, rows_c)
    R = packed.tokens_RxW.shape[0]
    metrics = {
      "pack/rows": float(R * self.processes),
      "pack/width": float(width),
      "pack/fill": plan.real_tokens() / (R * width),
      "pack/padded_fill": float(np.sum(batch.input_mask_NxL)) / (N * L),
    }
    return batch.replace(packed=packed), metrics


__all__ = ["Packer", "cell_rows", "cell_size", "check_width"]
