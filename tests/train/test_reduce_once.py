"""Micro-batched gradients of replicated parameters all-reduced once per optimizer step
(``microbatch.accumulate_grads`` with a mesh): the same sums as the partitioner's reduction per
part and as the whole batch, no all-reduce left inside the accumulation loop, and the update
equal to one device's on every mesh (split parameters keep the partitioner's reductions)."""

import dataclasses
import functools
import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from grpo_jax import data, models
from grpo_jax import sharding as shard_lib
from grpo_jax.config import files as config_file
from grpo_jax.train import microbatch
from grpo_jax.train.state import init_state
from grpo_jax.train.update import make_update_step

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _toy_loss(params, rows):
  """A row-additive loss with a scalar aux and a per-row output, nonlinear in the params."""
  h_NxH = jnp.tanh(rows["x_NxD"] @ params["w_DxH"] + params["b_H"])
  err_N = h_NxH.sum(-1) - rows["y_N"]
  loss = jnp.sum(err_N**2) / 64.0
  return loss, ({"abs_err": jnp.sum(jnp.abs(err_N))}, {"err_N": err_N})


def _toy(mesh_shape):
  mesh = shard_lib.make_mesh(_mesh_cfg(*mesh_shape))
  rng = np.random.default_rng(0)
  params = {"w_DxH": rng.normal(size=(5, 3)), "b_H": rng.normal(size=3)}
  rows = {"x_NxD": rng.normal(size=(64, 5)), "y_N": rng.normal(size=64)}
  params = jax.device_put(jax.tree.map(np.float32, params), shard_lib.replicated(mesh))
  rows = jax.device_put(jax.tree.map(np.float32, rows), shard_lib.batch_sharding(mesh))
  return mesh, params, rows


def _mesh_cfg(data, fsdp, tensor):
  mesh = config_file.load(str(ROOT / "configs/tiny_test.py")).mesh
  return dataclasses.replace(mesh, data=data, fsdp=fsdp, tensor=tensor)


def _accumulated(mesh, params, rows, k, reduce_mesh):
  blocks = microbatch.row_blocks(64, k, shard_lib.batch_size_multiple(mesh))
  fn = jax.jit(lambda p, r: microbatch.accumulate_grads(_toy_loss, p, r, k, blocks, reduce_mesh))
  return fn, jax.device_get(fn(params, rows))


@pytest.mark.parametrize("mesh_shape", [(8, 1, 1), (4, 2, 1), (2, 2, 2)])
def test_one_reduction_gives_the_whole_batch_sums(mesh_shape, rel_diff):
  mesh, params, rows = _toy(mesh_shape)
  (loss, (aux, per_row)), grads = jax.device_get(
    jax.value_and_grad(_toy_loss, has_aux=True)(params, rows)
  )
  for reduce_mesh in (mesh, None):
    _, ((l_k, aux_k, per_row_k), grads_k) = _accumulated(mesh, params, rows, 4, reduce_mesh)
    np.testing.assert_allclose(l_k, loss, rtol=1e-6)
    np.testing.assert_allclose(aux_k["abs_err"], aux["abs_err"], rtol=1e-6)
    np.testing.assert_allclose(per_row_k["err_N"], per_row["err_N"], atol=1e-6)  # row order
    assert rel_diff(grads, grads_k) < 1e-6


def _computations(hlo: str) -> dict[str, str]:
  """Computation name -> its text, from an HLO module's text."""
  comps, name = {}, None
  for line in hlo.splitlines():
    head = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
    if head:
      name = head.group(1)
      comps[name] = ""
    elif name is not None:
      comps[name] += line + "\n"
  return comps


def _loop_all_reduces(hlo: str) -> int:
  """All-reduces inside while-loop bodies (and what the bodies call), in compiled HLO text."""
  comps = _computations(hlo)
  called = lambda text: re.findall(r"(?:body|calls|to_apply)=%?([\w.\-]+)", text)
  seen, todo = set(), [b for text in comps.values() for b in re.findall(r"body=%?([\w.\-]+)", text)]
  while todo:
    name = todo.pop()
    if name not in seen and name in comps:
      seen.add(name)
      todo += called(comps[name])
  return sum(len(re.findall(r"all-reduce(?:-start)?\(", comps[n])) for n in seen)


def test_the_accumulation_loop_holds_no_all_reduce():
  """Partitioner's reduction: one all-reduce per part, inside the scan; with the mesh: none
  inside, one after. The test fails if the reduction moves back into the loop."""
  mesh, params, rows = _toy((8, 1, 1))
  counts = {}
  for label, reduce_mesh in {"once": mesh, "per_part": None}.items():
    fn, _ = _accumulated(mesh, params, rows, 4, reduce_mesh)
    hlo = fn.lower(params, rows).compile().as_text()
    counts[label] = (_loop_all_reduces(hlo), len(re.findall(r"all-reduce(?:-start)?\(", hlo)))
  assert counts["per_part"][0] >= 1, counts
  assert counts["once"][0] == 0 and counts["once"][1] >= 1, counts


def test_the_single_reduction_needs_one_row_block_per_device():
  assert not microbatch.reduce_once_applies(None, 8)
  mesh = shard_lib.make_mesh(_mesh_cfg(4, 2, 1))
  assert microbatch.reduce_once_applies(mesh, 8)
  assert not microbatch.reduce_once_applies(mesh, 1)  # parts cross the device blocks
  assert not microbatch.reduce_once_applies(shard_lib.make_mesh(_mesh_cfg(1, 1, 8)), 1)


def test_split_axes_names_the_axes_parameters_are_split_over():
  mesh = shard_lib.make_mesh(_mesh_cfg(2, 2, 2))
  tree = {
    "w": NamedSharding(mesh, P("fsdp", "tensor")),
    "b": shard_lib.replicated(mesh),
    "rows": NamedSharding(mesh, P(("data", "fsdp"))),
  }
  assert shard_lib.split_axes(tree) == {"data", "fsdp", "tensor"}
  assert shard_lib.split_axes({"b": tree["b"]}) == set()
  one = shard_lib.make_mesh(_mesh_cfg(8, 1, 1))  # an axis of size 1 splits nothing
  assert shard_lib.split_axes({"w": NamedSharding(one, P("fsdp", "tensor"))}) == set()


# Micro-batches of 4 rows (one per device and part on 8 devices), shared prompts, KL.
OVERRIDES = ("loss.micro_batch_size=4", "loss.share_prompt=true", "loss.kl_coef=0.05")


@functools.cache
def _sgd_step(shape, rules, load_cfg, synthetic_batch, run_update):
  """(gradient θ0 − θ1 of one SGD-rate-1 update, metrics, axes the parameters are split over)
  on a data × fsdp × tensor mesh of ``shape``, the state placed by the preset ``rules``, over
  a synthetic batch whose groups of 4 rows share their prompt."""
  mesh_keys = (f"mesh.{a}={n}" for a, n in zip(shard_lib.AXES, shape))
  cfg = load_cfg((*OVERRIDES, *mesh_keys, f"mesh.train_rules={rules}"))
  mesh = shard_lib.make_mesh(cfg.mesh, jax.devices()[: int(np.prod(shape))])
  task = data.build_task(cfg)
  model_cfg = models.ModelConfig.from_config(cfg.model, vocab_size=len(task.tokenizer))
  graphdef, params = models.init_params(model_cfg, cfg.seed)
  state = init_state(params, optax.sgd(1.0), cfg)
  shardings = shard_lib.state_shardings(state, mesh, rules)
  state = shard_lib.place(state, shardings)
  update = make_update_step(graphdef, optax.sgd(1.0), cfg, mesh, shardings, task.prompt_len)
  batch = synthetic_batch(cfg, task)
  P_len = task.prompt_len
  batch.tokens_NxL[:, :P_len] = np.repeat(batch.tokens_NxL[::4, :P_len], 4, axis=0)
  new_state, metrics = run_update(update, state, batch, mesh)
  grads = jax.tree.map(lambda a, b: a - b, jax.device_get(state.params), new_state.params)
  return grads, metrics, shard_lib.split_axes(shardings.params)


@pytest.mark.parametrize(
  "shape, rules, split",
  [
    ((8, 1, 1), "train", set()),  # the default mesh: reduced once
    ((4, 2, 1), "replicated", set()),  # rows over data × fsdp: reduced once
    ((2, 2, 2), "train", {"fsdp", "tensor"}),  # split parameters: reduced per micro-batch
  ],
)
def test_update_on_each_mesh_equals_one_device(
  shape, rules, split, rel_diff, load_cfg, synthetic_batch, run_update
):
  """One SGD step agrees with one device's, whichever reduction the mesh gets."""
  kit = (load_cfg, synthetic_batch, run_update)
  g1, m1, _ = _sgd_step((1, 1, 1), "train", *kit)
  g8, m8, split_axes = _sgd_step(shape, rules, *kit)
  assert split_axes == split
  assert rel_diff(g1, g8) < 1e-5
  for key in ("loss/total", "grad/norm", "loss/kl"):
    np.testing.assert_allclose(m8[key], m1[key], rtol=1e-5, atol=1e-8)
