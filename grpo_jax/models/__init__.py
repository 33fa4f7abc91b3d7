"""Decoder-only transformer (Qwen3 architecture) in Flax NNX, with pure-dict parameters."""

from grpo_jax.models.logprobs import logps_from_logits, token_logps
from grpo_jax.models.model_config import PRESETS, ModelConfig
from grpo_jax.models.transformer import (
  Transformer,
  causal_mask,
  forward,
  init_params,
  positions_from_mask,
)

__all__ = [
  "PRESETS",
  "ModelConfig",
  "Transformer",
  "causal_mask",
  "forward",
  "init_params",
  "logps_from_logits",
  "positions_from_mask",
  "token_logps",
]
