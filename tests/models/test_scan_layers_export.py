"""A tiny run trained with model.scan_layers (remat full) checkpoints stacked params, and
``launch.py --mode=export`` writes them as the per-layer Hugging Face tensors."""

import importlib.util
import pathlib

import numpy as np
import orbax.checkpoint as ocp

from grpo_jax import models
from grpo_jax.config import files as config_file
from grpo_jax.models.layer_stack import is_stacked, unstack_layers
from grpo_jax.train import modes

ROOT = pathlib.Path(__file__).resolve().parents[2]
OVERRIDES = [
  "steps=1",
  "eval.before=false",
  "eval.after=false",
  "model.scan_layers=True",
  "model.remat=full",
]


def test_scanned_run_exports_per_layer_tensors(tmp_path):
  cfg = config_file.load(str(ROOT / "configs/tiny_test.py"), OVERRIDES)
  modes.train(cfg, tmp_path, log=lambda *_: None)
  state = ocp.StandardCheckpointer().restore(tmp_path / "checkpoints" / "1" / "default")
  assert is_stacked(state["params"])
  spec = importlib.util.spec_from_file_location("launch", ROOT / "experiments/launch.py")
  launch = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(launch)
  out = tmp_path / "hf"
  argv = ["--config", str(ROOT / "configs/tiny_test.py"), "--workdir", str(tmp_path)]
  argv += ["--mode=export", "--out", str(out), "--step", "1"]
  assert launch.main(argv + [f"--config.{o}" for o in OVERRIDES]) == 0
  back = models.load_hf(str(out), tokenizer=False).params
  want = unstack_layers(state["params"])
  for i in range(len(want["layers"])):
    got_q = back["layers"][i]["self_attn"]["q_proj"]["kernel"]
    np.testing.assert_array_equal(got_q, want["layers"][i]["self_attn"]["q_proj"]["kernel"])
    got_n = back["layers"][i]["post_attention_layernorm"]["weight"]
    np.testing.assert_array_equal(got_n, want["layers"][i]["post_attention_layernorm"]["weight"])
  np.testing.assert_array_equal(back["norm"]["weight"], want["norm"]["weight"])
