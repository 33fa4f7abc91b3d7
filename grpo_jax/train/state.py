"""The train state: one typed pytree that is sharded, donated and checkpointed as a whole.

:class:`TrainState` holds the policy parameters (pure dict of arrays), the optax state, the HA-DW
anchor state (METHODS §3), the number of RL updates done, the run's base PRNG key (per-step keys
are ``fold_in(rng, step)``, so a resumed run draws the same numbers) and the position of the
next training prompt in the task's stream. With ``loss.kl_coef != 0`` also ``ref_params``: a
frozen copy of the initial policy (the reference of the KL penalty, METHODS §4), sharded like
``params`` and checkpointed with them; without KL it is None and no reference forward pass
exists. The reference's matrices are stored in the compute dtype (``models.compute_params``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from grpo_jax import advantages
from grpo_jax.models import lora
from grpo_jax.models.transformer import compute_params


@struct.dataclass
class TrainState:
  params: Any
  opt_state: Any
  anchor: dict
  step: jax.Array  # int32 scalar: RL updates done
  rng: jax.Array  # the run's base key
  data_pos: jax.Array  # int32 scalar: the next training prompt's position
  ref_params: Any = None  # loss.kl_coef != 0 without LoRA only
  base: Any = None  # LoRA: the frozen base in the compute dtype (``params`` are the adapters)

  def to_dict(self) -> dict:
    """The fields a checkpoint stores, by name (one item per field): those that are set, but
    never the frozen LoRA base, which is the model as built."""
    out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "base"}
    return {k: v for k, v in out.items() if v is not None}

  @classmethod
  def from_dict(cls, d: dict) -> TrainState:
    return cls(**d)


def init_state(params, optimizer: optax.GradientTransformation, e) -> TrainState:
  """The state before the first step of experiment ``e`` (its seed, ``hadw``, ``loss`` and
  ``model`` groups). With LoRA (``model.lora.rank`` > 0, METHODS §9) the trained ``params`` are
  the adapters (A random, B zero, float32) and the base is kept frozen in the compute dtype, with
  no optimizer moments of its own; the KL reference is the base itself."""
  spec = lora.LoraSpec.from_config(e.model.lora)
  trained, base, ref_params = params, None, None
  if spec is not None:
    key = jax.random.fold_in(jax.random.PRNGKey(e.seed), LORA_KEY)
    trained = lora.init_adapters(params, spec.rank, spec.targets, key)
    base = compute_params(params, e.model.dtype)
  elif uses_reference(e):
    # A copy, not an alias: the update donates the state, and one buffer may not be donated
    # twice. Frozen, so its matrices are kept as the forward pass reads them (float32 masters
    # with bf16 compute: a bf16 reference, same log-probs, half the bytes).
    ref_params = jax.tree.map(jnp.copy, compute_params(params, e.model.dtype))
  return TrainState(
    params=trained,
    opt_state=optimizer.init(trained),
    anchor=advantages.init_anchor(e.hadw),
    step=jnp.zeros((), jnp.int32),
    rng=jax.random.PRNGKey(e.seed),
    data_pos=jnp.zeros((), jnp.int32),
    ref_params=ref_params,
    base=base,
  )


def uses_reference(e) -> bool:
  """Whether the run keeps a copy of the initial policy as its KL reference (``loss.kl_coef !=
  0``; with LoRA the frozen base is the reference, no copy)."""
  return e.loss.kl_coef != 0.0 and not e.model.lora.rank


# The fold of the run's key that draws the LoRA A matrices (never a step key: steps fold 0, 1, …).
LORA_KEY = 2**31 - 2


def step_keys(rng, step: int) -> dict[str, jax.Array]:
  """Independent keys for one RL step, a pure function of (run key, step)."""
  key = jax.random.fold_in(rng, step)
  sample, adv, evaluation = jax.random.split(key, 3)
  # A fold, not a fourth split: the other keys stay those of runs before it existed.
  control = jax.random.fold_in(key, 1)
  return {"sample": sample, "advantage": adv, "eval": evaluation, "control": control}
