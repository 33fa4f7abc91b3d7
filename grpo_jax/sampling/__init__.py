"""Jitted KV-cache sampling with per-token log-probs."""

from grpo_jax.sampling.kv_cache import KVCache, decode_step, prefill
from grpo_jax.sampling.next_token import categorical, inverse_cdf, row_uniforms, sample_next_token
from grpo_jax.sampling.sampler import SampleOutput, sample
from grpo_jax.sampling.strategy import (
  PreviewSpec,
  draw_completions,
  draw_previews,
  draw_rows,
  make_context,
)
from grpo_jax.sampling.strategy_layout import (
  allocate,
  left_align,
  normalize_preview,
  pack_responses,
  preview_ids,
  preview_of_rollout,
  row_ids,
  subgroup_metrics,
)

__all__ = [
  "categorical",
  "KVCache",
  "PreviewSpec",
  "SampleOutput",
  "allocate",
  "decode_step",
  "draw_completions",
  "draw_previews",
  "draw_rows",
  "inverse_cdf",
  "left_align",
  "make_context",
  "normalize_preview",
  "pack_responses",
  "prefill",
  "preview_ids",
  "preview_of_rollout",
  "row_ids",
  "row_uniforms",
  "sample",
  "sample_next_token",
  "subgroup_metrics",
]
