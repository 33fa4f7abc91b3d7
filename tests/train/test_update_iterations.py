"""μ = num_iterations × num_minibatches optimizer steps per batch (METHODS §4 statement 15): the
μ = 1 path is the plain on-policy step, and with μ > 1 the old log-probs are fixed before the
first step."""

import jax
import numpy as np
import optax
import pytest

from grpo_jax import advantages as adv_lib
from grpo_jax import losses as loss_lib
from grpo_jax import models
from grpo_jax.train.state import step_keys


def plain_update(graphdef, optimizer, cfg, prompt_len):
  """The one-step on-policy update written out directly (old = stop_gradient(current))."""

  def update(state, batch):
    keys = step_keys(state.rng, state.step)
    adv_N, _, _ = adv_lib.compute(
      batch.rewards_N,
      batch.group_ids_N,
      batch.subgroup_ids_N,
      cfg.advantage,
      cfg.hadw,
      state.anchor,
      keys["advantage"],
    )
    mask_NxT = batch.completion_mask_NxT
    denoms = loss_lib.denominators(mask_NxT, cfg.loss)

    def loss_fn(params):
      logps_NxT = models.token_logps(
        graphdef, params, batch.tokens_NxL, batch.input_mask_NxL, cfg.sampling.temperature
      )
      logps_NxT = logps_NxT[:, prompt_len:]
      return loss_lib.policy_loss(
        logps_NxT, jax.lax.stop_gradient(logps_NxT), adv_N, mask_NxT, cfg.loss, denoms
      )

    (loss, _), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    updates, _ = optimizer.update(grads, state.opt_state, state.params)
    return optax.apply_updates(state.params, updates), loss

  return jax.jit(update)


def test_one_step_path_is_the_plain_on_policy_step(update_setup, synthetic_batch, run_update):
  cfg, mesh, task, graphdef, state, update = update_setup()
  batch = synthetic_batch(cfg, task)
  batch = batch.replace(loss_mask_N=None)  # every row in the loss
  new_state, metrics = run_update(update, state, batch, mesh)
  from grpo_jax.train.optimizer import make_optimizer

  params, loss = plain_update(graphdef, make_optimizer(cfg.optimizer), cfg, task.prompt_len)(
    state, batch.to_device(mesh)
  )
  # Two separately compiled programs: equal up to float32 rounding (fusion and summation order
  # may differ between them, and do on some CPUs), not bit for bit.
  for a, b in zip(jax.tree.leaves(jax.device_get(params)), jax.tree.leaves(new_state.params)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(metrics["loss/total"], float(loss), rtol=1e-5, atol=1e-7)
  assert metrics["ratio/mean"] == 1.0 and metrics["ppo_kl"] == 0.0
  assert metrics["update/steps"] == 1.0


def test_second_iteration_uses_the_old_log_probs_of_the_first(
  update_setup, synthetic_batch, run_update, completion_logps, rel_diff
):
  """μ = 2: step 1 is on-policy (ppo_kl 0); step 2 sees ratio π_θ1/π_θ0, so the logged mean
  ppo_kl is ½·mean(logπ_θ0 − logπ_θ1) with θ1 the one-step result."""
  cfg, mesh, task, graphdef, state, update = update_setup()
  batch = synthetic_batch(cfg, task)
  one, m_one = run_update(update, state, batch, mesh)
  _, mesh2, _, _, state2, update2 = update_setup(("loss.num_iterations=2",))
  two, m_two = run_update(update2, state2, batch, mesh2)

  mask_NxT = (batch.completion_mask_NxT * batch.loss_mask_N[:, None]) > 0
  logp0 = completion_logps(graphdef, state.params, batch, cfg, task)
  logp1 = completion_logps(graphdef, one.params, batch, cfg, task)
  kl_step2 = np.sum(np.where(mask_NxT, logp0 - logp1, 0.0)) / mask_NxT.sum()
  assert abs(kl_step2) > 1e-6
  np.testing.assert_allclose(m_two["ppo_kl"], 0.5 * kl_step2, rtol=2e-2)
  assert m_two["ratio/mean"] != 1.0 and m_one["ratio/mean"] == 1.0
  assert m_two["update/steps"] == 2.0
  # A second step moved the parameters further.
  assert rel_diff(one.params, two.params) > 1e-6
  # The logged sampler gap uses the pre-update log-probs in both paths.
  np.testing.assert_allclose(
    m_two["rollout/logp_gap_mean"], m_one["rollout/logp_gap_mean"], rtol=1e-5
  )


@pytest.mark.slow
def test_minibatches_change_the_update(update_setup, synthetic_batch, run_update, rel_diff):
  batch = synthetic_batch()
  results = []
  for overrides in (
    (),
    ("loss.num_minibatches=2",),
    ("loss.num_minibatches=2", "loss.num_iterations=2"),
  ):
    _, mesh, _, _, state, update = update_setup(overrides)
    new_state, metrics = run_update(update, state, batch, mesh)
    results.append((new_state.params, metrics))
  (p1, m1), (p2, m2), (p4, m4) = results
  assert rel_diff(p1, p2) > 1e-6 and rel_diff(p2, p4) > 1e-6
  assert m1["update/steps"] == 1 and m2["update/steps"] == 2 and m4["update/steps"] == 4
  assert m2["ppo_kl"] != 0.0 and m4["ppo_kl"] != 0.0
