"""Host-side bookkeeping of strategy-conditioned sampling (METHODS §5): who gets how many
completions, which rows share a subgroup, and how preview ⊕ completion are packed.

Shape letters: B prompts, K previews per prompt, G rollouts per prompt, N = B·G rows, C context
slots (prompt + template, left-padded), M = max_preview_tokens, T = max_new_tokens, R = M + T.
Rows are ordered prompt-major, then preview, then completion: row n belongs to prompt n // G and
to preview ``b·K + preview_of_rollout[n % G]``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Segment(NamedTuple):
  """Right-padded rows with prefix masks: tokens, mask (1 = real) and log-probs, [N, W] each."""

  tokens: np.ndarray
  mask: np.ndarray
  logps: np.ndarray


def allocate(group_size: int, num_previews: int) -> np.ndarray:
  """counts_K: completions per preview, G = Σ_k counts_k. ``equal`` allocation: G // K each and
  the remainder G mod K spread one apiece over the first previews (so sizes differ by ≤ 1)."""
  if not 1 <= num_previews <= group_size:
    raise ValueError(
      f"strategy.num_previews must be in [1, group_size={group_size}], got {num_previews}"
    )
  counts_K = np.full(num_previews, group_size // num_previews, np.int32)
  counts_K[: group_size % num_previews] += 1
  return counts_K


def preview_of_rollout(group_size: int, num_previews: int) -> np.ndarray:
  """int32 ``[G]``: the preview (0..K-1) each rollout of a group is conditioned on."""
  counts_K = allocate(group_size, num_previews)
  return np.repeat(np.arange(num_previews, dtype=np.int32), counts_K)


def normalize_preview(text: str) -> str:
  """Whitespace runs collapsed to one space, ends stripped, lower case: the merge key."""
  return " ".join(text.split()).lower()


def preview_ids(texts_BK: list[str], num_previews: int, merge_identical: bool) -> np.ndarray:
  """int32 ``[B·K]`` subgroup id of each preview: its global index b·K + k, or, when merging,
  the smallest index of the same prompt's previews with the same normalised text."""
  ids = np.arange(len(texts_BK), dtype=np.int32)
  if not merge_identical:
    return ids
  for b in range(0, len(texts_BK), num_previews):
    first: dict[str, int] = {}
    for j in range(b, b + num_previews):
      ids[j] = first.setdefault(normalize_preview(texts_BK[j]), j)
  return ids


def row_ids(preview_ids_BK: np.ndarray, group_size: int, num_previews: int):
  """(group_ids_N, subgroup_ids_N, preview_N): per-rollout prompt id, subgroup id and the
  global index b·K + k of the preview the rollout was conditioned on."""
  num_prompts = len(preview_ids_BK) // num_previews
  local_G = preview_of_rollout(group_size, num_previews)
  preview_N = (
    np.arange(num_prompts, dtype=np.int32)[:, None] * num_previews + local_G[None, :]
  ).reshape(-1)
  group_ids_N = np.repeat(np.arange(num_prompts, dtype=np.int32), group_size)
  return group_ids_N, np.asarray(preview_ids_BK)[preview_N].astype(np.int32), preview_N


def left_align(tokens_NxL: np.ndarray, mask_NxL: np.ndarray, pad_id: int):
  """Moves every row's padding to the left, keeping real tokens in order (a stable sort on
  the mask): [left-padded prompt | right-padded preview] -> one left-padded context."""
  order_NxL = np.argsort(mask_NxL != 0, axis=1, kind="stable")
  mask_NxL = np.take_along_axis(mask_NxL, order_NxL, axis=1)
  tokens_NxL = np.where(mask_NxL != 0, np.take_along_axis(tokens_NxL, order_NxL, axis=1), pad_id)
  return tokens_NxL.astype(np.int32), mask_NxL.astype(np.int32)


def pack_responses(
  preview_NxM: Segment, completion_NxT: Segment, pad_id: int, train_on_preview: bool
) -> dict:
  """Response = preview ⊕ completion, contiguous and right-padded to R = M + T.

  Both parts are right-padded with prefix masks. Returns int32 ``tokens_NxR``,
  ``input_mask_NxR`` (every real token), ``loss_mask_NxR`` (completion tokens, plus preview
  tokens when ``train_on_preview``), ``is_preview_NxR``, and float32 ``logps_NxR`` aligned.
  """
  N, M = preview_NxM.tokens.shape
  T = completion_NxT.tokens.shape[1]
  lp_Nx1 = np.sum(preview_NxM.mask != 0, axis=1, keepdims=True)
  t_R = np.arange(M + T)[None, :]
  in_preview_NxR = t_R < lp_Nx1
  src_NxR = np.clip(t_R - lp_Nx1, 0, T - 1)  # column of the completion that lands at t
  in_completion_NxR = ~in_preview_NxR & (t_R - lp_Nx1 < T)
  in_completion_NxR &= np.take_along_axis(completion_NxT.mask != 0, src_NxR, axis=1)

  def merge(prev_NxM, comp_NxT, fill):
    prev_NxR = np.concatenate([prev_NxM, np.full((N, T), fill, prev_NxM.dtype)], axis=1)
    comp_NxR = np.take_along_axis(comp_NxT, src_NxR, axis=1)
    return np.where(in_preview_NxR, prev_NxR, np.where(in_completion_NxR, comp_NxR, fill))

  real_NxR = in_preview_NxR | in_completion_NxR
  loss_NxR = in_completion_NxR | (in_preview_NxR if train_on_preview else False)
  return {
    "tokens_NxR": merge(
      np.asarray(preview_NxM.tokens, np.int32), np.asarray(completion_NxT.tokens, np.int32), pad_id
    ).astype(np.int32),
    "input_mask_NxR": real_NxR.astype(np.int32),
    "loss_mask_NxR": loss_NxR.astype(np.int32),
    "is_preview_NxR": in_preview_NxR.astype(np.int32),
    "logps_NxR": merge(
      np.asarray(preview_NxM.logps, np.float32), np.asarray(completion_NxT.logps, np.float32), 0.0
    ).astype(np.float32),
  }


def subgroup_metrics(
  rewards_N, group_ids_N, subgroup_ids_N, preview_lens_BK, distinct_B, stopped_BK, remainder: int
) -> dict[str, float]:
  """``strategy/*`` scalars of one step: preview diversity and length, subgroup sizes, and the
  spread of subgroup mean rewards inside a prompt (max_s μ_s − min_s μ_s, averaged)."""
  rewards_N = np.asarray(rewards_N, np.float64)
  subs, inverse, sizes = np.unique(subgroup_ids_N, return_inverse=True, return_counts=True)
  means_S = np.bincount(inverse, weights=rewards_N) / sizes
  group_of_S = np.zeros(len(subs), np.int64)
  group_of_S[inverse] = group_ids_N
  spreads = [np.ptp(means_S[group_of_S == g]) for g in np.unique(group_ids_N)]
  return {
    "strategy/distinct_previews": float(np.mean(distinct_B)),
    "strategy/subgroup_size_min": float(sizes.min()),
    "strategy/subgroup_size_max": float(sizes.max()),
    "strategy/subgroups_per_prompt": len(subs) / len(spreads),
    "strategy/preview_len_mean": float(np.mean(preview_lens_BK)),
    "strategy/preview_stopped_frac": float(np.mean(stopped_BK)),
    "strategy/subgroup_reward_spread": float(np.mean(spreads)),
    "strategy/alloc_remainder": float(remainder),
  }
