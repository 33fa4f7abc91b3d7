"""Hugging Face ``config.json`` ⇄ :class:`ModelConfig`, through transformers' own config classes
(``Qwen3Config``, ``LlamaConfig``, ``Olmo3Config``), so their defaults and legacy-field handling
(``rope_scaling`` → ``rope_parameters``, default ``layer_types``) are the ones applied.

transformers is imported inside the functions: importing its config module pulls in torch when
torch is installed, which ``import grpo_jax.models`` should not pay for.
"""

from __future__ import annotations

import dataclasses

from grpo_jax.models.families import FAMILIES, get_family
from grpo_jax.models.model_config import ModelConfig
from grpo_jax.models.rope import ROPE_TYPES

MODEL_TYPES = {f.hf_model_type: f.name for f in FAMILIES.values()}
_TOKEN_IDS = ("bos_token_id", "eos_token_id", "pad_token_id")


def _freeze(value):
  return tuple(_freeze(v) for v in value) if isinstance(value, (list, tuple)) else value


def _rope_pairs(params: dict | None) -> tuple[float | None, tuple]:
  """(rope_theta, sorted non-theta pairs); a plain default rope gives ()."""
  params = dict(params or {})
  theta = params.pop("rope_theta", None)
  rope_type = params.get("rope_type", params.get("type", "default"))
  if rope_type not in ROPE_TYPES:
    raise NotImplementedError(f"rope_type '{rope_type}' is not supported; have {list(ROPE_TYPES)}")
  if float(params.get("partial_rotary_factor", 1.0)) != 1.0:
    raise NotImplementedError("partial_rotary_factor != 1 is not supported")
  params.pop("partial_rotary_factor", None)
  if rope_type == "default" and set(params) <= {"rope_type", "type"}:
    return theta, ()
  return theta, tuple(sorted((k, _freeze(v)) for k, v in params.items()))


def from_hf_config(hf, dtype: str = "float32", param_dtype: str | None = None) -> ModelConfig:
  """ModelConfig of a transformers config object (``AutoConfig.from_pretrained(path)``)."""
  model_type = getattr(hf, "model_type", None)
  if model_type not in MODEL_TYPES:
    raise ValueError(f"unsupported model_type '{model_type}'; supported: {sorted(MODEL_TYPES)}")
  if getattr(hf, "hidden_act", "silu") != "silu":
    raise NotImplementedError(f"hidden_act '{hf.hidden_act}' is not supported (only silu)")
  H = hf.num_attention_heads
  rope = dict(getattr(hf, "rope_parameters", None) or {})
  if "full_attention" in rope:  # per-layer-type rope (OLMo-3)
    theta, scaling = _rope_pairs(rope["full_attention"])
    sliding = rope.get("sliding_attention", rope["full_attention"])
    sliding_theta, sliding_scaling = _rope_pairs(sliding)
  else:
    theta, scaling = _rope_pairs(rope)
    sliding_theta, sliding_scaling = theta, scaling
  theta = float(theta if theta is not None else getattr(hf, "rope_theta", 10_000.0))
  layer_types = tuple(getattr(hf, "layer_types", None) or ())
  window = getattr(hf, "sliding_window", None) or 0
  if "sliding_attention" not in layer_types or not window:
    # No sliding layers: the sliding rope fields keep their defaults (canonical configs).
    layer_types, window, sliding_theta, sliding_scaling = (), 0, None, ()
  return ModelConfig(
    family=MODEL_TYPES[model_type],
    vocab_size=hf.vocab_size,
    hidden_dim=hf.hidden_size,
    num_layers=hf.num_hidden_layers,
    num_heads=H,
    num_kv_heads=getattr(hf, "num_key_value_heads", None) or H,
    head_dim=getattr(hf, "head_dim", None) or hf.hidden_size // H,
    mlp_dim=hf.intermediate_size,
    rope_theta=theta,
    norm_eps=float(hf.rms_norm_eps),
    tie_embeddings=bool(getattr(hf, "tie_word_embeddings", False)),
    dtype=dtype,
    param_dtype=param_dtype or dtype,
    rope_scaling=scaling,
    sliding_window=int(window),
    layer_types=layer_types,
    sliding_rope_theta=0.0 if sliding_theta in (None, theta) else float(sliding_theta),
    sliding_rope_scaling=sliding_scaling,
    attention_bias=bool(getattr(hf, "attention_bias", False)),
    mlp_bias=bool(getattr(hf, "mlp_bias", False)),
    max_position_embeddings=int(getattr(hf, "max_position_embeddings", 0) or 32_768),
  )


def load_hf_config(path: str, dtype: str = "float32", param_dtype: str | None = None):
  """(ModelConfig, transformers config) of a checkpoint directory's ``config.json``."""
  from transformers import AutoConfig

  hf = AutoConfig.from_pretrained(path)
  return from_hf_config(hf, dtype, param_dtype), hf


def to_hf_config(cfg: ModelConfig, like=None):
  """A transformers config for ``cfg``; token ids are copied from ``like`` (the loaded config)."""
  import transformers

  family = get_family(cfg.family)
  rope = {"rope_type": "default", **dict(cfg.rope_scaling), "rope_theta": cfg.rope_theta}
  sliding_rope = {
    "rope_type": "default",
    **dict(cfg.sliding_rope_scaling),
    "rope_theta": cfg.sliding_rope_theta or cfg.rope_theta,
  }
  layer_types = list(cfg.layer_types) or ["full_attention"] * cfg.num_layers
  kwargs = dict(
    vocab_size=cfg.vocab_size,
    hidden_size=cfg.hidden_dim,
    intermediate_size=cfg.mlp_dim,
    num_hidden_layers=cfg.num_layers,
    num_attention_heads=cfg.num_heads,
    num_key_value_heads=cfg.num_kv_heads,
    head_dim=cfg.head_dim,
    hidden_act="silu",
    max_position_embeddings=cfg.max_position_embeddings,
    rms_norm_eps=cfg.norm_eps,
    tie_word_embeddings=cfg.tie_embeddings,
    attention_bias=cfg.attention_bias,
    layer_types=layer_types,
  )
  if cfg.family == "olmo3":
    kwargs["rope_parameters"] = {"full_attention": rope, "sliding_attention": sliding_rope}
    kwargs["sliding_window"] = cfg.sliding_window or None
  else:
    same_rope = cfg.sliding_rope_scaling == cfg.rope_scaling and cfg.sliding_rope_theta in (
      0.0,
      cfg.rope_theta,
    )
    if "sliding_attention" in layer_types and not same_rope:
      raise ValueError(f"{cfg.family} has one rope for all layers")
    kwargs["rope_parameters"] = rope
  if cfg.family == "qwen3":
    sliding = "sliding_attention" in layer_types
    kwargs.update(use_sliding_window=sliding, sliding_window=cfg.sliding_window or None)
    if sliding:
      kwargs["max_window_layers"] = layer_types.index("sliding_attention")
  elif cfg.family == "llama":
    if "sliding_attention" in layer_types:
      raise ValueError("llama has no sliding-window layers")
    del kwargs["layer_types"]
    kwargs["mlp_bias"] = cfg.mlp_bias
  for name in _TOKEN_IDS:
    if like is not None and getattr(like, name, None) is not None:
      kwargs[name] = getattr(like, name)
  hf = getattr(transformers, family.hf_config_class)(**kwargs)
  hf.architectures = [family.hf_architecture]
  hf.dtype = cfg.param_dtype
  return hf


def with_dtypes(cfg: ModelConfig, dtype: str, param_dtype: str | None = None) -> ModelConfig:
  return dataclasses.replace(cfg, dtype=dtype, param_dtype=param_dtype or dtype)
