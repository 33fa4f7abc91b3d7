"""DAPO's batch shaping around a rollout (METHODS §4 "DAPO extras"; Yu et al. 2025, §3.2-3.4).

``sample_batch`` wraps any ``rollout_fn(problems, rng) -> (batch, info)`` (the update-batch
dict of ``grpo_jax.train.update``, rows grouped by ``group_ids_N``) and returns a batch of
exactly B·G rows, so the jitted update keeps one shape:

1. overlong reward shaping (``dapo.overlong_penalty``), on every sampled row:
     r_i += w · max(min(−(L_i − (L_max − L_buf)) / L_buf, 0), −1),
   L_i the completion length (its tokens up to and including the stop token; a strategy
   preview is context and never counts, whether or not ``strategy.train_on_preview`` puts it in
   the loss mask), L_max = ``sampling.max_new_tokens``, L_buf = ``dapo.overlong_buffer``,
   w = ``dapo.overlong_penalty_weight``. The raw accuracy before shaping stays in the batch
   as ``accuracy_N``: HA-DW's group difficulty p̂_g and its y_t read it (METHODS §3), the
   baseline and normalisation the shaped ``rewards_N``;
2. dynamic sampling (``dapo.dynamic_sampling``): each round draws ceil(oversample·B) fresh
   prompts (rounded up so the rows divide over the devices), keeps the groups whose final
   rewards are not all equal (their advantages would be 0), and stops once B groups are kept
   or after ``dapo.max_sampling_rounds`` rounds. Surplus groups are dropped. Short of B, it
   raises if ``dapo.require_full_batch``, else fills the batch with padded rows (group and
   subgroup id −1, completion mask 0: ignored by the advantages and the loss);
3. overlong filtering (``dapo.overlong_filter``): ``loss_mask_N`` = 0 on truncated responses
   (no EOS within L_max), which the update multiplies into the loss mask. They still count in
   their group's baseline.

Per-row facts come from the rollout when it carries them: ``truncated_N`` (the sampler's: no
stop token within ``sampling.max_new_tokens``; both rollouts pack it) and ``lengths_N`` (the
completion length L_i). Without them they are read off the packed rows, which is right only
where the response columns hold the completion alone: truncation = a full last column without
EOS (one-stage batches only: in the two-stage layout preview ⊕ completion a truncated
completion after a short preview ends before the last column), and L_i = Σ_t completion mask
(the completion alone unless ``strategy.train_on_preview`` adds the preview to that mask, where
the penalty then needs ``lengths_N`` and raises without it).

Filtering uses the shaped rewards (the ones the advantages see; verl's DAPO recipe filters on
accuracy by default). Group and subgroup ids are renumbered densely over the kept rows.
``info`` gains ``dapo/*`` metrics and ``data/consumed`` (prompts drawn from the stream).
"""

from __future__ import annotations

import math

import jax
import numpy as np


def overlong_penalty_N(lengths_N, max_len: int, buffer: int, weight: float) -> np.ndarray:
  """w·max(min(−(L − (L_max − L_buf))/L_buf, 0), −1) per row (DAPO eq. 13). Float32 [N]."""
  if buffer <= 0:
    raise ValueError(f"dapo.overlong_buffer must be > 0 tokens, got {buffer}")
  lengths_N = np.asarray(lengths_N, np.float64)
  penalty_N = np.clip(-(lengths_N - (max_len - buffer)) / buffer, -1.0, 0.0)
  return (weight * penalty_N).astype(np.float32)


def truncated_rows(batch: dict, eos_id: int) -> np.ndarray:
  """True where the response fills the whole generation window without an EOS. Bool [N].

  Reads the packed rows: valid only for one-stage batches, whose response columns are the
  completion alone (the sampler's ``truncated_N`` is used whenever the batch carries it)."""
  mask_NxT = np.asarray(batch["completion_mask_NxT"])
  last_token_N = np.asarray(batch["tokens_NxL"])[:, -1]
  return (mask_NxT[:, -1] > 0) & (last_token_N != eos_id)


def _two_stage(cfg) -> bool:
  """Whether the rollouts pack preview ⊕ completion (strategy sampling with K > 1)."""
  s = cfg.strategy if "strategy" in cfg else None
  return bool(s is not None and s.enabled and int(s.num_previews) > 1)


def truncated_of(batch: dict, cfg, eos_id: int) -> np.ndarray:
  """Per-row truncation, bool [N]: the rollout's ``truncated_N`` (the sampler's), else
  :func:`truncated_rows` for one-stage batches."""
  if "truncated_N" in batch:
    return np.asarray(batch["truncated_N"], bool)
  if _two_stage(cfg):
    raise ValueError(
      "a two-stage (strategy) batch must carry the sampler's truncated_N: its last response "
      "column is not the completion's end"
    )
  return truncated_rows(batch, eos_id)


def completion_lengths(batch: dict, cfg) -> np.ndarray:
  """L_i per row, int [N]: the rollout's ``lengths_N``, else Σ_t completion mask (the
  completion alone unless ``strategy.train_on_preview`` put the preview in that mask)."""
  if "lengths_N" in batch:
    return np.asarray(batch["lengths_N"]).astype(np.int64)
  if _two_stage(cfg) and cfg.strategy.train_on_preview:
    raise ValueError(
      "dapo.overlong_penalty with strategy.train_on_preview needs the batch's lengths_N "
      "(completion tokens per row): completion_mask_NxT then holds the preview as well"
    )
  return np.sum(np.asarray(batch["completion_mask_NxT"]) > 0, axis=1)


def informative_groups(rewards_N, group_ids_N) -> np.ndarray:
  """Sorted ids of groups whose rewards are not all equal (ids >= 0 only)."""
  ids = np.unique(group_ids_N[group_ids_N >= 0])
  return np.array([g for g in ids if np.ptp(rewards_N[group_ids_N == g]) > 0], np.int64)


def _dense_ids(keys_N) -> np.ndarray:
  """Dense int32 ids 0..k−1 in order of first appearance, for hashable per-row keys."""
  table: dict = {}
  return np.array([table.setdefault(k, len(table)) for k in keys_N], np.int32)


def _shape_round(batch: dict, cfg, eos_id: int) -> dict:
  """Adds the overlong penalty to the rewards and the per-row loss mask (steps 1 and 3); keeps
  the raw accuracy as ``accuracy_N``."""
  batch = dict(batch)
  dapo = cfg.dapo
  truncated_N = truncated_of(batch, cfg, eos_id)
  rewards_N = np.asarray(batch["rewards_N"], np.float32)
  batch["accuracy_N"] = rewards_N  # the verifier's, before any shaping (METHODS §3)
  if dapo.overlong_penalty:
    rewards_N = rewards_N + overlong_penalty_N(
      completion_lengths(batch, cfg),
      int(cfg.sampling.max_new_tokens),
      int(dapo.overlong_buffer),
      float(dapo.overlong_penalty_weight),
    )
  batch["rewards_N"] = rewards_N
  keep_N = ~truncated_N if dapo.overlong_filter else np.ones_like(truncated_N)
  batch["loss_mask_N"] = keep_N.astype(np.int32)
  batch["truncated_N"] = truncated_N
  return batch


def _select(batches: list[dict], picks: list[tuple[int, int]], num_rows: int) -> dict:
  """Rows of the picked (round, group) pairs, renumbered, padded to ``num_rows``."""
  rows = [(r, i) for r, g in picks for i in np.flatnonzero(batches[r]["group_ids_N"] == g)]
  pad = num_rows - len(rows)
  # Padded rows copy a real row (finite tokens for the forward pass) and are masked out below.
  rows += [(len(batches) - 1, 0)] * pad
  out = {
    k: np.stack([np.asarray(batches[r][k])[i] for r, i in rows])
    for k in batches[0]
    if k not in ("group_ids_N", "subgroup_ids_N")
  }
  real_N = np.arange(num_rows) < num_rows - pad
  group_keys = [(r, int(batches[r]["group_ids_N"][i])) for r, i in rows]
  sub_keys = [(r, int(batches[r]["subgroup_ids_N"][i])) for r, i in rows]
  out["group_ids_N"] = np.where(real_N, _dense_ids(group_keys), -1).astype(np.int32)
  out["subgroup_ids_N"] = np.where(real_N, _dense_ids(sub_keys), -1).astype(np.int32)
  out["completion_mask_NxT"] = np.where(real_N[:, None], out["completion_mask_NxT"], 0)
  out["loss_mask_N"] = np.where(real_N, out["loss_mask_N"], 0).astype(np.int32)
  out["rewards_N"] = np.where(real_N, out["rewards_N"], 0.0).astype(np.float32)
  out["accuracy_N"] = np.where(real_N, out["accuracy_N"], 0.0).astype(np.float32)
  out["truncated_N"] = real_N & out["truncated_N"]
  out["_rows"] = rows
  return out


def prompts_per_round(cfg, row_multiple: int = 1) -> int:
  """ceil(oversample·B), rounded up until its G rows divide over ``row_multiple`` devices."""
  B, G = int(cfg.sampling.prompts_per_step), int(cfg.sampling.group_size)
  factor = float(cfg.dapo.oversample) if cfg.dapo.dynamic_sampling else 1.0
  if factor < 1.0:
    raise ValueError(f"dapo.oversample must be >= 1, got {factor}")
  count = math.ceil(factor * B - 1e-9)
  while (count * G) % row_multiple:
    count += 1
  return count


def max_prompts_per_step(cfg, row_multiple: int = 1) -> int:
  """The most prompts one step of :func:`sample_batch` draws from the stream: every round's
  :func:`prompts_per_round`, over ``dapo.max_sampling_rounds`` rounds with dynamic sampling
  (one round without). Budgets that read the stream ahead (the presample) use it."""
  rounds = int(cfg.dapo.max_sampling_rounds) if cfg.dapo.dynamic_sampling else 1
  return prompts_per_round(cfg, row_multiple) * max(rounds, 1)


def sample_batch(
  rollout_fn, problems_fn, cursor: int, rng, cfg, eos_id: int, row_multiple: int = 1
) -> tuple[dict, dict]:
  """One step's training batch (B·G rows) with DAPO's shaping; see the module docstring.

  Args:
    rollout_fn: ``(problems, rng) -> (batch, info)`` for any number of problems.
    problems_fn: ``(start, count) -> problems``, the training stream (``task.train_problems``).
    cursor: stream position of the step's first prompt.
    rng: the step's sampling key; round k > 0 uses ``fold_in(rng, k)``.
    cfg: the experiment config (``sampling`` and ``dapo`` groups).
    eos_id: end-of-sequence token (a full-length row not ending in it is truncated).
    row_multiple: data-parallel device count; every rollout's rows divide by it.

  Returns:
    (batch, info): the batch adds ``loss_mask_N``, ``truncated_N``, ``accuracy_N`` (raw
    accuracy, 0 on padding) and ``step_accuracy_N`` (y_t, every row); info has the rollout's
    per-row lists (``completions``, ``problems``) of the kept rows ('' / None for padding),
    ``response/truncated_frac`` over real rows, ``data/consumed``, and ``dapo/kept_groups``,
    ``dapo/rounds``, ``dapo/sampled_groups``,
    ``dapo/informative_frac``, ``dapo/sampled_reward_mean`` (over every sampled row),
    ``dapo/overlong_filtered_frac``, ``dapo/overlong_penalty_mean``.
  """
  dapo = cfg.dapo
  B, G = int(cfg.sampling.prompts_per_step), int(cfg.sampling.group_size)
  count = prompts_per_round(cfg, row_multiple)
  rounds = int(dapo.max_sampling_rounds) if dapo.dynamic_sampling else 1
  if rounds < 1:
    raise ValueError(f"dapo.max_sampling_rounds must be >= 1, got {rounds}")

  batches, infos, picks = [], [], []
  for k in range(rounds):
    problems = problems_fn(cursor + k * count, count)
    batch, info = rollout_fn(problems, rng if k == 0 else jax.random.fold_in(rng, k))
    batch = _shape_round(batch, cfg, eos_id)
    batches.append(batch)
    infos.append(info)
    if dapo.dynamic_sampling:
      kept = informative_groups(batch["rewards_N"], np.asarray(batch["group_ids_N"]))
    else:
      kept = np.unique(np.asarray(batch["group_ids_N"]))
      kept = kept[kept >= 0]
    picks += [(k, int(g)) for g in kept]
    if len(picks) >= B:
      break
  picks = picks[:B]
  sampled_groups = sum(len(np.unique(b["group_ids_N"][b["group_ids_N"] >= 0])) for b in batches)
  if len(picks) < B and dapo.require_full_batch:
    raise RuntimeError(
      f"dynamic sampling kept {len(picks)} of {B} groups after {len(batches)} rounds "
      f"({sampled_groups} groups sampled); raise dapo.max_sampling_rounds or "
      "dapo.oversample, or set dapo.require_full_batch = False"
    )

  if dapo.dynamic_sampling:
    out = _select(batches, picks, B * G)
    rows = out.pop("_rows")
  else:  # every sampled row, untouched
    out, rows = batches[0], [(0, i) for i in range(len(batches[0]["rewards_N"]))]
  real_N = np.asarray(out["group_ids_N"]) >= 0
  raw_N = np.concatenate([b["accuracy_N"] for b in batches])
  # HA-DW's batch accuracy y_t covers every sampled response, dropped groups included, before
  # reward shaping (METHODS §3); broadcast per row so it shards like the rest of the batch.
  out["step_accuracy_N"] = np.full(real_N.shape, np.mean(raw_N), np.float32)
  shaped_N = np.concatenate([b["rewards_N"] for b in batches])
  informative = sum(
    len(informative_groups(b["rewards_N"], np.asarray(b["group_ids_N"]))) for b in batches
  )
  real_mean = lambda x_N: float(np.mean(x_N[real_N])) if real_N.any() else 0.0
  info = {key: value for key, value in infos[0].items() if not isinstance(value, list)}
  for key in [k for k, v in infos[0].items() if isinstance(v, list)]:  # per-row lists
    blank = "" if key == "completions" else None
    info[key] = [infos[r][key][i] if real else blank for (r, i), real in zip(rows, real_N)]
  info.update(
    {
      "response/truncated_frac": real_mean(out["truncated_N"]),
      "data/consumed": count * len(batches),
      "dapo/kept_groups": float(len(picks)),
      "dapo/rounds": float(len(batches)),
      "dapo/sampled_groups": float(sampled_groups),
      "dapo/informative_frac": informative / max(sampled_groups, 1),
      "dapo/sampled_reward_mean": float(np.mean(raw_N)),
      "dapo/overlong_filtered_frac": real_mean(1.0 - out["loss_mask_N"]),
      "dapo/overlong_penalty_mean": float(np.mean(shaped_N - raw_N)),
    }
  )
  return out, info
