"""Checkpoints in and out: save → transformers ``from_pretrained`` gives our logits, save → load is
exact (single file and sharded index, float32 and bfloat16), tokenizer comes along, errors name
the bad tensor, and loading streams (peak host memory near the largest tensor)."""

import dataclasses
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from test_hf_parity import V, make_hf

from grpo_jax import data, models
from grpo_jax.models import safetensors_io


@pytest.fixture(scope="module", params=["qwen3", "llama", "olmo3"])
def saved(request, tmp_path_factory):
  family = request.param
  src = tmp_path_factory.mktemp(f"{family}_src")
  make_hf(family, seed=5).save_pretrained(src)
  ours = models.load_hf(str(src))
  out = tmp_path_factory.mktemp(f"{family}_out")
  models.save_hf(ours, out, tokenizer=data.build_tokenizer())
  return family, ours, out


def _leaves(params):
  return jax.tree_util.tree_flatten_with_path(params)[0]


def test_save_load_round_trip_is_exact(saved):
  family, ours, out = saved
  back = models.load_hf(str(out))
  assert back.config == ours.config
  for (ka, a), (kb, b) in zip(_leaves(ours.params), _leaves(back.params)):
    assert ka == kb
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert back.tokenizer is not None
  assert back.tokenizer.get_vocab() == data.build_tokenizer().get_vocab()


def test_transformers_loads_what_we_save(saved):
  family, ours, out = saved
  hf = transformers.AutoModelForCausalLM.from_pretrained(out, attn_implementation="eager")
  assert type(hf).__name__ == models.get_family(family).hf_architecture
  tokens = np.random.RandomState(0).randint(3, V, (2, 13))
  with torch.no_grad():
    ref = hf(torch.tensor(tokens)).logits.numpy()
  np.testing.assert_allclose(np.asarray(ours(tokens)), ref, atol=1e-4, rtol=0)
  saved_names = set(json.loads((out / "config.json").read_text()))
  assert {"model_type", "architectures", "rope_parameters"} <= saved_names


def test_sharded_bf16_checkpoint_round_trips(saved, tmp_path):
  family, ours, _ = saved
  cfg16 = dataclasses.replace(ours.config, dtype="bfloat16", param_dtype="bfloat16")
  graphdef16, _ = models.abstract_params(cfg16)
  m16 = models.HFModel(
    graphdef16,
    jax.tree.map(lambda x: x.astype(jnp.bfloat16), ours.params),
    cfg16,
    hf_config=ours.hf_config,
  )
  models.save_hf(m16, tmp_path, max_shard_bytes=20_000)
  index = json.loads((tmp_path / safetensors_io.INDEX).read_text())
  assert len(set(index["weight_map"].values())) > 2
  back = models.load_hf(str(tmp_path), dtype="bfloat16")
  for (_, a), (_, b) in zip(_leaves(m16.params), _leaves(back.params)):
    assert b.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(b, np.float32))


def _rewrite(src, dst, edit):
  """Copies a single-file checkpoint, letting ``edit`` change the tensor dict."""
  import shutil

  from safetensors.numpy import load_file, save_file

  shutil.copytree(src, dst)
  tensors = load_file(str(src / safetensors_io.SINGLE))
  edit(tensors)
  save_file(tensors, str(dst / safetensors_io.SINGLE), metadata={"format": "pt"})


def test_missing_tensor_is_named(saved, tmp_path):
  family, _, out = saved
  name = "model.layers.1.mlp.up_proj.weight"
  _rewrite(out, tmp_path / "ckpt", lambda t: t.pop(name))
  with pytest.raises(KeyError, match=name.replace(".", r"\.")):
    models.load_hf(str(tmp_path / "ckpt"))


def test_misshaped_tensor_is_named(saved, tmp_path):
  family, _, out = saved
  name = "model.layers.0.self_attn.k_proj.weight"

  def cut(t):
    t[name] = t[name][:-1]

  _rewrite(out, tmp_path / "ckpt", cut)
  with pytest.raises(ValueError, match=name.replace(".", r"\.") + r".*\(31, 64\)"):
    models.load_hf(str(tmp_path / "ckpt"))


_MEASURE = """
import sys, tracemalloc
from grpo_jax import models
models.load_hf(sys.argv[1])  # compiles the per-shape converters
tracemalloc.start()
models.load_hf(sys.argv[1])
print(tracemalloc.get_traced_memory()[1])
"""


def test_loading_streams_tensor_by_tensor(tmp_path):
  """Measured in a fresh process: threads left by earlier tests would count in its peak."""
  cfg = models.ModelConfig(
    vocab_size=4096,
    hidden_dim=256,
    num_layers=6,
    num_heads=4,
    num_kv_heads=2,
    head_dim=64,
    mlp_dim=512,
    tie_embeddings=False,
  )
  graphdef, params = models.init_params(cfg, 0)
  models.save_hf(models.HFModel(graphdef, params, cfg), tmp_path)
  sizes = [x.nbytes for x in jax.tree.leaves(params)]
  largest, total = max(sizes), sum(sizes)
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": ""}
  proc = subprocess.run(
    [sys.executable, "-c", _MEASURE, str(tmp_path)], env=env, capture_output=True, text=True
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  peak = int(proc.stdout.split()[-1])
  print(
    f"load_hf host peak {peak / 2**20:.2f} MiB; largest tensor {largest / 2**20:.2f} MiB; "
    f"model {total / 2**20:.2f} MiB"
  )
  assert total > 5 * largest
  assert peak < 1.5 * largest, (peak, largest)
  loaded = models.load_hf(str(tmp_path))
  np.testing.assert_array_equal(
    np.asarray(loaded.params["lm_head"]["kernel"]), np.asarray(params["lm_head"]["kernel"])
  )
