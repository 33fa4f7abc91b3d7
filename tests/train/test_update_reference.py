"""The reference model: frozen, present only with loss.kl_coef != 0, run inside the update;
with kl_coef = 0 no reference forward pass is traced at all. Entropy wiring."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import models
from grpo_jax.train.state import init_state


def forward_count(monkeypatch, overrides, update_setup, synthetic_batch):
  """How many model forward passes the update traces (lowered, not compiled)."""
  calls = []
  real = models.token_logps

  def counting(*args, **kwargs):
    calls.append(kwargs.get("with_entropy", False))
    return real(*args, **kwargs)

  monkeypatch.setattr(models, "token_logps", counting)
  cfg, mesh, task, _, state, update = update_setup.__wrapped__(tuple(overrides))
  batch = synthetic_batch(cfg, task).to_device(mesh)
  update.lower(state, batch)
  return len(calls), state.ref_params is not None


@pytest.mark.parametrize(
  "overrides,expected",
  [
    ((), (1, False)),
    (("loss.kl_coef=0.1",), (2, True)),
    (("loss.num_iterations=2",), (2, False)),  # old log-probs + the loss
    (("loss.num_iterations=2", "loss.kl_coef=0.1"), (3, True)),
  ],
)
def test_reference_forward_only_with_kl(
  monkeypatch, overrides, expected, update_setup, synthetic_batch
):
  assert forward_count(monkeypatch, overrides, update_setup, synthetic_batch) == expected


def test_reference_is_a_frozen_copy_and_kl_grows(update_setup, synthetic_batch, fresh):
  cfg, mesh, task, graphdef, state, update = update_setup(("loss.kl_coef=0.1",))
  batch = synthetic_batch(cfg, task)
  theta0 = jax.device_get(state.params)
  assert all(
    np.array_equal(a, b) for a, b in zip(jax.tree.leaves(theta0), jax.tree.leaves(state.ref_params))
  )
  sharded = batch.to_device(mesh)
  s1, m1 = update(fresh(state), sharded)
  theta1 = jax.device_get(s1.params)
  s2, m2 = update(s1, sharded)
  m1, m2 = jax.device_get(m1), jax.device_get(m2)
  assert abs(float(m1["loss/kl"])) < 1e-9  # the policy starts at the reference
  # Step 2's KL is k3 of log π_θ1 − log π_ref, token mean over the loss mask.
  mask = (batch.completion_mask_NxT * batch.loss_mask_N[:, None]) > 0
  lp = lambda p: np.asarray(
    models.token_logps(
      graphdef, p, jnp.asarray(batch.tokens_NxL), jnp.asarray(batch.input_mask_NxL)
    ),
    np.float64,
  )[:, task.prompt_len :]
  delta = np.clip(lp(theta1) - lp(theta0), -10, 10)
  k3 = np.sum(np.where(mask, np.exp(-delta) + delta - 1, 0.0)) / mask.sum()
  assert k3 > 0
  np.testing.assert_allclose(float(m2["loss/kl"]), k3, rtol=1e-2)
  for a, b in zip(jax.tree.leaves(theta0), jax.tree.leaves(jax.device_get(s2.ref_params))):
    np.testing.assert_array_equal(a, b)  # frozen


def test_no_reference_without_kl(load_cfg):
  cfg = load_cfg()
  params = {"w": jnp.ones(3)}
  import optax

  assert init_state(params, optax.sgd(1.0), cfg).ref_params is None


def test_entropy_metric_and_bonus(update_setup, synthetic_batch, fresh):
  """coef 0: loss/entropy is the sample estimate mean(−logπ(y_t)); coef ≠ 0: the exact
  entropy of the tempered distribution, and the bonus changes the update."""
  batch = synthetic_batch()
  out = {}
  for coef in ("0.0", "0.5"):
    cfg, mesh, task, graphdef, state, update = update_setup((f"loss.entropy_coef={coef}",))
    new_state, metrics = update(fresh(state), batch.to_device(mesh))
    out[coef] = (jax.device_get(new_state.params), jax.device_get(metrics))
  logp, ent = models.token_logps(
    graphdef,
    state.params,
    jnp.asarray(batch.tokens_NxL),
    jnp.asarray(batch.input_mask_NxL),
    with_entropy=True,
  )
  mask = (batch.completion_mask_NxT * batch.loss_mask_N[:, None]) > 0
  mean = lambda x: np.sum(np.where(mask, np.asarray(x)[:, task.prompt_len :], 0)) / mask.sum()
  np.testing.assert_allclose(float(out["0.0"][1]["loss/entropy"]), mean(-logp), rtol=1e-5)
  np.testing.assert_allclose(float(out["0.5"][1]["loss/entropy"]), mean(ent), rtol=1e-5)
  assert not np.allclose(mean(-logp), mean(ent), rtol=1e-3)
  p0, p5 = jax.tree.leaves(out["0.0"][0]), jax.tree.leaves(out["0.5"][0])
  assert any(not np.allclose(a, b, rtol=1e-6, atol=1e-9) for a, b in zip(p0, p5))
