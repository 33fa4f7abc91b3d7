"""Model families: what differs between Qwen3, Llama-3 and OLMo-3 decoders, as data.

All three are RMSNorm + grouped-query attention with RoPE + SwiGLU decoders. They differ in

  family  qk_norm            norm placement                        RMSNorm weight product
  qwen3   per head (Dh)      pre: x + attn(norm(x))                 after the cast to the dtype
  llama   none               pre                                   after the cast
  olmo3   full projection    post: x + norm(attn(x))                in float32, then cast
          (H·Dh, Hk·Dh)      (post_attention / post_feedforward)

and OLMo-3 keeps RoPE's cos/sin in float32. Sliding-window layers (``layer_types``) and RoPE
scaling are per-config, not per-family. ``hf_*`` name the transformers classes.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Family:
  name: str
  qk_norm: str  # "head" | "full" | "none"
  post_norm: bool  # OLMo-2/3 norm placement
  norm_weight_float32: bool  # RMSNorm multiplies its weight before casting back
  rope_float32: bool  # cos/sin stay float32 in the rotary product
  hf_model_type: str
  hf_architecture: str
  hf_config_class: str


FAMILIES: dict[str, Family] = {
  "qwen3": Family(
    name="qwen3",
    qk_norm="head",
    post_norm=False,
    norm_weight_float32=False,
    rope_float32=False,
    hf_model_type="qwen3",
    hf_architecture="Qwen3ForCausalLM",
    hf_config_class="Qwen3Config",
  ),
  "llama": Family(
    name="llama",
    qk_norm="none",
    post_norm=False,
    norm_weight_float32=False,
    rope_float32=False,
    hf_model_type="llama",
    hf_architecture="LlamaForCausalLM",
    hf_config_class="LlamaConfig",
  ),
  "olmo3": Family(
    name="olmo3",
    qk_norm="full",
    post_norm=True,
    norm_weight_float32=True,
    rope_float32=True,
    hf_model_type="olmo3",
    hf_architecture="Olmo3ForCausalLM",
    hf_config_class="Olmo3Config",
  ),
}


def get_family(name: str) -> Family:
  if name not in FAMILIES:
    raise ValueError(f"unknown model family '{name}'; available: {sorted(FAMILIES)}")
  return FAMILIES[name]
