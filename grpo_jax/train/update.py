"""The GRPO update as ONE jitted function over the mesh.

state, batch -> state', metrics. Inside: group advantages by segment reductions
(``grpo_jax.advantages.compute``, METHODS §1-3) on the whole batch; the reference model's
log-probs (only when ``loss.kl_coef != 0``); then μ = ``loss.num_iterations`` ×
``loss.num_minibatches`` optimizer steps, each one the clipped surrogate
(``grpo_jax.losses.policy_loss``, METHODS §4) summed over micro-batches of
``loss.micro_batch_size`` rows with the minibatch's denominators. The state is donated;
shardings are explicit (batch rows split over data × fsdp).

With ``loss.entropy_control`` (Clip-Cov / KL-Cov, ``grpo_jax.losses.entropy_control``) each
optimizer step first runs its rows forward without gradient and selects the tokens the control
acts on from those log-probs, over all of the step's rows at once; the micro-batches' losses
read that selection, so it is the same whatever ``loss.micro_batch_size`` is.

Old log-probs (METHODS §4 statement 15): with μ = 1 the old policy IS the current one, so
old = stop_gradient(logπ_θ) inside the loss (ratio exactly 1, no extra forward pass); with μ > 1
they are the trainer's own recomputation, once, before the first step, and stay fixed.

The batch is ``RolloutBatch.to_device(mesh)``, an ``UpdateBatch`` (``grpo_jax.rollout.batch``)
of N-row arrays (N rows, P prompt tokens, T completion tokens, L = P + T):
  tokens_NxL, input_mask_NxL (1 = real token), completion_mask_NxT (1 = completion token up to
  and including EOS), sample_logps_NxT (the sampler's log-probs), rewards_N, accuracy_N (raw
  accuracy before reward shaping: HA-DW's p̂_g), group_ids_N, subgroup_ids_N, loss_mask_N
  (0 = row kept for the baseline but out of the loss, e.g. DAPO's overlong filter) and
  step_accuracy_N (HA-DW's y_t, the batch's scalar ``step_accuracy`` on every row). With
  ``loss.share_prompt`` the rows must come in groups of G = ``sampling.group_size`` consecutive
  rows that repeat one prompt in tokens_NxL[:, :P] and input_mask_NxL[:, :P] (what every rollout
  packs; :func:`check_shared_prompts` tests a batch), and the forward passes run each prompt once.
The loop hands the batch cut to its longest completion (``grpo_jax.train.length_buckets``): T and
L are then the cut widths, and ``completion_len`` the sampled T. With ``loss.pack`` the batch also
carries its real tokens packed into rows (``UpdateBatch.packed``, ``grpo_jax.train.packing``):
every forward pass runs on those and the per-token arrays stay N × T.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from grpo_jax import advantages as adv_lib
from grpo_jax import losses as loss_lib
from grpo_jax import models
from grpo_jax import sharding as shard_lib
from grpo_jax.config.fields import as_int
from grpo_jax.models.chunked_logps import chunked_token_logps
from grpo_jax.models.shared_prompt import group_run
from grpo_jax.rollout.batch import UpdateBatch
from grpo_jax.train.microbatch import (
  accumulate_grads,
  map_rows,
  num_parts,
  row_blocks,
  split_rows,
)
from grpo_jax.train.state import step_keys


def _masked_mean(x, mask):
  mask = mask.astype(jnp.float32)
  return jnp.sum(x * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def rollout_metrics(batch: UpdateBatch, logps_NxT) -> dict:
  """Sampler-trainer parity and response statistics (METHODS §4 statement 16).

  ``rollout/logp_certain_frac``: the share of scored tokens whose sampled log-prob is exactly
  0.0 (probability 1 in float32, e.g. a completion that only restates a preview). Both sides
  round such a token to 0 whatever their logits, so the gap cannot see a mismatch there: a gap of
  exactly 0 with this share at 1 says nothing about parity."""
  mask_NxT = batch.completion_mask_NxT
  gap_NxT = jnp.abs(logps_NxT - batch.sample_logps_NxT)
  valid_N = batch.group_ids_N >= 0
  lengths_N = jnp.sum(mask_NxT, axis=1).astype(jnp.float32)
  certain_NxT = (batch.sample_logps_NxT == 0.0).astype(jnp.float32)
  return {
    "rollout/logp_gap_mean": _masked_mean(gap_NxT, mask_NxT),
    "rollout/logp_gap_max": jnp.max(jnp.where(mask_NxT > 0, gap_NxT, 0.0)),
    "rollout/logp_certain_frac": _masked_mean(certain_NxT, mask_NxT),
    **_masked_stats("reward/", batch.rewards_N, valid_N),
    **_masked_stats("response/len_", lengths_N, valid_N),
  }


def _masked_stats(prefix: str, x_N, valid_N) -> dict:
  """``{prefix}mean``, ``std``, ``min``, ``max`` of ``x_N`` over the valid rows (0 with none: a
  batch of padding rows logs zeros, never infinities)."""
  mean = _masked_mean(x_N, valid_N)
  var = _masked_mean(jnp.square(x_N - mean), valid_N)
  any_valid = jnp.any(valid_N)
  low = jnp.where(any_valid, jnp.min(jnp.where(valid_N, x_N, jnp.inf)), 0.0)
  high = jnp.where(any_valid, jnp.max(jnp.where(valid_N, x_N, -jnp.inf)), 0.0)
  out = {f"{prefix}mean": mean, f"{prefix}min": low, f"{prefix}max": high}
  return {**out, f"{prefix}std": jnp.sqrt(var)}


def prompt_share(cfg, num_rows: int, parts: int, blocks: int) -> int:
  """Rows per shared prompt pass when ``num_rows`` rows are split into ``parts`` parts over
  ``blocks`` device blocks: ``shared_prompt.group_run`` with loss.share_prompt, else 1."""
  if not cfg.loss.share_prompt:
    return 1
  return group_run(cfg.sampling.group_size, num_rows, parts, blocks)


def check_shared_prompts(batch, group_size: int, prompt_len: int) -> None:
  """Raises unless the ``RolloutBatch``'s rows come in groups of ``group_size`` consecutive rows
  with the same prompt slots (tokens and mask), as ``loss.share_prompt`` needs."""
  for key in ("tokens_NxL", "input_mask_NxL"):
    prompts_NxP = np.asarray(getattr(batch, key))[:, :prompt_len]
    if prompts_NxP.shape[0] % group_size:
      raise ValueError(
        f"loss.share_prompt: {prompts_NxP.shape[0]} rows are not groups of {group_size}"
      )
    runs_UxGxP = prompts_NxP.reshape(-1, group_size, prompt_len)
    bad_U = np.any(runs_UxGxP != runs_UxGxP[:, :1], axis=(1, 2))
    if bad_U.any():
      raise ValueError(
        f"loss.share_prompt: rows of group {int(np.argmax(bad_U))} (rows "
        f"{group_size * int(np.argmax(bad_U))} …) differ in {key}[:, :{prompt_len}]; the update "
        "needs each group's G rows consecutive with one prompt (set loss.share_prompt = False)"
      )


def make_update_step(
  graphdef,
  optimizer: optax.GradientTransformation,
  cfg,
  mesh,
  state_shardings,
  prompt_len: int,
  completion_len: int | None = None,
):
  """Returns ``update(state, batch) -> (state, metrics)``, jitted with donated state.

  ``state`` must hold ``ref_params`` (see ``init_state``) when ``loss.kl_coef != 0``; with
  ``kl_coef = 0`` the reference model is never run. Metrics of the μ optimizer steps are
  averaged over the steps (``update/steps`` = μ); ``params/norm`` is after the last step.
  ``completion_len``: see :func:`make_update_fn`.
  """
  devices = shard_lib.batch_size_multiple(mesh)
  # Replicated parameters: micro-batch gradients all-reduced once per optimizer step; split
  # ones: the partitioner's reduce-scatter per micro-batch (``microbatch.reduce_once``).
  reduce_mesh = None if shard_lib.split_axes(state_shardings["params"]) else mesh
  jitted = jax.jit(
    make_update_fn(graphdef, optimizer, cfg, prompt_len, devices, reduce_mesh, completion_len),
    in_shardings=(state_shardings, shard_lib.batch_sharding(mesh)),
    out_shardings=(state_shardings, shard_lib.replicated(mesh)),
    donate_argnums=0,
  )
  return jitted


def make_update_fn(
  graphdef,
  optimizer: optax.GradientTransformation,
  cfg,
  prompt_len: int,
  devices: int = 1,
  mesh=None,
  completion_len: int | None = None,
):
  """The un-jitted ``update(state, batch) -> (state, metrics)`` (see :func:`make_update_step`).

  ``devices``: data-parallel devices the rows are split over; minibatches and micro-batches
  take an equal sub-block of every device's rows (``grpo_jax.train.microbatch``). ``mesh``
  (given when the parameters are replicated on it): micro-batched gradients accumulate per
  device and are all-reduced once per optimizer step (``microbatch.accumulate_grads``).
  ``completion_len``: the response slots T that were sampled, when the batch comes cut to fewer
  (``grpo_jax.train.length_buckets``): the loss's constant normaliser counts T, not the cut
  width (``losses.denominators``); None = the batch's own width.
  """
  temperature = cfg.sampling.temperature
  use_kl = cfg.loss.kl_coef != 0.0
  use_entropy = cfg.loss.entropy_coef != 0.0
  use_control = loss_lib.entropy_control.applies(cfg.loss)
  iterations, minibatches = cfg.loss.num_iterations, cfg.loss.num_minibatches
  if iterations < 1 or minibatches < 1:
    raise ValueError(
      f"loss.num_iterations ({iterations}) and loss.num_minibatches ({minibatches}) must be >= 1"
    )
  # Resolved at load by the loop (train.autofit); "auto" unresolved reads as 0 (as_int).
  micro_rows = as_int(cfg.loss.micro_batch_size)
  vocab_chunk = as_int(cfg.model.logps_vocab_chunk)

  def completion_logps(params, rows, share, with_entropy=False):
    # model.logps_vocab_chunk > 0: online logsumexp over vocabulary chunks, no N×L×V logits.
    logps_fn = chunked_token_logps(vocab_chunk) if vocab_chunk > 0 else models.token_logps
    # The prompt's positions are never unembedded; ``share`` rows per prompt pass, or one pass
    # over the packed rows (which hold each shared prompt once per segment).
    packed = rows.get("packed")
    window = models.Window(prompt_len, share if packed is None else 1, packed)
    return logps_fn(
      graphdef,
      params,
      rows["tokens_NxL"],
      rows["input_mask_NxL"],
      temperature,
      with_entropy,
      window,
    )

  def loss_fn(params, rows, denoms, share):
    if use_entropy:
      logps_NxT, entropy_NxT = completion_logps(params, rows, share, with_entropy=True)
    else:
      logps_NxT = completion_logps(params, rows, share)
      # No bonus: loss/entropy is only a metric, the sample estimate E[−logπ(y_t)] of the
      # entropy, free from the log-probs at hand (no extra pass over the vocabulary).
      entropy_NxT = jax.lax.stop_gradient(-logps_NxT)
    # μ = 1: the old policy is the current one, so the ratio is 1 exactly (METHODS §4
    # statement 15) and only its gradient matters.
    old_logps_NxT = rows.get("old_logps_NxT", jax.lax.stop_gradient(logps_NxT))
    loss, aux = loss_lib.policy_loss(
      logps_NxT,
      old_logps_NxT,
      rows["advantages_N"],
      rows["mask_NxT"],
      cfg.loss,
      denoms,
      loss_lib.Terms(
        rows.get("ref_logps_NxT"),
        entropy_NxT,
        rows.get("sample_logps_NxT"),
        rows.get("control_NxT"),
      ),
    )
    return loss, (aux, jax.lax.stop_gradient(logps_NxT))

  def optimizer_step(params, opt_state, rows, control_key):
    """One optax step on these rows, micro-batched; denominators from the rows' final mask and
    the entropy control's tokens from all of the rows (``control_key``: clip_cov's draw)."""
    denoms = loss_lib.denominators(rows["mask_NxT"], cfg.loss, completion_len)
    n = rows["mask_NxT"].shape[0]
    k = num_parts(n, micro_rows, "loss.micro_batch_size")
    blocks = row_blocks(n, k, devices)
    share = prompt_share(cfg, n, k, blocks)
    if use_control:  # one forward pass without gradient, at the current parameters
      now_NxT = jax.lax.stop_gradient(
        map_rows(lambda r: completion_logps(params, r, share), rows, k, blocks)
      )
      control_NxT = loss_lib.entropy_control.select(
        now_NxT,
        rows.get("old_logps_NxT", now_NxT),  # μ = 1: π_old is π_θ
        rows["advantages_N"],
        rows["mask_NxT"],
        cfg.loss,
        control_key,
      )
      rows = dict(rows, control_NxT=control_NxT)
    (loss, aux, logps_NxT), grads = accumulate_grads(
      lambda p, r: loss_fn(p, r, denoms, share), params, rows, k, blocks, mesh
    )
    updates, opt_state = optimizer.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    stats = {
      "loss/total": loss,
      "grad/norm": optax.global_norm(grads),
      "update/norm": optax.global_norm(updates),
      **aux,
    }
    return params, opt_state, stats, logps_NxT

  def update(state, batch):
    keys = step_keys(state["rng"], state["step"])
    # Optimizer step i draws with fold_in(keys["control"], i) (clip_cov's random tokens).
    control_key = lambda i: jax.random.fold_in(keys["control"], i)
    advantages_N, anchor, adv_aux = adv_lib.compute(
      batch.rewards_N,
      batch.group_ids_N,
      batch.subgroup_ids_N,
      cfg,
      state["anchor"],
      keys["advantage"],
      # HA-DW's p̂_g from the raw accuracy, before DAPO's reward shaping, and y_t over every
      # sampled response (METHODS §3).
      adv_lib.Accuracy(batch.accuracy_N, jnp.mean(batch.step_accuracy_N)),
    )
    mask_NxT = batch.completion_mask_NxT
    mask_NxT = mask_NxT * batch.loss_mask_N[:, None].astype(mask_NxT.dtype)
    rows = {
      "tokens_NxL": batch.tokens_NxL,
      "input_mask_NxL": batch.input_mask_NxL,
      "mask_NxT": mask_NxT,
      "advantages_N": advantages_N,
    }
    if batch.packed is not None:  # loss.pack: split with the rows (whole cells a part)
      rows["packed"] = batch.packed
    if loss_lib.correction.applies(cfg.loss):  # the loss weighs tokens by π_old / π_sampler
      rows["sample_logps_NxT"] = batch.sample_logps_NxT
    num_rows = mask_NxT.shape[0]
    chunks = num_parts(num_rows, micro_rows, "loss.micro_batch_size")
    blocks = row_blocks(num_rows, chunks, devices)
    share = prompt_share(cfg, num_rows, chunks, blocks)
    forward = lambda params: jax.lax.stop_gradient(
      map_rows(lambda r: completion_logps(params, r, share), rows, chunks, blocks)
    )
    if use_kl:
      if "ref_params" not in state:
        raise ValueError("loss.kl_coef != 0 needs state['ref_params'] (init_state adds it)")
      rows["ref_logps_NxT"] = forward(state["ref_params"])
    # Old log-probs: the trainer's recomputation, once, before the first step (METHODS §4
    # statement 15): for μ > 1, and for a rejecting correction, whose rejected rows leave the
    # mask before the step's denominators are counted (METHODS §8 statement 21; verl's own
    # old-log-prob pass). At μ = 1 the loss still reads π_old as its own stop-gradient.
    multi_step = iterations * minibatches > 1
    rejection = None
    if multi_step or loss_lib.correction.rejects(cfg.loss):
      old_logps_NxT = forward(state["params"])
      if multi_step:
        rows["old_logps_NxT"] = old_logps_NxT
      if loss_lib.correction.rejects(cfg.loss):
        rejection = loss_lib.correction.reject(
          old_logps_NxT, batch.sample_logps_NxT, mask_NxT, cfg.loss
        )
        rows["mask_NxT"] = rejection.mask_NxT

    if not multi_step:
      params, opt_state, stats, logps_NxT = optimizer_step(
        state["params"], state["opt_state"], rows, control_key(0)
      )
    else:
      logps_NxT = rows["old_logps_NxT"]
      if num_rows % minibatches:
        raise ValueError(f"loss.num_minibatches = {minibatches} must divide the {num_rows} rows")
      # Contiguous minibatches (whole groups, whatever the mesh): which rows share an optimizer
      # step must not depend on the device count. Micro-batches may follow the devices: they
      # only change the summation order.
      parts = split_rows(rows, minibatches)

      def minibatch(carry, part_and_id):
        part, i = part_and_id
        params, opt_state, stats, _ = optimizer_step(*carry, part, control_key(i))
        return (params, opt_state), stats

      def iteration(carry, ids):
        return jax.lax.scan(minibatch, carry, (parts, ids))

      step_ids = jnp.arange(iterations * minibatches).reshape(iterations, minibatches)
      (params, opt_state), stats = jax.lax.scan(
        iteration, (state["params"], state["opt_state"]), step_ids
      )
      stats = jax.tree.map(jnp.mean, stats)

    metrics = {
      **stats,
      "params/norm": optax.global_norm(params),
      "update/steps": jnp.asarray(iterations * minibatches, jnp.float32),
      **adv_aux,
      **rollout_metrics(batch, logps_NxT),
      **loss_lib.mismatch_metrics(
        logps_NxT, batch.sample_logps_NxT, mask_NxT, batch.group_ids_N >= 0, rejection
      ),
    }
    new_state = dict(
      state, params=params, opt_state=opt_state, anchor=anchor, step=state["step"] + 1
    )
    return new_state, metrics

  return update
