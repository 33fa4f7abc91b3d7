"""model.remat: every policy gives the loss and gradients of no remat (layers unrolled or
scanned), one checkpoint region per layer (or one inside the scan), and a bad value names the key
and the choices."""

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import config as config_lib
from grpo_jax import models
from grpo_jax.config import experiment
from grpo_jax.models.remat import REMAT_CHOICES

CFG = models.ModelConfig(
  vocab_size=64, hidden_dim=32, num_layers=3, num_heads=4, num_kv_heads=2, head_dim=8, mlp_dim=64
)
POLICIES = ["full", "dots_saveable", "dots_with_no_batch_dims_saveable", "offload"]


def _loss_and_grad(remat, scan_layers=False):
  cfg = dataclasses.replace(CFG, remat=remat, scan_layers=scan_layers)
  graphdef, params = models.init_params(cfg, 0)
  tokens_BxL = jax.random.randint(jax.random.PRNGKey(1), (4, 24), 0, 64)
  mask_BxL = jnp.ones_like(tokens_BxL)

  def loss(p):
    return -jnp.mean(models.token_logps(graphdef, p, tokens_BxL, mask_BxL))

  value_and_grad = jax.jit(jax.value_and_grad(loss))(params)
  return value_and_grad, str(jax.make_jaxpr(jax.grad(loss))(params))


def test_choices_are_the_config_keys():
  assert {*REMAT_CHOICES, "auto"} == set(experiment.CHOICES["model.remat"])  # auto: train.autofit
  assert set(REMAT_CHOICES) == {"none", *POLICIES}


@pytest.mark.parametrize("scan_layers", [False, True], ids=["unrolled", "scanned"])
@pytest.mark.parametrize("remat", POLICIES)
def test_remat_keeps_loss_and_gradients(remat, scan_layers):
  ((l0, g0), _), ((l1, g1), _) = (
    _loss_and_grad("none", scan_layers),
    _loss_and_grad(remat, scan_layers),
  )
  np.testing.assert_allclose(l1, l0, rtol=1e-6)
  for a, b in zip(jax.tree.leaves(g0), jax.tree.leaves(g1), strict=True):
    np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("scan_layers", [False, True], ids=["unrolled", "scanned"])
def test_remat_recomputes_in_the_backward_pass(scan_layers):
  (_, plain), (_, remat) = _loss_and_grad("none", scan_layers), _loss_and_grad("full", scan_layers)
  # One checkpoint region per layer in the rematerialised graph (one, inside the scan's body,
  # when scanned), none in the plain one.
  regions = lambda jaxpr: len(re.findall(r"\b(?:checkpoint|remat2?)\[", jaxpr))
  assert regions(plain) == 0
  assert regions(remat) == (1 if scan_layers else CFG.num_layers)


@pytest.mark.parametrize("scan_layers", [False, True], ids=["unrolled", "scanned"])
def test_offload_moves_the_layer_inputs_to_host_memory(scan_layers):
  """``offload`` names the layer input and the policy moves it to host memory in the forward
  pass and back in the backward pass (the vjp's ``device_put``s). XLA:CPU compiles and runs
  the transfers as copies within the same RAM (same numbers: the test above)."""

  def vjp_jaxpr(remat):
    cfg = dataclasses.replace(CFG, remat=remat, scan_layers=scan_layers)
    graphdef, params = models.init_params(cfg, 0)
    tokens_BxL = jnp.ones((2, 8), jnp.int32)
    loss = lambda p: jnp.mean(models.token_logps(graphdef, p, tokens_BxL, tokens_BxL))
    return str(jax.make_jaxpr(lambda p: jax.vjp(loss, p)[1](1.0))(params))

  full, offload = vjp_jaxpr("full"), vjp_jaxpr("offload")
  assert "MemorySpace.Host" in offload and "MemorySpace.Host" not in full


def test_remat_key_reaches_the_model_and_rejects_unknown_values():
  model = config_lib.defaults({"model.remat": "dots_saveable"}).model
  assert models.ModelConfig.from_config(model, vocab_size=20).remat == "dots_saveable"
  graphdef, params = models.init_params(dataclasses.replace(CFG, remat="bogus"), 0)
  with pytest.raises(ValueError, match="model.remat must be one of .*'offload'"):
    models.token_logps(graphdef, params, jnp.ones((1, 4), jnp.int32), jnp.ones((1, 4)))
