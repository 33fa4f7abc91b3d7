"""Slice reads: ``read_slice(name, index)`` equals ``read(name)[index]`` (safetensors float32 and
bfloat16, GGUF), and loading onto a sharded 8-device mesh reads only slices, never a whole
tensor, yet gives the parameters of a replicated load."""

import dataclasses

import jax
import ml_dtypes
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding

from grpo_jax import models
from grpo_jax import sharding as shard_lib
from grpo_jax.models import gguf_io, hf_io, safetensors_io

SHAPE = (6, 10)
INDICES = {
  "axis0": (slice(2, 5), slice(None)),
  "axis1": (slice(None), slice(4, 8)),
  "both": (slice(3, 6), slice(0, 5)),
  "full": (slice(None), slice(None)),
  "empty_start": (slice(0, 0), slice(None)),
}


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
  """A checkpoint of a float32 and a bfloat16 6×10 tensor (values 0…59), plus a 1-D one."""
  directory = tmp_path_factory.mktemp("slices")
  values_6x10 = np.arange(60, dtype=np.float32).reshape(SHAPE)
  tensors = {
    "w32": values_6x10,
    "w16": values_6x10.astype(ml_dtypes.bfloat16),
    "bias": np.arange(7, dtype=np.float32),
  }
  specs = {name: (x.shape, x.dtype) for name, x in tensors.items()}
  safetensors_io.write_checkpoint(directory, specs, tensors.__getitem__)
  return safetensors_io.CheckpointReader(directory)


@pytest.mark.parametrize("name", ["w32", "w16"])
@pytest.mark.parametrize("index", INDICES.values(), ids=INDICES.keys())
def test_read_slice_equals_indexed_read(reader, name, index):
  want = reader.read(name)[index]
  got = reader.read_slice(name, index)
  assert got.dtype == want.dtype and got.shape == want.shape
  np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


def test_read_slice_of_a_vector(reader):
  np.testing.assert_array_equal(reader.read_slice("bias", (slice(3, 7),)), [3, 4, 5, 6])


def test_read_slice_is_a_private_copy(reader):
  part_2x10 = reader.read_slice("w32", (slice(0, 2), slice(None)))
  assert part_2x10.flags.writeable and part_2x10.base is None


def _save_tiny_model(directory):
  """(config, params) of a random untied model saved as a Hugging Face checkpoint."""
  cfg = models.ModelConfig(
    vocab_size=64,
    hidden_dim=32,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=8,
    mlp_dim=48,
    tie_embeddings=False,
  )
  graphdef, params = models.init_params(cfg, 3)
  models.save_hf(models.HFModel(graphdef, params, cfg), directory)
  return cfg, params


class _CountingReader(safetensors_io.CheckpointReader):
  """A reader that counts slice reads and fails on a whole-tensor read."""

  def __init__(self, directory):
    super().__init__(directory)
    self.slice_reads = []

  def read(self, name):
    raise AssertionError(f"tensor '{name}' was read whole")

  def read_slice(self, name, index):
    self.slice_reads.append((name, tuple((s.start, s.stop) for s in index)))
    return super().read_slice(name, index)


def test_sharded_load_reads_slices_and_equals_replicated(tmp_path):
  assert len(jax.devices()) == 8
  cfg, params = _save_tiny_model(tmp_path)
  mesh = Mesh(np.asarray(jax.devices()).reshape(2, 2, 2), shard_lib.AXES)  # data × fsdp × tensor
  shardings = shard_lib.state_shardings(models.abstract_params(cfg)[1], mesh, "train")
  split = [s for s in jax.tree.leaves(shardings) if not s.is_fully_replicated]
  assert len(split) > len(jax.tree.leaves(shardings)) // 2  # most tensors are split
  source = _CountingReader(tmp_path)
  _, sharded = hf_io.load_params(cfg, source, str(tmp_path), mesh, shardings)
  replicated = models.load_hf(str(tmp_path), mesh=mesh, tokenizer=False).params
  flat_sharded = jax.tree_util.tree_flatten_with_path(sharded)[0]
  flat_replicated = jax.tree_util.tree_flatten_with_path(replicated)[0]
  for (kp, a), (_, b), (_, init), s in zip(
    flat_sharded,
    flat_replicated,
    jax.tree_util.tree_flatten_with_path(params)[0],
    jax.tree.leaves(shardings),
  ):
    assert a.sharding == s, kp
    assert isinstance(b.sharding, NamedSharding) and b.sharding.is_fully_replicated, kp
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=str(kp))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(init), err_msg=str(kp))
  # The data axis replicates every shard over 2 devices: each distinct slice is read once.
  assert len(source.slice_reads) == len(set(source.slice_reads))
  names = {name for name, _ in source.slice_reads}
  assert len(names) == len(jax.tree.leaves(params))
  up = "model.layers.0.mlp.up_proj.weight"  # (mlp 48, embed 32): raw spec (tensor, fsdp)
  assert sorted(index for name, index in source.slice_reads if name == up) == [
    ((0, 24), (0, 16)),
    ((0, 24), (16, 32)),
    ((24, 48), (0, 16)),
    ((24, 48), (16, 32)),
  ]


def test_load_errors_still_name_the_tensor(tmp_path):
  cfg, _ = _save_tiny_model(tmp_path)
  mesh = Mesh(np.asarray(jax.devices()).reshape(2, 2, 2), shard_lib.AXES)
  source = _CountingReader(tmp_path)
  wrong = dataclasses.replace(cfg, mlp_dim=40)
  with pytest.raises(ValueError, match=r"'model\.layers\.0\.mlp\.down_proj\.weight'.*\(32, 48\)"):
    hf_io.load_params(wrong, source, str(tmp_path), mesh)
  del source.entries["model.norm.weight"]
  with pytest.raises(KeyError, match=r"model\.norm\.weight"):
    hf_io.load_params(cfg, source, str(tmp_path), mesh)


def test_gguf_read_slice_equals_indexed_read(smollm2_gguf):
  from gguf import GGUFReader

  reader = GGUFReader(str(smollm2_gguf))
  source = gguf_io.GGUFTensors(reader, gguf_io.gguf_hf_config(reader))
  name = "model.layers.0.self_attn.q_proj.weight"  # quantised, with q rows reordered
  full = source.read(name)
  for index in [(slice(64, 192), slice(None)), (slice(None), slice(100, 300)), (slice(0, 0),)]:
    np.testing.assert_array_equal(source.read_slice(name, index), full[index])
  assert source.last[0] == name  # the other shards of this tensor reuse the dequantised one
