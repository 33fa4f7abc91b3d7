"""LoRA under FSDP × TP on 8 simulated CPU devices (fsdp 2 × tensor 4): each adapter is split as
its kernel (A's input axis as the kernel's rows, B's output axis as its columns, the rank whole),
and a loss of the unmerged policy with a KL-like term against the base view, and its gradient
w.r.t. the adapters, equal one device's."""

import dataclasses
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from test_lora import ALPHA, CFG, R, _random_b

from grpo_jax import models
from grpo_jax import sharding as shard_lib
from grpo_jax.models import lora


def _mesh():
  mesh_cfg = types.SimpleNamespace(data=1, fsdp=2, tensor=4)
  return shard_lib.make_mesh(mesh_cfg, jax.devices()[:8])


def _spec(*axes):
  """A PartitionSpec as ``rules.spec_for`` writes it: no trailing Nones."""
  while axes and axes[-1] is None:
    axes = axes[:-1]
  return P(*axes)


def _get(tree, path):
  for k in path:
    tree = tree[k]
  return tree


@pytest.mark.parametrize("scan", [False, True], ids=["unrolled", "stacked"])
def test_adapters_shard_as_their_kernels_and_the_step_equals_one_device(scan):
  assert len(jax.devices()) >= 8
  cfg = dataclasses.replace(CFG, vocab_size=64, scan_layers=scan)
  graphdef, params = models.init_params(cfg, 0)
  spec = lora.LoraSpec(R, ALPHA, ("all_linear",))
  adapters = _random_b(lora.init_adapters(params, R, spec.targets, jax.random.key(0)), scale=0.1)
  lm = lora.adapt(graphdef, params, spec)
  mesh = _mesh()
  p_shard = shard_lib.state_shardings(params, mesh, "train")
  a_shard = shard_lib.state_shardings(adapters, mesh, "train")

  lead = (None,) if scan else ()
  split = set()
  for path in lora.target_paths(params, spec.targets):
    module = path[:-1]
    kernel = tuple(_get(p_shard, path).spec) + (None,) * (2 + len(lead))
    a = _get(a_shard, (*module, lora.A)).spec
    b = _get(a_shard, (*module, lora.B)).spec
    d_in, d_out = kernel[len(lead)], kernel[len(lead) + 1]
    assert a == _spec(*lead, d_in, None), (module, a, kernel)
    assert b == _spec(*lead, None, d_out), (module, b, kernel)
    split |= {d_in, d_out} - {None}
  assert split == {"fsdp", "tensor"}  # the comparison below is over split adapters
  q = (*lora.target_paths(params, ("q",))[0][:-1], lora.A)
  assert _get(a_shard, q).spec == P(*lead, "fsdp")

  tokens = np.random.RandomState(0).randint(0, 64, (4, 10))
  mask = np.ones_like(tokens)
  mask[2, :4] = 0

  def loss_and_grads(params, adapters, tokens, mask):
    def loss(ad):
      logps = models.token_logps(*lm.view(params, ad), tokens, mask)
      ref = models.token_logps(*lm.view(params, ad, "base"), tokens, mask)
      return -jnp.mean(logps) + 0.1 * jnp.mean(jnp.square(logps - ref))

    return jax.value_and_grad(loss)(adapters)

  loss_1, grads_1 = jax.jit(loss_and_grads)(params, adapters, tokens, mask)
  rows = shard_lib.batch_sharding(mesh)
  with jax.set_mesh(mesh):
    step = jax.jit(loss_and_grads, out_shardings=(NamedSharding(mesh, P()), a_shard))
    loss_8, grads_8 = step(
      jax.device_put(params, p_shard),
      jax.device_put(adapters, a_shard),
      jax.device_put(tokens, rows),
      jax.device_put(mask, rows),
    )
  np.testing.assert_allclose(float(loss_8), float(loss_1), rtol=1e-5)
  flat_1 = np.concatenate([np.ravel(x) for x in jax.tree.leaves(grads_1)])
  flat_8 = np.concatenate([np.ravel(np.asarray(x)) for x in jax.tree.leaves(grads_8)])
  assert np.linalg.norm(flat_1) > 1e-3
  assert np.linalg.norm(flat_8 - flat_1) < 1e-5 * np.linalg.norm(flat_1)
  for kp, g in jax.tree_util.tree_flatten_with_path(grads_8)[0]:
    want = _get(a_shard, tuple(k.key for k in kp))
    assert g.sharding.is_equivalent_to(want, g.ndim), kp
