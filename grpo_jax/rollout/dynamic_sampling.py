"""DAPO's batch shaping around a rollout (METHODS §4 "DAPO extras"; Yu et al. 2025, §3.2-3.4).

``sample_batch`` wraps any ``rollout_fn(problems, rng) -> RolloutBatch`` (rows grouped by
``group_ids_N``, ``grpo_jax.rollout.batch``) and returns a batch of exactly B·G rows, so the
jitted update keeps one shape:

1. overlong reward shaping (``dapo.overlong_penalty``), on every sampled row:
     r_i += w · max(min(−(L_i − (L_max − L_buf)) / L_buf, 0), −1),
   L_i the completion length (its tokens up to and including the stop token; a strategy
   preview is context and never counts, whether or not ``strategy.train_on_preview`` puts it in
   the loss mask), L_max = ``sampling.max_new_tokens``, L_buf = ``dapo.overlong_buffer``,
   w = ``dapo.overlong_penalty_weight``. The raw accuracy before shaping stays in the batch
   as ``accuracy_N``: HA-DW's group difficulty p̂_g and its y_t read it (METHODS §3), the
   baseline and normalisation the shaped ``rewards_N``;
2. dynamic sampling (``dapo.dynamic_sampling``): each round draws ceil(oversample·B) fresh
   prompts (rounded up so the rows divide over the devices), keeps the groups whose
   ``dapo.filter_metric`` is not all equal, and stops once B groups are kept or after
   ``dapo.max_sampling_rounds`` rounds. The metric is verl's ``algorithm.filter_groups.metric``:
   ``'acc'`` (default, verl's DAPO recipe) the raw accuracy ``accuracy_N``, so a group of all
   correct answers is dropped even when the overlong penalty has made their rewards differ;
   ``'seq_reward'`` the shaped ``rewards_N`` (a group kept iff its advantages can be non-zero).
   verl's ``score`` is the verifier's score before shaping, here the accuracy, and its
   ``seq_final_reward`` adds a KL penalty in the reward, which this package does not have.
   Surplus groups are dropped. Short of B, it raises if ``dapo.require_full_batch``, else
   fills the batch with padded rows (group and subgroup id −1, completion mask 0: ignored by
   the advantages and the loss);
3. overlong filtering (``dapo.overlong_filter``): ``loss_mask_N`` = 0 on truncated responses
   (no EOS within L_max), which the update multiplies into the loss mask. They still count in
   their group's baseline.

Per-row facts come from the rollout's batch: ``truncated_N`` (the sampler's: no stop token
within ``sampling.max_new_tokens``; in the two-stage layout preview ⊕ completion a truncated
completion after a short preview ends before the last column, so the packed rows cannot tell)
and ``lengths_N`` (the completion length L_i, never the preview).

Multi-host (``exchange``, ``multihost.RowExchange``): each process samples its share of every
round; dynamic sampling gathers the round's rows, so every process keeps the groups one process
would keep, in prompt order, and stops after the same round, then takes its own rows of the
B·G. The metrics and y_t are the job's.

Group and subgroup ids are renumbered densely over the kept rows. The batch's ``metrics`` gain
``dapo/*`` and ``response/truncated_frac``.
"""

from __future__ import annotations

import math

import jax
import numpy as np

from grpo_jax.config.experiment import Experiment
from grpo_jax.config.groups_method import Dapo
from grpo_jax.rollout.batch import ARRAYS, RolloutBatch, concat_rows
from grpo_jax.rollout.multihost import RowExchange

# dapo.filter_metric → the per-row field of the batch it reads.
FILTER_METRICS = {"acc": "accuracy_N", "seq_reward": "rewards_N"}


def overlong_penalty_N(lengths_N, max_len: int, buffer: int, weight: float) -> np.ndarray:
  """w·max(min(−(L − (L_max − L_buf))/L_buf, 0), −1) per row (DAPO eq. 13). Float32 [N]."""
  lengths_N = np.asarray(lengths_N, np.float64)
  penalty_N = np.clip(-(lengths_N - (max_len - buffer)) / buffer, -1.0, 0.0)
  return (weight * penalty_N).astype(np.float32)


def informative_groups(values_N, group_ids_N) -> np.ndarray:
  """Sorted ids of groups whose values (a row metric: accuracy or reward) are not all equal
  (ids >= 0 only)."""
  ids = np.unique(group_ids_N[group_ids_N >= 0])
  return np.array([g for g in ids if np.ptp(values_N[group_ids_N == g]) > 0], np.int64)


def filter_field(dapo: Dapo) -> str:
  """The batch field dynamic sampling filters on: ``FILTER_METRICS[dapo.filter_metric]``."""
  return FILTER_METRICS[dapo.filter_metric]


def _dense_ids(keys_N) -> np.ndarray:
  """Dense int32 ids 0..k−1 in order of first appearance, for hashable per-row keys."""
  table: dict = {}
  return np.array([table.setdefault(k, len(table)) for k in keys_N], np.int32)


def _shape_round(batch: RolloutBatch, cfg: Experiment) -> RolloutBatch:
  """Adds the overlong penalty to the rewards and the per-row loss mask (steps 1 and 3); keeps
  the raw accuracy as ``accuracy_N``."""
  dapo = cfg.dapo
  raw_N = batch.rewards_N  # the verifier's, before any shaping (METHODS §3)
  rewards_N = raw_N
  if dapo.overlong_penalty:
    rewards_N = raw_N + overlong_penalty_N(
      batch.lengths_N,
      cfg.sampling.max_new_tokens,
      dapo.overlong_buffer,
      dapo.overlong_penalty_weight,
    )
  keep_N = ~batch.truncated_N if dapo.overlong_filter else np.ones_like(batch.truncated_N)
  return batch.replace(rewards_N=rewards_N, accuracy_N=raw_N, loss_mask_N=keep_N)


def _select(batches: list[RolloutBatch], picks: list[tuple[int, int]], num_rows: int):
  """Rows of the picked (round, group) pairs, renumbered, padded to ``num_rows``. Padded rows
  copy a real row (finite tokens for the forward pass) and are masked out."""
  rows = [(r, i) for r, g in picks for i in np.flatnonzero(batches[r].group_ids_N == g)]
  pad = num_rows - len(rows)
  rows += [(len(batches) - 1, 0)] * pad
  real_N = np.arange(num_rows) < num_rows - pad
  start_R = np.cumsum([0] + [b.num_rows for b in batches])
  merged = batches[0].replace(
    **{k: concat_rows(batches, k) for k in ARRAYS},
    completions_N=[t for b in batches for t in b.completions_N],
    problems_N=[p for b in batches for p in b.problems_N],
  )
  out = merged.take(np.array([start_R[r] + i for r, i in rows], np.int64), real_N)
  group_keys = [(r, int(batches[r].group_ids_N[i])) for r, i in rows]
  sub_keys = [(r, int(batches[r].subgroup_ids_N[i])) for r, i in rows]
  return out.replace(
    group_ids_N=np.where(real_N, _dense_ids(group_keys), -1),
    subgroup_ids_N=np.where(real_N, _dense_ids(sub_keys), -1),
  )


def prompts_per_round(cfg: Experiment, row_multiple: int = 1) -> int:
  """ceil(oversample·B), rounded up until its G rows divide over ``row_multiple`` devices."""
  B, G = cfg.sampling.prompts_per_step, cfg.sampling.group_size
  factor = cfg.dapo.oversample if cfg.dapo.dynamic_sampling else 1.0
  count = math.ceil(factor * B - 1e-9)
  while (count * G) % row_multiple:
    count += 1
  return count


def max_prompts_per_step(cfg: Experiment, row_multiple: int = 1) -> int:
  """The most prompts one step of :func:`sample_batch` draws from the stream: every round's
  :func:`prompts_per_round`, over ``dapo.max_sampling_rounds`` rounds with dynamic sampling
  (one round without). Budgets that read the stream ahead (the presample) use it."""
  rounds = cfg.dapo.max_sampling_rounds if cfg.dapo.dynamic_sampling else 1
  return prompts_per_round(cfg, row_multiple) * max(rounds, 1)


def step_metrics(
  rounds: list[dict], out: dict, kept: int, field: str = "accuracy_N", shapes: bool = True
) -> dict:
  """``dapo/*`` and ``response/truncated_frac`` of a step from its rounds' per-row arrays
  (``rewards_N``, ``accuracy_N``, ``group_ids_N``) and the step batch's (``group_ids_N``,
  ``truncated_N``, ``loss_mask_N``), every one over the job's rows; ``kept``: groups kept;
  ``field``: the filter's row metric (:func:`filter_field`), whose not-all-equal groups
  ``dapo/informative_frac`` counts; ``shapes``: whether DAPO shapes the batch at all (without,
  only ``response/truncated_frac``)."""
  real_N = out["group_ids_N"] >= 0
  real_mean = lambda x_N: float(np.mean(x_N[real_N])) if real_N.any() else 0.0
  raw_N = np.concatenate([r["accuracy_N"] for r in rounds])
  shaped_N = np.concatenate([r["rewards_N"] for r in rounds])
  sampled = sum(len(np.unique(r["group_ids_N"][r["group_ids_N"] >= 0])) for r in rounds)
  informative = sum(len(informative_groups(r[field], r["group_ids_N"])) for r in rounds)
  truncated = {"response/truncated_frac": real_mean(out["truncated_N"])}
  if not shapes:
    return truncated
  return {
    **truncated,
    "dapo/kept_groups": float(kept),
    "dapo/rounds": float(len(rounds)),
    "dapo/sampled_groups": float(sampled),
    "dapo/informative_frac": informative / max(sampled, 1),
    "dapo/sampled_reward_mean": float(np.mean(raw_N)),
    "dapo/overlong_filtered_frac": real_mean(1.0 - out["loss_mask_N"]),
    "dapo/overlong_penalty_mean": float(np.mean(shaped_N - raw_N)),
  }


# The per-row facts :func:`step_metrics` reads.
VIEW_KEYS = ("rewards_N", "accuracy_N", "group_ids_N", "truncated_N", "loss_mask_N")


def sample_batch(
  rollout_fn, problems_fn, cursor: int, rng, cfg: Experiment, row_multiple: int = 1, exchange=None
) -> tuple[RolloutBatch, int]:
  """One step's training batch (B·G rows) with DAPO's shaping; see the module docstring.

  Args:
    rollout_fn: ``(problems, rng) -> RolloutBatch`` for any number of problems.
    problems_fn: ``(start, count) -> problems``, the training stream (``task.train_problems``).
    cursor: stream position of the step's first prompt.
    rng: the step's sampling key; round k > 0 uses ``fold_in(rng, k)``.
    cfg: the experiment config (``sampling`` and ``dapo`` groups).
    row_multiple: data-parallel device count; every rollout's rows divide by it.
    exchange: multi-host, a ``multihost.RowExchange``: ``rollout_fn`` / ``problems_fn`` give
      this process's share (``multihost.process_share``); each round's rows are gathered so
      the kept groups, the rounds and the metrics are the job's, and the batch returned holds
      this process's rows of the step's B·G. None: one process.

  Returns:
    (batch, consumed): the batch with ``loss_mask_N``, ``accuracy_N`` (raw accuracy, 0 on
    padding) and ``step_accuracy`` (y_t over every sampled row); texts of the kept rows
    ('' / None for padding); ``metrics``: the first round's rollout metrics (averaged over
    processes), ``response/truncated_frac`` over real rows, ``dapo/kept_groups``,
    ``dapo/rounds``, ``dapo/sampled_groups``, ``dapo/informative_frac``,
    ``dapo/sampled_reward_mean`` (over every sampled row), ``dapo/overlong_filtered_frac``,
    ``dapo/overlong_penalty_mean``. ``consumed``: prompts drawn from the stream.
  """

  exchange = RowExchange() if exchange is None else exchange
  dapo = cfg.dapo
  B, G = cfg.sampling.prompts_per_step, cfg.sampling.group_size
  count = prompts_per_round(cfg, row_multiple)
  field = filter_field(dapo)
  rounds = dapo.max_sampling_rounds if dapo.dynamic_sampling else 1

  # Dynamic sampling selects from the job's rows of every round; without it the batch is this
  # process's rows of the one round and only the per-row facts the metrics read are gathered.
  batches, views, picks = [], [], []
  for k in range(rounds):
    problems = problems_fn(cursor + k * count, count)
    batch = rollout_fn(problems, rng if k == 0 else jax.random.fold_in(rng, k))
    batch = _shape_round(batch, cfg)
    if dapo.dynamic_sampling:
      batch = exchange.gather(batch)
      view = {key: getattr(batch, key) for key in VIEW_KEYS}
      kept = informative_groups(getattr(batch, field), batch.group_ids_N)
    else:
      view = exchange.gather_arrays({key: getattr(batch, key) for key in VIEW_KEYS})
      kept = np.unique(view["group_ids_N"])
      kept = kept[kept >= 0]
    batches.append(batch)
    views.append(view)
    picks += [(k, int(g)) for g in kept]
    if len(picks) >= B:
      break
  picks = picks[:B]
  if len(picks) < B and dapo.require_full_batch:
    sampled = sum(len(np.unique(v["group_ids_N"][v["group_ids_N"] >= 0])) for v in views)
    raise RuntimeError(
      f"dynamic sampling kept {len(picks)} of {B} groups after {len(batches)} rounds "
      f"({sampled} groups sampled); raise dapo.max_sampling_rounds or "
      "dapo.oversample, or set dapo.require_full_batch = False"
    )

  if dapo.dynamic_sampling:
    out = _select(batches, picks, B * G)
    out_view = {key: getattr(out, key) for key in VIEW_KEYS}
    out = exchange.local(out)
  else:
    out, out_view = batches[0], views[0]
  shapes = dapo.dynamic_sampling or dapo.overlong_filter or dapo.overlong_penalty
  metrics = {
    **exchange.mean(batches[0].metrics),
    **step_metrics(views, out_view, len(picks), field, shapes),
  }
  # HA-DW's batch accuracy y_t covers every sampled response, dropped groups included, before
  # reward shaping (METHODS §3).
  raw_N = np.concatenate([v["accuracy_N"] for v in views])
  step_accuracy = float(np.float32(np.mean(raw_N)))
  return out.replace(step_accuracy=step_accuracy, metrics=metrics), count * len(batches)
