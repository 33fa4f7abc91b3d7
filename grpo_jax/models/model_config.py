"""The decoder's hyper-parameters (Qwen3 architecture) and named presets.

Field names follow the experiment config's ``model`` group; the Hugging Face ``Qwen3Config``
equivalents are: hidden_dim = hidden_size, num_layers = num_hidden_layers, num_heads =
num_attention_heads, num_kv_heads = num_key_value_heads, mlp_dim = intermediate_size,
norm_eps = rms_norm_eps, tie_embeddings = tie_word_embeddings.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

FAMILIES = ("qwen3",)
DTYPES = ("float32", "bfloat16")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Shape and numerics of a decoder-only transformer; frozen so it can be a static jit arg."""

  vocab_size: int
  hidden_dim: int
  num_layers: int
  num_heads: int
  num_kv_heads: int
  head_dim: int
  mlp_dim: int
  rope_theta: float = 10_000.0
  norm_eps: float = 1e-6
  tie_embeddings: bool = True
  dtype: str = "float32"  # compute dtype of activations and matmuls
  param_dtype: str = "float32"  # storage dtype of the parameters

  def __post_init__(self):
    for name in (
      "vocab_size",
      "hidden_dim",
      "num_layers",
      "num_heads",
      "num_kv_heads",
      "head_dim",
      "mlp_dim",
    ):
      if int(getattr(self, name)) <= 0:
        raise ValueError(f"ModelConfig.{name} must be positive, got {getattr(self, name)}")
    if self.num_heads % self.num_kv_heads:
      raise ValueError(
        f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads "
        f"({self.num_kv_heads}) for grouped-query attention"
      )
    if self.head_dim % 2:
      raise ValueError(f"head_dim must be even for rotary embeddings, got {self.head_dim}")
    for name in ("dtype", "param_dtype"):
      if getattr(self, name) not in DTYPES:
        raise ValueError(f"ModelConfig.{name} must be one of {DTYPES}, got {getattr(self, name)}")

  @property
  def compute_dtype(self) -> jnp.dtype:
    return jnp.dtype(self.dtype)

  @property
  def weight_dtype(self) -> jnp.dtype:
    return jnp.dtype(self.param_dtype)

  @property
  def num_params(self) -> int:
    """Parameter count (the lm_head adds V·D when embeddings are untied)."""
    D, Dh = self.hidden_dim, self.head_dim
    attn = D * Dh * (2 * self.num_heads + 2 * self.num_kv_heads) + 2 * Dh
    layer = attn + 3 * D * self.mlp_dim + 2 * D
    head = 0 if self.tie_embeddings else self.vocab_size * D
    return self.vocab_size * D + self.num_layers * layer + D + head

  @classmethod
  def from_config(cls, model_cfg, vocab_size: int | None = None) -> ModelConfig:
    """Builds the config from the experiment's ``model`` group.

    ``model_cfg.vocab_size == 0`` means "take it from the tokenizer": the ``vocab_size``
    argument is used then.
    """
    family = model_cfg.get("family", "qwen3")
    if family not in FAMILIES:
      raise ValueError(f"model.family must be one of {FAMILIES}, got '{family}'")
    vocab = int(model_cfg.vocab_size)
    if vocab == 0:
      if vocab_size is None:
        raise ValueError("model.vocab_size is 0 (from the tokenizer) but no vocab_size was given")
      vocab = int(vocab_size)
    return cls(
      vocab_size=vocab,
      hidden_dim=int(model_cfg.hidden_dim),
      num_layers=int(model_cfg.num_layers),
      num_heads=int(model_cfg.num_heads),
      num_kv_heads=int(model_cfg.num_kv_heads),
      head_dim=int(model_cfg.head_dim),
      mlp_dim=int(model_cfg.mlp_dim),
      rope_theta=float(model_cfg.rope_theta),
      norm_eps=float(model_cfg.norm_eps),
      tie_embeddings=bool(model_cfg.tie_embeddings),
      dtype=str(model_cfg.dtype),
      param_dtype=str(model_cfg.param_dtype),
    )


PRESETS: dict[str, ModelConfig] = {
  # The base experiment config's decoder, with a character-level vocabulary.
  "tiny": ModelConfig(
    vocab_size=64,
    hidden_dim=128,
    num_layers=4,
    num_heads=4,
    num_kv_heads=2,
    head_dim=32,
    mlp_dim=384,
  ),
  # Smallest useful shape for unit tests.
  "test": ModelConfig(
    vocab_size=64,
    hidden_dim=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=16,
    mlp_dim=128,
  ),
  # Qwen/Qwen3-0.6B (config.json of the Hub checkpoint).
  "qwen3-0.6b": ModelConfig(
    vocab_size=151_936,
    hidden_dim=1024,
    num_layers=28,
    num_heads=16,
    num_kv_heads=8,
    head_dim=128,
    mlp_dim=3072,
    rope_theta=1_000_000.0,
    tie_embeddings=True,
    dtype="bfloat16",
    param_dtype="bfloat16",
  ),
  # Qwen/Qwen3-1.7B.
  "qwen3-1.7b": ModelConfig(
    vocab_size=151_936,
    hidden_dim=2048,
    num_layers=28,
    num_heads=16,
    num_kv_heads=8,
    head_dim=128,
    mlp_dim=6144,
    rope_theta=1_000_000.0,
    tie_embeddings=True,
    dtype="bfloat16",
    param_dtype="bfloat16",
  ),
}
