"""The policy the trainer starts from: a Hugging Face checkpoint, a named preset or the config.

``model.hf_path`` (a checkpoint directory, hub id or llama.cpp ``.gguf`` file) wins, then
``model.preset`` (a key of ``PRESETS``, randomly initialised), then the shape fields of the
``model`` group.
"""

from __future__ import annotations

import dataclasses
import pathlib

from flax import nnx

from grpo_jax.models import remat as remat_lib
from grpo_jax.models.gguf_io import load_gguf, load_gguf_tokenizer
from grpo_jax.models.hf_io import HFModel, load_hf
from grpo_jax.models.layer_stack import stack_layers
from grpo_jax.models.model_config import ModelConfig
from grpo_jax.models.presets import PRESETS
from grpo_jax.models.transformer import Transformer, init_params


def is_gguf(path) -> bool:
  return str(path).endswith(".gguf")


def load_pretrained(path: str | pathlib.Path, **kwargs) -> HFModel:
  """``load_gguf`` for a ``.gguf`` file, else ``load_hf`` (same keyword arguments)."""
  return load_gguf(path, **kwargs) if is_gguf(path) else load_hf(str(path), **kwargs)


def load_tokenizer(path: str | pathlib.Path):
  """The tokenizer of a checkpoint directory, hub id or ``.gguf`` file."""
  if is_gguf(path):
    return load_gguf_tokenizer(path)
  from transformers import AutoTokenizer

  return AutoTokenizer.from_pretrained(str(path))


def policy_config(model_cfg, vocab_size: int | None = None) -> ModelConfig:
  """The ModelConfig a random init would use (preset or explicit fields); vocab_size as in
  ``ModelConfig.from_config``."""
  preset = model_cfg.preset
  if not preset:
    return ModelConfig.from_config(model_cfg, vocab_size=vocab_size)
  cfg = dataclasses.replace(
    PRESETS[preset], remat=remat_lib.built(model_cfg.remat), scan_layers=model_cfg.scan_layers
  )
  if model_cfg.vocab_size > 0:
    cfg = dataclasses.replace(cfg, vocab_size=model_cfg.vocab_size)
  return cfg


def abstract_graphdef(model_cfg: ModelConfig) -> nnx.GraphDef:
  """The graphdef of ``Transformer(model_cfg)`` without allocating parameters."""
  return nnx.split(nnx.eval_shape(lambda: Transformer(model_cfg, rngs=nnx.Rngs(0))))[0]


def build_policy(cfg, vocab_size: int | None = None) -> tuple[nnx.GraphDef, dict]:
  """(graphdef, params) of the initial policy for experiment config ``cfg``.

  A checkpoint is loaded with ``model.dtype`` / ``model.param_dtype``; its vocabulary must
  cover the task tokenizer's ``vocab_size`` ids (a larger, padded vocabulary is fine).
  """
  m = cfg.model
  hf_path = m.hf_path
  if hf_path:
    model = load_pretrained(hf_path, dtype=m.dtype, param_dtype=m.param_dtype, tokenizer=False)
    if vocab_size is not None and model.config.vocab_size < vocab_size:
      raise ValueError(
        f"checkpoint {hf_path} has vocab_size {model.config.vocab_size}, smaller than the task "
        f"tokenizer's {vocab_size}"
      )
    # The checkpoint's layout is unrolled; scan_layers stacks it (layer_stack.py).
    remat = remat_lib.built(m.remat)
    model_cfg = dataclasses.replace(model.config, remat=remat, scan_layers=m.scan_layers)
    params = stack_layers(model.params) if m.scan_layers else model.params
    return abstract_graphdef(model_cfg), params
  model_cfg = policy_config(m, vocab_size)
  if vocab_size is not None and model_cfg.vocab_size < vocab_size:
    raise ValueError(
      f"model vocab_size {model_cfg.vocab_size} is smaller than the tokenizer's {vocab_size}"
    )
  return init_params(model_cfg, cfg.seed)
