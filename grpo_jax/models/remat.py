"""``model.remat``: what a decoder layer keeps for the backward pass, by name.

  none                              keep everything (no ``jax.checkpoint``)
  full                              keep only the layer's input; recompute the rest
  dots_saveable                     also keep every matmul output (attention's batched ones too)
  dots_with_no_batch_dims_saveable  also keep the projections' outputs (not attention's
                                    per-head batched products)
  offload                           keep nothing on the device: the layer's input is moved to
                                    host memory (``pinned_host``) in the forward pass and back
                                    in the backward pass, the rest recomputed

``offload`` names the layer input with ``checkpoint_name(LAYER_INPUT)`` (``named_input``) and
uses ``save_and_offload_only_these_names``. On TPU / GPU the saved inputs then live in host
RAM; on CPU (JAX 0.10.2 gives CPU devices a ``pinned_host`` memory space too) the program
compiles and runs with the same numbers, but host and device are the same RAM: no saving.
Sampling never remats.
"""

from __future__ import annotations

import jax
from jax.ad_checkpoint import checkpoint_name

LAYER_INPUT = "decoder_layer_input"

_cp = jax.checkpoint_policies
REMAT_POLICIES = {
  "full": _cp.nothing_saveable,
  "dots_saveable": _cp.dots_saveable,
  "dots_with_no_batch_dims_saveable": _cp.dots_with_no_batch_dims_saveable,
  "offload": _cp.save_and_offload_only_these_names(
    names_which_can_be_saved=[],
    names_which_can_be_offloaded=[LAYER_INPUT],
    offload_src="device",
    offload_dst="pinned_host",
  ),
}
REMAT_CHOICES = ("none", *REMAT_POLICIES)
AUTO = "auto"  # model.remat = "auto": picked at load by the loop (grpo_jax.train.autofit)


def built(name: str) -> str:
  """The remat a model is built with: "auto" unresolved builds as "none", the first value auto
  tries; the loop rebuilds the graphdef with the one it picks."""
  return "none" if name == AUTO else name


def remat_policy(name: str):
  """The ``jax.checkpoint`` policy of ``model.remat = name`` (not "none")."""
  if name not in REMAT_POLICIES:
    raise ValueError(f"model.remat must be one of {list(REMAT_CHOICES)}, got '{name}'")
  return REMAT_POLICIES[name]


def named_input(x_BxLxD: jax.Array) -> jax.Array:
  """The layer input under the name ``offload`` moves to the host; every later use inside the
  layer reads this value, so the unnamed input is not kept besides it."""
  return checkpoint_name(x_BxLxD, LAYER_INPUT)
