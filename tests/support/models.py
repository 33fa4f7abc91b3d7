"""A small decoder of every family, shared by the forward-pass tests (shared prompts, packing)."""

from grpo_jax import models

# (family, ModelConfig overrides): OLMo-3's two sliding-window layers see 5 keys back.
FAMILIES = [
  ("qwen3", {}),
  ("llama", {}),
  ("olmo3", {"sliding_window": 5, "layer_types": ("sliding_attention",) * 2 + ("full_attention",)}),
]


def small_config(family: str = "qwen3", vocab: int = 97, **kw) -> models.ModelConfig:
  """A 3-layer decoder of ``family`` (4 heads over 2 key-value heads, D 32, MLP 64)."""
  return models.ModelConfig(
    vocab_size=vocab,
    hidden_dim=32,
    num_layers=3,
    num_heads=4,
    num_kv_heads=2,
    head_dim=8,
    mlp_dim=64,
    family=family,
    **kw,
  )


def small_model(family: str = "qwen3", vocab: int = 97, **kw):
  """(graphdef, params) of :func:`small_config`'s decoder."""
  cfg = small_config(family, vocab, **kw)
  return models.init_params(cfg, 0)
