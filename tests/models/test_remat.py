"""model.remat: same loss and gradients as no remat, fewer live activations in the backward."""

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import config as config_lib
from grpo_jax import models

CFG = models.ModelConfig(
  vocab_size=64, hidden_dim=32, num_layers=3, num_heads=4, num_kv_heads=2, head_dim=8, mlp_dim=64
)


def _loss_and_grad(remat):
  graphdef, params = models.init_params(dataclasses.replace(CFG, remat=remat), 0)
  tokens_BxL = jax.random.randint(jax.random.PRNGKey(1), (4, 24), 0, 64)
  mask_BxL = jnp.ones_like(tokens_BxL)

  def loss(p):
    return -jnp.mean(models.token_logps(graphdef, p, tokens_BxL, mask_BxL))

  return jax.value_and_grad(loss)(params), str(jax.make_jaxpr(jax.grad(loss))(params))


@pytest.mark.parametrize("remat", ["full", "dots"])
def test_remat_keeps_loss_and_gradients(remat):
  ((l0, g0), _), ((l1, g1), _) = _loss_and_grad("none"), _loss_and_grad(remat)
  np.testing.assert_allclose(l1, l0, rtol=1e-6)
  for a, b in zip(jax.tree.leaves(g0), jax.tree.leaves(g1)):
    np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-7)


def test_remat_recomputes_in_the_backward_pass():
  (_, plain), (_, remat) = _loss_and_grad("none"), _loss_and_grad("full")
  # One checkpoint region per layer in the rematerialised graph, none in the plain one.
  regions = lambda jaxpr: len(re.findall(r"\b(?:checkpoint|remat2?)\[", jaxpr))
  assert regions(plain) == 0
  assert regions(remat) == CFG.num_layers


def test_remat_key_reaches_the_model_and_rejects_unknown_values():
  cfg = config_lib.base_config()
  cfg.model.remat = "full"
  assert models.ModelConfig.from_config(cfg.model, vocab_size=20).remat == "full"
  graphdef, params = models.init_params(dataclasses.replace(CFG, remat="bogus"), 0)
  with pytest.raises(ValueError, match="model.remat"):
    models.token_logps(graphdef, params, jnp.ones((1, 4), jnp.int32), jnp.ones((1, 4)))
