"""Decoder-only transformers (Qwen3, Llama-3, OLMo-3 families) in Flax NNX with pure-dict params,
Hugging Face checkpoint import/export, llama.cpp GGUF import and a per-device memory estimate."""

from grpo_jax.models import lora
from grpo_jax.models.build import build_policy, load_pretrained, load_tokenizer
from grpo_jax.models.families import FAMILIES, Family, get_family
from grpo_jax.models.gguf_io import load_gguf, load_gguf_config
from grpo_jax.models.hf_config import from_hf_config, load_hf_config, to_hf_config
from grpo_jax.models.hf_io import HFModel, abstract_params, hf_name, load_hf, save_hf
from grpo_jax.models.layer_stack import stack_layers, unstack_layers
from grpo_jax.models.logprobs import Window, logps_from_logits, token_logps
from grpo_jax.models.model_config import ModelConfig
from grpo_jax.models.presets import PRESETS
from grpo_jax.models.transformer import (
  Transformer,
  causal_mask,
  compute_params,
  forward,
  init_params,
  positions_from_mask,
)

__all__ = [
  "FAMILIES",
  "PRESETS",
  "Family",
  "HFModel",
  "ModelConfig",
  "Transformer",
  "abstract_params",
  "build_policy",
  "causal_mask",
  "compute_params",
  "forward",
  "from_hf_config",
  "get_family",
  "hf_name",
  "init_params",
  "load_gguf",
  "load_gguf_config",
  "load_hf",
  "load_hf_config",
  "load_pretrained",
  "load_tokenizer",
  "lora",
  "logps_from_logits",
  "positions_from_mask",
  "save_hf",
  "stack_layers",
  "to_hf_config",
  "token_logps",
  "unstack_layers",
  "Window",
]
