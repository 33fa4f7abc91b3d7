"""model.remat on a TPU compile target (libtpu, no TPU needed): ``jax.grad`` of a 4-layer
model's loss compiles for a v5e 2×2 slice under every policy; ``full`` needs fewer temporary
bytes than ``none``, and ``offload`` puts saved layer inputs in host memory."""

import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from grpo_jax import models
from grpo_jax import sharding as shard_lib
from grpo_jax.models.remat import REMAT_CHOICES
from grpo_jax.sharding import rules

try:
  import libtpu  # noqa: F401
except ImportError:
  pytest.skip(
    "compiling for a TPU topology needs libtpu (the [tpu] extra)", allow_module_level=True
  )

pytestmark = pytest.mark.slow

# Rows × length large enough that XLA:TPU keeps activations in HBM temporaries (at 16 × 256
# it reports 0 temporary bytes for every policy).
CFG = models.ModelConfig(
  vocab_size=512,
  hidden_dim=256,
  num_layers=4,
  num_heads=4,
  num_kv_heads=2,
  head_dim=64,
  mlp_dim=768,
  scan_layers=True,
)
B, L = 16, 512


@pytest.fixture(scope="module")
def mesh():
  from jax.experimental import topologies  # noqa: PLC0415

  # Another process compiling for a TPU at the same time holds libtpu's lockfile otherwise.
  os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
  devices = topologies.get_topology_desc(platform="tpu", topology_name="v5e:2x2").devices
  return Mesh(np.array(devices).reshape(2, 2, 1), shard_lib.AXES)


def _memory(mesh, remat: str):
  cfg = dataclasses.replace(CFG, remat=remat)
  graphdef, abstract = models.abstract_params(cfg)
  shardings = rules.tree_shardings(abstract, rules.TRAIN, mesh)
  params = jax.tree.map(
    lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, shardings
  )
  rows = NamedSharding(mesh, P(("data", "fsdp")))
  tokens = jax.ShapeDtypeStruct((B, L), jnp.int32, sharding=rows)
  loss = lambda p, t: -jnp.mean(models.token_logps(graphdef, p, t, jnp.ones_like(t)))
  with jax.set_mesh(mesh):
    compiled = jax.jit(jax.grad(loss)).lower(params, tokens).compile()
  return compiled.memory_analysis()


@pytest.fixture(scope="module")
def memory(mesh):
  return {remat: _memory(mesh, remat) for remat in REMAT_CHOICES}


def test_every_policy_compiles_and_full_needs_fewer_temporaries(memory):
  temp = {name: m.temp_size_in_bytes for name, m in memory.items()}
  assert temp["none"] > 0
  assert temp["full"] < temp["none"] / 2, temp
  assert temp["dots_with_no_batch_dims_saveable"] < temp["none"], temp
  assert temp["offload"] <= temp["full"], temp


def test_offload_saves_layer_inputs_in_host_memory(memory):
  host = {name: m.host_temp_size_in_bytes for name, m in memory.items()}
  # One (rows per device × L × D) float32 layer input per layer: 4 × 4 × 512 × 256 × 4 bytes.
  assert host["offload"] >= CFG.num_layers * (B // 4) * L * CFG.hidden_dim * 4, host
  assert all(v == 0 for name, v in host.items() if name != "offload"), host
