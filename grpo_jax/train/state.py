"""The train state: one plain pytree that is sharded, donated and checkpointed as a whole.

``{"params", "opt_state", "anchor", "step", "rng", "data_pos"}``: policy parameters (pure dict of
arrays), optax state, the HA-DW anchor state (METHODS §3), the number of RL updates done, the
run's base PRNG key (per-step keys are ``fold_in(rng, step)``, so a resumed run draws the same
numbers), and the position of the next training prompt in the task's stream. With
``loss.kl_coef != 0`` also ``ref_params``: a frozen copy of the initial policy (the reference of
the KL penalty, METHODS §4), sharded like ``params`` and checkpointed with them; without KL it
is absent and no reference forward pass exists. The reference's matrices are stored in the
compute dtype (``models.compute_params``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from grpo_jax import advantages
from grpo_jax.models.transformer import compute_params


def init_state(params, optimizer: optax.GradientTransformation, cfg) -> dict:
  state = {
    "params": params,
    "opt_state": optimizer.init(params),
    "anchor": advantages.init_anchor(cfg.hadw),
    "step": jnp.zeros((), jnp.int32),
    "rng": jax.random.PRNGKey(cfg.seed),
    "data_pos": jnp.zeros((), jnp.int32),
  }
  if uses_reference(cfg):
    # A copy, not an alias: the update donates the state, and one buffer may not be donated
    # twice. Frozen, so its matrices are kept as the forward pass reads them (float32 masters
    # with bf16 compute: a bf16 reference, same log-probs, half the bytes).
    ref_params = compute_params(params, cfg.model.dtype)
    state["ref_params"] = jax.tree.map(jnp.copy, ref_params)
  return state


def uses_reference(cfg) -> bool:
  """Whether the run keeps and runs a reference model (``loss.kl_coef != 0``)."""
  return cfg.loss.kl_coef != 0.0


def step_keys(rng, step: int) -> dict[str, jax.Array]:
  """Independent keys for one RL step, a pure function of (run key, step)."""
  key = jax.random.fold_in(rng, step)
  sample, adv, evaluation = jax.random.split(key, 3)
  # A fold, not a fourth split: the other keys stay those of runs before it existed.
  control = jax.random.fold_in(key, 1)
  return {"sample": sample, "advantage": adv, "eval": evaluation, "control": control}
