"""The train state: one plain pytree that is sharded, donated and checkpointed as a whole.

``{"params", "opt_state", "anchor", "step", "rng", "data_pos"}``: policy parameters (pure dict of
arrays), optax state, the HA-DW anchor state (METHODS §3), the number of RL updates done, the
run's base PRNG key (per-step keys are ``fold_in(rng, step)``, so a resumed run draws the same
numbers), and the position of the next training prompt in the task's stream.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from grpo_jax import advantages


def init_state(params, optimizer: optax.GradientTransformation, cfg) -> dict:
  return {
      "params": params,
      "opt_state": optimizer.init(params),
      "anchor": advantages.init_anchor(cfg),
      "step": jnp.zeros((), jnp.int32),
      "rng": jax.random.PRNGKey(cfg.seed),
      "data_pos": jnp.zeros((), jnp.int32),
  }


def step_keys(rng, step: int) -> dict[str, jax.Array]:
  """Independent keys for one RL step, a pure function of (run key, step)."""
  key = jax.random.fold_in(rng, step)
  sample, adv, evaluation = jax.random.split(key, 3)
  return {"sample": sample, "advantage": adv, "eval": evaluation}
