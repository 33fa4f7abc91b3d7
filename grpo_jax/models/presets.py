"""Named model shapes: test sizes and the published configs of the models the papers train.

Numbers are copied from each Hub checkpoint's ``config.json``; ``load_hf`` reads the real file,
so a preset is for sizing (``grpo_jax.planning.memory``) and for random-init runs of the same shape.
"""

from __future__ import annotations

from grpo_jax.models.model_config import ModelConfig

_BF16 = {"dtype": "bfloat16", "param_dtype": "bfloat16"}

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
  # Qwen/Qwen3-0.6B (config.json of the Hub checkpoint; head_dim 128 > D/H, as published).
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
    max_position_embeddings=40_960,
    **_BF16,
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
    max_position_embeddings=40_960,
    **_BF16,
  ),
  # Qwen/Qwen3-4B-Base.
  "qwen3_4b_base": ModelConfig(
    vocab_size=151_936,
    hidden_dim=2560,
    num_layers=36,
    num_heads=32,
    num_kv_heads=8,
    head_dim=128,
    mlp_dim=9728,
    rope_theta=1_000_000.0,
    tie_embeddings=True,
    max_position_embeddings=32_768,
    **_BF16,
  ),
  # Qwen/Qwen3-8B-Base: the first Qwen3 size with an untied lm_head.
  "qwen3_8b_base": ModelConfig(
    vocab_size=151_936,
    hidden_dim=4096,
    num_layers=36,
    num_heads=32,
    num_kv_heads=8,
    head_dim=128,
    mlp_dim=12_288,
    rope_theta=1_000_000.0,
    tie_embeddings=False,
    max_position_embeddings=32_768,
    **_BF16,
  ),
  # allenai/Olmo-3-1025-7B: 3 sliding (4096) + 1 full layer, YaRN x8 on the full layers only.
  "olmo3_7b_base": ModelConfig(
    family="olmo3",
    vocab_size=100_278,
    hidden_dim=4096,
    num_layers=32,
    num_heads=32,
    num_kv_heads=32,
    head_dim=128,
    mlp_dim=11_008,
    rope_theta=500_000.0,
    norm_eps=1e-6,
    tie_embeddings=False,
    sliding_window=4096,
    layer_types=tuple(
      "full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(32)
    ),
    rope_scaling=(
      ("attention_factor", 1.2079441541679836),
      ("beta_fast", 32.0),
      ("beta_slow", 1.0),
      ("factor", 8.0),
      ("original_max_position_embeddings", 8192),
      ("rope_type", "yarn"),
    ),
    max_position_embeddings=65_536,
    **_BF16,
  ),
  # meta-llama/Llama-3.2-3B-Instruct: tied embeddings, Llama-3.1 rope scaling.
  "llama3_2_3b_instruct": ModelConfig(
    family="llama",
    vocab_size=128_256,
    hidden_dim=3072,
    num_layers=28,
    num_heads=24,
    num_kv_heads=8,
    head_dim=128,
    mlp_dim=8192,
    rope_theta=500_000.0,
    norm_eps=1e-5,
    tie_embeddings=True,
    rope_scaling=(
      ("factor", 32.0),
      ("high_freq_factor", 4.0),
      ("low_freq_factor", 1.0),
      ("original_max_position_embeddings", 8192),
      ("rope_type", "llama3"),
    ),
    max_position_embeddings=131_072,
    **_BF16,
  ),
}
