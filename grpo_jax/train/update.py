"""The GRPO update as ONE jitted function over the mesh: top-level functions of a frozen
:class:`UpdateSpec`, the typed ``TrainState`` and :class:`Rows`.

state, batch -> state', metrics (:func:`update`, jitted by :func:`make_update_step`). Inside: group
advantages by segment reductions (``grpo_jax.advantages.compute``, METHODS §1-3) on the whole batch;
the reference model's log-probs (only when ``loss.kl_coef != 0``); then μ = ``loss.num_iterations``
× ``loss.num_minibatches`` optimizer steps, each one the clipped surrogate
(``grpo_jax.losses.policy_loss``, METHODS §4) summed over micro-batches of ``loss.micro_batch_size``
rows with the minibatch's denominators. The state is donated; shardings are explicit (batch rows
split over data × fsdp).

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
The step hands the batch cut to its longest completion (``grpo_jax.train.length_buckets``): T and
L are then the cut widths, and ``completion_len`` the sampled T. With ``loss.pack`` the batch also
carries its real tokens packed into rows (``UpdateBatch.packed``, ``grpo_jax.train.packing``):
every forward pass runs on those and the per-token arrays stay N × T.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from grpo_jax import advantages as adv_lib
from grpo_jax import losses as loss_lib
from grpo_jax import models, strategy
from grpo_jax import sharding as shard_lib
from grpo_jax.config.experiment import Advantage, Experiment, Hadw, Loss
from grpo_jax.config.fields import as_int
from grpo_jax.models import lora
from grpo_jax.models.chunked_logps import chunked_token_logps
from grpo_jax.models.packing import Packed
from grpo_jax.models.shared_prompt import group_run
from grpo_jax.rollout.batch import UpdateBatch
from grpo_jax.train.microbatch import (
  accumulate_grads,
  map_rows,
  num_parts,
  row_blocks,
  split_rows,
)
from grpo_jax.train.state import TrainState, step_keys


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


@dataclasses.dataclass(frozen=True)
class UpdateSpec:
  """What the update reads besides the state and the batch, fixed for a run: the model (its
  graphdef, or with LoRA its ``models.lora.LoraModel``), the optimizer, the ``advantage``,
  ``hadw`` and ``loss`` groups, and the shapes and devices it is compiled for. Built by
  :meth:`of`; every function below is pure in (spec, arrays).

  ``completion_len``: the response slots T that were sampled, when the batch comes cut to fewer
  (``grpo_jax.train.length_buckets``): the loss's constant normaliser counts T, not the cut
  width (``losses.denominators``); None = the batch's own width. ``devices``: data-parallel
  devices the rows are split over; minibatches and micro-batches take an equal sub-block of
  every device's rows (``grpo_jax.train.microbatch``). ``reduce_mesh`` (given when the
  parameters are replicated on it): micro-batched gradients accumulate per device and are
  all-reduced once per optimizer step (``microbatch.accumulate_grads``). ``subgroups``: whether
  the rollout partitions groups into strategy subgroups (two-stage).
  """

  graphdef: object
  optimizer: optax.GradientTransformation
  advantage: Advantage
  hadw: Hadw
  loss: Loss
  temperature: float
  group_size: int
  prompt_len: int
  completion_len: int | None = None
  devices: int = 1
  reduce_mesh: object = None
  subgroups: bool = False
  vocab_chunk: int = 0  # model.logps_vocab_chunk, resolved

  @classmethod
  def of(cls, graphdef, optimizer, e: Experiment, prompt_len: int, **kw) -> UpdateSpec:
    """The spec of experiment ``e`` (its auto keys resolved, ``train.autofit``)."""
    return cls(
      graphdef,
      optimizer,
      e.advantage,
      e.hadw,
      e.loss,
      e.sampling.temperature,
      e.sampling.group_size,
      prompt_len,
      subgroups=strategy.is_two_stage(e),
      vocab_chunk=as_int(e.model.logps_vocab_chunk),
      **kw,
    )

  @property
  def steps(self) -> int:
    """μ: optimizer steps per RL step."""
    return self.loss.num_iterations * self.loss.num_minibatches

  @property
  def micro_rows(self) -> int:
    return as_int(self.loss.micro_batch_size)  # resolved at load (train.autofit)


@struct.dataclass
class Rows:
  """The rows one optimizer step (or a part of it) reads: N-row arrays, split and sliced as one
  pytree. The optional fields are None where the run has no such input."""

  tokens_NxL: jax.Array
  input_mask_NxL: jax.Array
  mask_NxT: jax.Array  # the loss's tokens: completion × loss_mask_N (× the rejection's rows)
  advantages_N: jax.Array
  packed: Packed | None = None  # loss.pack: split with the rows (whole cells a part)
  sample_logps_NxT: jax.Array | None = None  # the rollout correction's π_sampler
  old_logps_NxT: jax.Array | None = None  # μ > 1: π_old, fixed before the first step
  ref_logps_NxT: jax.Array | None = None  # loss.kl_coef != 0
  control_NxT: jax.Array | None = None  # loss.entropy_control's tokens


def prompt_share(share: bool, group_size: int, num_rows: int, parts: int, blocks: int) -> int:
  """Rows per shared prompt pass when ``num_rows`` rows are split into ``parts`` parts over
  ``blocks`` device blocks: ``shared_prompt.group_run`` with ``share`` (loss.share_prompt), else
  1 (every row its own prompt pass)."""
  return group_run(group_size, num_rows, parts, blocks) if share else 1


def policy(spec: UpdateSpec, params, base=None) -> tuple:
  """(graphdef, params) of the policy: ``params`` as they are, or with LoRA (``spec.graphdef`` a
  ``models.lora.LoraModel``) the frozen ``base`` with the adapters ``params`` applied unmerged
  (x·W + (α/r)·(x·A)·B: gradients reach the adapters only)."""
  if isinstance(spec.graphdef, lora.LoraModel):
    return spec.graphdef.view(base, params, "unmerged")
  return spec.graphdef, params


def reference(spec: UpdateSpec, state: TrainState) -> tuple:
  """(graphdef, params) of the KL reference: the copy of the initial policy, or with LoRA the
  base with the adapters off (no second copy of the model)."""
  if isinstance(spec.graphdef, lora.LoraModel):
    return spec.graphdef.view(state.base, None, "base")
  if state.ref_params is None:
    raise ValueError("loss.kl_coef != 0 needs the state's ref_params (init_state adds them)")
  return spec.graphdef, state.ref_params


def completion_logps(spec: UpdateSpec, model: tuple, rows: Rows, share: int, with_entropy=False):
  """log π (and the entropy) of the completion tokens under ``model`` = (graphdef, params).
  ``model.logps_vocab_chunk`` > 0: online logsumexp over vocabulary chunks, no N×L×V logits.
  The prompt's positions are never unembedded; ``share`` rows per prompt pass, or one pass over
  the packed rows (which hold each shared prompt once per segment)."""
  chunk = spec.vocab_chunk
  logps_fn = chunked_token_logps(chunk) if chunk > 0 else models.token_logps
  window = models.Window(spec.prompt_len, share if rows.packed is None else 1, rows.packed)
  graphdef, params = model
  return logps_fn(
    graphdef,
    params,
    rows.tokens_NxL,
    rows.input_mask_NxL,
    spec.temperature,
    with_entropy,
    window,
  )


def frozen_logps(spec: UpdateSpec, model: tuple, rows: Rows):
  """log π of the rows under ``model`` without gradient, micro-batched like the loss."""
  n = rows.mask_NxT.shape[0]
  k = num_parts(n, spec.micro_rows, "loss.micro_batch_size")
  blocks = row_blocks(n, k, spec.devices)
  share = prompt_share(spec.loss.share_prompt, spec.group_size, n, k, blocks)
  fn = lambda r: completion_logps(spec, model, r, share)
  return jax.lax.stop_gradient(map_rows(fn, rows, k, blocks))


def loss_fn(spec: UpdateSpec, params, rows: Rows, denoms, share: int, base=None):
  """(loss, (aux, log π_θ)) of these rows (``losses.policy_loss``); ``params`` are what trains
  (with LoRA the adapters, on the frozen ``base``)."""
  model = policy(spec, params, base)
  if spec.loss.entropy_coef != 0.0:
    logps_NxT, entropy_NxT = completion_logps(spec, model, rows, share, with_entropy=True)
  else:
    logps_NxT = completion_logps(spec, model, rows, share)
    # No bonus: loss/entropy is only a metric, the sample estimate E[−logπ(y_t)] of the
    # entropy, free from the log-probs at hand (no extra pass over the vocabulary).
    entropy_NxT = jax.lax.stop_gradient(-logps_NxT)
  # μ = 1: the old policy is the current one, so the ratio is 1 exactly (METHODS §4
  # statement 15) and only its gradient matters.
  old_logps_NxT = rows.old_logps_NxT
  if old_logps_NxT is None:
    old_logps_NxT = jax.lax.stop_gradient(logps_NxT)
  terms = loss_lib.Terms(rows.ref_logps_NxT, entropy_NxT, rows.sample_logps_NxT, rows.control_NxT)
  loss, aux = loss_lib.policy_loss(
    logps_NxT, old_logps_NxT, rows.advantages_N, rows.mask_NxT, spec.loss, denoms, terms
  )
  return loss, (aux, jax.lax.stop_gradient(logps_NxT))


def optimizer_step(spec: UpdateSpec, params, opt_state, rows: Rows, control_key, base=None):
  """One optax step on these rows, micro-batched; denominators from the rows' final mask and
  the entropy control's tokens from all of the rows (``control_key``: clip_cov's draw).
  Returns (params, opt_state, stats, log π_θ of the rows before the step)."""
  denoms = loss_lib.denominators(rows.mask_NxT, spec.loss, spec.completion_len)
  n = rows.mask_NxT.shape[0]
  k = num_parts(n, spec.micro_rows, "loss.micro_batch_size")
  blocks = row_blocks(n, k, spec.devices)
  share = prompt_share(spec.loss.share_prompt, spec.group_size, n, k, blocks)
  if loss_lib.entropy_control.applies(spec.loss):  # one pass without gradient, at θ
    now_NxT = frozen_logps(spec, policy(spec, params, base), rows)
    old_NxT = now_NxT if rows.old_logps_NxT is None else rows.old_logps_NxT  # μ = 1: π_θ
    control_NxT = loss_lib.entropy_control.select(
      now_NxT, old_NxT, rows.advantages_N, rows.mask_NxT, spec.loss, control_key
    )
    rows = rows.replace(control_NxT=control_NxT)
  (loss, aux, logps_NxT), grads = accumulate_grads(
    lambda p, r: loss_fn(spec, p, r, denoms, share, base),
    params,
    rows,
    k,
    blocks,
    spec.reduce_mesh,
  )
  updates, opt_state = spec.optimizer.update(grads, opt_state, params)
  params = optax.apply_updates(params, updates)
  stats = {
    "loss/total": loss,
    "grad/norm": optax.global_norm(grads),
    "update/norm": optax.global_norm(updates),
    **aux,
  }
  return params, opt_state, stats, logps_NxT


def optimizer_steps(spec: UpdateSpec, params, opt_state, rows: Rows, control_key, base=None):
  """μ = ``loss.num_iterations`` × ``loss.num_minibatches`` optimizer steps over contiguous
  minibatches (whole groups, whatever the mesh: which rows share an optimizer step must not
  depend on the device count; micro-batches may follow the devices, they only change the
  summation order). Step i draws with ``fold_in(control_key, i)``. Returns (params, opt_state,
  stats averaged over the steps)."""
  parts = split_rows(rows, spec.loss.num_minibatches)

  def minibatch(carry, part_and_id):
    part, i = part_and_id
    key = jax.random.fold_in(control_key, i)
    params, opt_state, stats, _ = optimizer_step(spec, *carry, part, key, base)
    return (params, opt_state), stats

  def iteration(carry, ids):
    return jax.lax.scan(minibatch, carry, (parts, ids))

  step_ids = jnp.arange(spec.steps).reshape(spec.loss.num_iterations, spec.loss.num_minibatches)
  (params, opt_state), stats = jax.lax.scan(iteration, (params, opt_state), step_ids)
  return params, opt_state, jax.tree.map(jnp.mean, stats)


def update(spec: UpdateSpec, state: TrainState, batch: UpdateBatch):
  """One RL step's update: (state, batch) -> (state, metrics).

  Advantages of the whole batch; the reference's log-probs (``loss.kl_coef != 0``); the old
  log-probs, once, before the first step (METHODS §4 statement 15) for μ > 1 and for a
  rejecting correction, whose rejected rows leave the mask before the step's denominators are
  counted (METHODS §8 statement 21; verl's own old-log-prob pass); then the μ optimizer steps.
  Metrics of the μ steps are averaged over them (``update/steps`` = μ); ``params/norm`` is after
  the last step.
  """
  keys = step_keys(state.rng, state.step)
  # HA-DW's p̂_g from the raw accuracy, before DAPO's reward shaping, and y_t over every
  # sampled response (METHODS §3).
  step_acc = jnp.mean(batch.step_accuracy_N)
  advantages_N, anchor, adv_aux = adv_lib.compute(
    adv_lib.Rewards(batch.rewards_N, batch.accuracy_N, step_acc),
    batch.group_ids_N,
    batch.subgroup_ids_N if spec.subgroups else None,
    spec.advantage,
    spec.hadw,
    state.anchor,
    keys["advantage"],
  )
  mask_NxT = batch.completion_mask_NxT
  mask_NxT = mask_NxT * batch.loss_mask_N[:, None].astype(mask_NxT.dtype)
  corrected = loss_lib.correction.applies(spec.loss)  # weighs tokens by π_old / π_sampler
  rows = Rows(
    batch.tokens_NxL,
    batch.input_mask_NxL,
    mask_NxT,
    advantages_N,
    packed=batch.packed,
    sample_logps_NxT=batch.sample_logps_NxT if corrected else None,
  )
  if uses_reference(spec):
    rows = rows.replace(ref_logps_NxT=frozen_logps(spec, reference(spec, state), rows))
  rejection = None
  if spec.steps > 1 or loss_lib.correction.rejects(spec.loss):
    old_logps_NxT = frozen_logps(spec, policy(spec, state.params, state.base), rows)
    if spec.steps > 1:  # at μ = 1 the loss reads π_old as its own stop-gradient
      rows = rows.replace(old_logps_NxT=old_logps_NxT)
    if loss_lib.correction.rejects(spec.loss):
      rejection = loss_lib.correction.reject(
        old_logps_NxT, batch.sample_logps_NxT, mask_NxT, spec.loss
      )
      rows = rows.replace(mask_NxT=rejection.mask_NxT)

  if spec.steps == 1:
    params, opt_state, stats, logps_NxT = optimizer_step(
      spec,
      state.params,
      state.opt_state,
      rows,
      jax.random.fold_in(keys["control"], 0),
      state.base,
    )
  else:
    logps_NxT = rows.old_logps_NxT
    params, opt_state, stats = optimizer_steps(
      spec, state.params, state.opt_state, rows, keys["control"], state.base
    )
  metrics = {
    **stats,
    "params/norm": optax.global_norm(params),
    "update/steps": jnp.asarray(spec.steps, jnp.float32),
    **adv_aux,
    **rollout_metrics(batch, logps_NxT),
    **loss_lib.mismatch_metrics(
      logps_NxT,
      batch.sample_logps_NxT,
      mask_NxT,
      batch.group_ids_N >= 0,
      rejection,
      veto=loss_lib.correction.bounds(spec.loss)[2] > 0,
    ),
  }
  new_state = state.replace(params=params, opt_state=opt_state, anchor=anchor, step=state.step + 1)
  return new_state, metrics


def uses_reference(spec: UpdateSpec) -> bool:
  return spec.loss.kl_coef != 0.0


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
  e: Experiment,
  mesh,
  state_shardings,
  prompt_len: int,
  completion_len: int | None = None,
):
  """:func:`update` of experiment ``e`` jitted on ``mesh``: ``(state, batch) -> (state,
  metrics)`` with the state donated and the shardings explicit (batch rows split over data ×
  fsdp). ``graphdef``: the model's, or with LoRA its ``models.lora.LoraModel``. ``state`` must
  hold ``ref_params`` (see ``init_state``) when ``loss.kl_coef != 0`` without LoRA.
  ``completion_len``: see :class:`UpdateSpec`."""
  # Replicated parameters: micro-batch gradients all-reduced once per optimizer step; split
  # ones: the partitioner's reduce-scatter per micro-batch (``microbatch.reduce_once``).
  split = shard_lib.split_axes(state_shardings.params)
  if state_shardings.base is not None:  # LoRA: the frozen base is read inside the loss too
    split = split or shard_lib.split_axes(state_shardings.base)
  reduce_mesh = None if split else mesh
  spec = UpdateSpec.of(
    graphdef,
    optimizer,
    e,
    prompt_len,
    completion_len=completion_len,
    devices=shard_lib.batch_size_multiple(mesh),
    reduce_mesh=reduce_mesh,
  )
  return jax.jit(
    functools.partial(update, spec),
    in_shardings=(state_shardings, shard_lib.batch_sharding(mesh)),
    out_shardings=(state_shardings, shard_lib.replicated(mesh)),
    donate_argnums=0,
  )
