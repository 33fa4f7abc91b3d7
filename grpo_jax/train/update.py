"""The GRPO update as ONE jitted function over the mesh.

state, batch -> state', metrics. Inside: recompute log-probs of the sampled completions, group
advantages by segment reductions (``grpo_jax.advantages.compute``, METHODS §1-3), the clipped
surrogate (``grpo_jax.losses.policy_loss``, METHODS §4), and an optax step. The state is donated;
shardings are explicit (batch rows split over data × fsdp).

Batch keys (N rows, P prompt tokens, T completion tokens, L = P + T):
  tokens_NxL, input_mask_NxL (1 = real token), completion_mask_NxT (1 = completion token up to
  and including EOS), sample_logps_NxT (the sampler's log-probs), rewards_N, group_ids_N,
  subgroup_ids_N.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from grpo_jax import advantages as adv_lib
from grpo_jax import losses as loss_lib
from grpo_jax import models
from grpo_jax import sharding as shard_lib
from grpo_jax.train.state import step_keys


def _masked_mean(x, mask):
  mask = mask.astype(jnp.float32)
  return jnp.sum(x * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def rollout_metrics(batch: dict, logps_NxT) -> dict:
  """Sampler-trainer parity and response statistics (METHODS §16)."""
  mask_NxT = batch["completion_mask_NxT"]
  gap_NxT = jnp.abs(logps_NxT - batch["sample_logps_NxT"])
  valid_N = batch["group_ids_N"] >= 0
  lengths_N = jnp.sum(mask_NxT, axis=1).astype(jnp.float32)
  return {
      "rollout/logp_gap_mean": _masked_mean(gap_NxT, mask_NxT),
      "rollout/logp_gap_max": jnp.max(jnp.where(mask_NxT > 0, gap_NxT, 0.0)),
      "reward/mean": _masked_mean(batch["rewards_N"], valid_N),
      "response/len_mean": _masked_mean(lengths_N, valid_N),
  }


def make_update_step(graphdef, optimizer: optax.GradientTransformation, cfg, mesh,
                     state_shardings, prompt_len: int):
  """Returns ``update(state, batch) -> (state, metrics)``, jitted with donated state."""
  temperature = float(cfg.sampling.temperature)

  def completion_logps(params, batch):
    logps_NxL = models.token_logps(graphdef, params, batch["tokens_NxL"],
                                   batch["input_mask_NxL"], temperature)
    return logps_NxL[:, prompt_len:]

  def update(state, batch):
    keys = step_keys(state["rng"], state["step"])
    advantages_N, anchor, adv_aux = adv_lib.compute(
        batch["rewards_N"], batch["group_ids_N"], batch["subgroup_ids_N"], cfg, state["anchor"],
        keys["advantage"])
    mask_NxT = batch["completion_mask_NxT"]
    denoms = loss_lib.denominators(mask_NxT, cfg.loss)

    def loss_fn(params):
      logps_NxT = completion_logps(params, batch)
      # One on-policy update per batch: the old policy is the current one, so the ratio is 1
      # exactly (METHODS §15) and only its gradient matters.
      old_logps_NxT = jax.lax.stop_gradient(logps_NxT)
      loss, aux = loss_lib.policy_loss(logps_NxT, old_logps_NxT, advantages_N, mask_NxT, cfg.loss,
                                       denoms)
      return loss, (aux, logps_NxT)

    (loss, (loss_aux, logps_NxT)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
        state["params"])
    updates, opt_state = optimizer.update(grads, state["opt_state"], state["params"])
    params = optax.apply_updates(state["params"], updates)
    metrics = {
        "loss/total": loss,
        "grad/norm": optax.global_norm(grads),
        "update/norm": optax.global_norm(updates),
        "params/norm": optax.global_norm(params),
        **loss_aux,
        **adv_aux,
        **rollout_metrics(batch, jax.lax.stop_gradient(logps_NxT)),
    }
    new_state = dict(state, params=params, opt_state=opt_state, anchor=anchor,
                     step=state["step"] + 1)
    return new_state, metrics

  batch_sharding = shard_lib.batch_sharding(mesh)
  return jax.jit(update, in_shardings=(state_shardings, batch_sharding),
                 out_shardings=(state_shardings, shard_lib.replicated(mesh)), donate_argnums=0)
