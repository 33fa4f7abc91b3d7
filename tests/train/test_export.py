"""``launch.py --mode=export``: a tiny countdown run's checkpoint as a Hugging Face directory that
transformers loads, with the checkpoint's parameters, our logits and our greedy tokens."""

import importlib.util
import pathlib

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
import torch
import transformers

from grpo_jax import models, sampling
from grpo_jax.config import files as config_file
from grpo_jax.train import modes

ROOT = pathlib.Path(__file__).resolve().parents[2]
OVERRIDES = ["steps=1", "eval.before=false", "eval.after=false"]


def _launch():
  spec = importlib.util.spec_from_file_location("launch", ROOT / "experiments/launch.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  run = tmp_path_factory.mktemp("run")
  cfg = config_file.load(str(ROOT / "configs/tiny_test.py"), OVERRIDES)
  modes.train(cfg, run, log=lambda *_: None)
  out = run / "hf"
  argv = [
    "--config",
    str(ROOT / "configs/tiny_test.py"),
    "--workdir",
    str(run),
    "--mode=export",
    "--out",
    str(out),
    "--step",
    "1",
  ] + [f"--config.{o}" for o in OVERRIDES]
  assert _launch().main(argv) == 0
  state = ocp.StandardCheckpointer().restore(run / "checkpoints" / "1" / "default")
  return out, state["params"]


def test_directory_contents(exported):
  out, _ = exported
  names = {p.name for p in out.iterdir()}
  assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json"} <= names
  tok = transformers.AutoTokenizer.from_pretrained(str(out))
  assert tok("12+3=15")["input_ids"] == [4, 5, 13, 6, 16, 4, 8]
  gen = transformers.GenerationConfig.from_pretrained(str(out))
  assert (gen.eos_token_id, gen.pad_token_id) == (tok.eos_token_id, tok.pad_token_id)


def _leaves(params) -> dict:
  flat = jax.tree_util.tree_flatten_with_path(params)[0]
  return {"/".join(str(getattr(k, "key", k)) for k in kp): np.asarray(x) for kp, x in flat}


def test_params_are_the_checkpoint(exported):
  out, params = exported
  want, got = _leaves(params), _leaves(models.load_hf(str(out), tokenizer=False).params)
  assert want.keys() == got.keys()
  for k in want:
    np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_transformers_matches_ours(exported):
  out, _ = exported
  ours = models.load_hf(str(out))
  hf = transformers.AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
  prompt = np.asarray([ours.tokenizer("69=3,8,9:")["input_ids"]])
  tokens = np.random.RandomState(0).randint(3, ours.config.vocab_size, (2, 14))
  with torch.no_grad():
    ref = hf(torch.tensor(tokens)).logits.numpy()
  np.testing.assert_allclose(np.asarray(ours(tokens)), ref, atol=1e-4, rtol=0)
  T, L = 8, prompt.shape[1]
  with torch.no_grad():
    ref = hf.generate(
      torch.tensor(prompt),
      max_new_tokens=T,
      min_new_tokens=T,
      do_sample=False,
      eos_token_id=None,
      pad_token_id=0,
    ).numpy()[0, L:]
  got = sampling.sample(
    ours.graphdef,
    ours.params,
    prompt,
    np.ones_like(prompt),
    np.asarray([0, 0], np.uint32),
    sampling.Decode(max_new_tokens=T, eos_id=-1, pad_id=0, temperature=0.0),
  )
  np.testing.assert_array_equal(np.asarray(got.tokens_NxT)[0], ref)
