"""LoRA in the RL update (METHODS §9): only the adapters train and hold optimizer moments, the
base stays frozen in the compute dtype, the KL reference is the base with the adapters off, and
the first step's policy is the base exactly (B = 0), so its KL is 0."""

import jax
import numpy as np
import pytest

LORA = ("model.lora.rank=4", "model.lora.alpha=8", "loss.kl_coef=0.1")


def _leaf_names(tree):
  return {str(kp[-1].key) for kp, _ in jax.tree_util.tree_flatten_with_path(tree)[0]}


def _moved(before, after) -> dict:
  """{leaf name: whether every such leaf changed}."""
  out = {}
  flat = jax.tree_util.tree_flatten_with_path(jax.device_get(before))[0]
  for (kp, a), b in zip(flat, jax.tree.leaves(after)):
    name = str(kp[-1].key)
    out[name] = out.get(name, True) and not np.array_equal(a, b)
  return out


def test_the_state_trains_the_adapters_on_a_frozen_base(update_setup):
  cfg, _, _, _, state, _ = update_setup((*LORA, "model.dtype=bfloat16"))
  assert _leaf_names(state.params) == {"lora_a", "lora_b"}
  assert {x.dtype for x in jax.tree.leaves(state.params)} == {np.dtype(np.float32)}
  kernels = [
    x for kp, x in jax.tree_util.tree_flatten_with_path(state.base)[0] if "kernel" in str(kp)
  ]
  assert {x.dtype for x in kernels} == {np.dtype("bfloat16")}  # no float32 master of the base
  assert state.ref_params is None  # the reference is the base itself
  moments = {x.shape for x in jax.tree.leaves(state.opt_state) if x.ndim}
  assert moments <= {x.shape for x in jax.tree.leaves(state.params)}  # no moments of the base
  assert all(not np.any(np.asarray(b)) for b in jax.tree.leaves(state.params) if b.shape[-2] == 4)
  assert "base" not in state.to_dict()  # never checkpointed: the model as built


def test_an_update_moves_the_adapters_and_leaves_the_base(
  update_setup, synthetic_batch, run_update
):
  cfg, mesh, task, _, state, update = update_setup(LORA)
  batch = synthetic_batch(cfg, task)
  one, m1 = run_update(update, state, batch, mesh)
  for a, b in zip(jax.tree.leaves(jax.device_get(state.base)), jax.tree.leaves(one.base)):
    np.testing.assert_array_equal(a, b)  # frozen
  # Step 1: ∂A = (α/r)·G·Bᵀ = 0 at B = 0, so only B moves; step 2 moves A too.
  assert _moved(state.params, one.params) == {"lora_a": False, "lora_b": True}
  assert m1["loss/kl"] == 0.0  # B = 0: the policy is the base, KL(π‖base) is exactly 0
  two, m2 = run_update(update, one, batch, mesh)
  assert _moved(one.params, two.params) == {"lora_a": True, "lora_b": True}
  assert m2["loss/kl"] > 0.0  # the adapters moved the policy off the base
  # The KL term enters the loss: total = policy + β·KL − 0·entropy.
  assert m2["loss/total"] != m2["loss/policy"]
  assert m2["loss/total"] == pytest.approx(m2["loss/policy"] + 0.1 * m2["loss/kl"], rel=1e-6)


def test_rank_and_alpha_reach_the_update(update_setup, synthetic_batch, run_update):
  """The rank sets the adapters' width, alpha the step's effect on the policy (B moves the
  same at step 1; at step 2 the policy has moved by (α/r)·A·B)."""
  outs = {}
  for extra in (("model.lora.alpha=8",), ("model.lora.alpha=32",), ("model.lora.rank=2",)):
    overrides = ("model.lora.rank=4", "loss.kl_coef=0.1", *extra)
    cfg, mesh, task, _, state, update = update_setup(overrides)
    one, _ = run_update(update, state, synthetic_batch(cfg, task), mesh)
    _, m = run_update(update, one, synthetic_batch(cfg, task, seed=1), mesh)
    outs[extra] = m["loss/kl"]
    widths = {
      x.shape[-1]
      for kp, x in jax.tree_util.tree_flatten_with_path(state.params)[0]
      if "lora_a" in str(kp)
    }
    assert widths == {2 if "rank=2" in extra[0] else 4}
  assert len({round(v, 12) for v in outs.values()}) == 3
