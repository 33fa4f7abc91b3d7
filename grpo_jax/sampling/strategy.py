"""Strategy-conditioned two-stage sampling (METHODS §5, seed ``000_…``): previews → subgroups.

  stage 1   K previews per prompt from [prompt | template], B·K rows in one sampler call, each
            stopping at the delimiter (kept as its last token) or after M = max_preview_tokens.
  stage 2   G completions per prompt, counts_k = allocate(G, K) of them conditioned on preview k,
            from [prompt | template | preview] left-aligned: B·G rows in one sampler call.

Both stages are single calls of the jitted ``sampling.sample`` (fixed shapes, so each compiles
once); rows are split over the mesh's batch axes and padded to a multiple of them. Shapes as in
:mod:`grpo_jax.sampling.strategy_layout`; C = context slots (prompt + template).
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np

from grpo_jax import sharding as shard_lib
from grpo_jax.models.shared_prompt import group_run
from grpo_jax.sampling import strategy_layout as layout
from grpo_jax.sampling.sampler import sample


@dataclasses.dataclass(frozen=True)
class PreviewSpec:
  """What stage 1 writes and how it stops, in token ids."""

  num_previews: int  # K
  max_preview_tokens: int  # M
  template_ids: tuple[int, ...]
  delimiter_id: int
  eos_id: int
  pad_id: int

  @classmethod
  def from_config(cls, strategy_cfg, tokenizer) -> PreviewSpec:
    encode = lambda text: list(tokenizer.encode(text, add_special_tokens=False))
    delimiter = encode(strategy_cfg.delimiter)
    if len(delimiter) != 1:
      raise ValueError(
        f"strategy.delimiter {strategy_cfg.delimiter!r} must be one token, got ids {delimiter}"
      )
    if strategy_cfg.max_preview_tokens < 1:
      raise ValueError("strategy.max_preview_tokens must be >= 1")
    return cls(
      int(strategy_cfg.num_previews),
      int(strategy_cfg.max_preview_tokens),
      tuple(encode(strategy_cfg.preview_template)),
      delimiter[0],
      int(tokenizer.eos_token_id),
      int(tokenizer.pad_token_id),
    )


def make_context(prompts_BxP: np.ndarray, spec: PreviewSpec):
  """[left-padded prompt | template] and its mask: int32 ``tokens_BxC``, ``mask_BxC``."""
  prompts_BxP = np.asarray(prompts_BxP, np.int32)
  template_BxL = np.broadcast_to(
    np.asarray(spec.template_ids, np.int32), (len(prompts_BxP), len(spec.template_ids))
  )
  tokens_BxC = np.concatenate([prompts_BxP, template_BxL], axis=1)
  mask_BxC = np.concatenate([prompts_BxP != spec.pad_id, np.ones(template_BxL.shape, bool)], 1)
  return tokens_BxC, mask_BxC.astype(np.int32)


def draw_rows(
  graphdef,
  params,
  tokens_NxC,
  mask_NxC,
  rng,
  *,
  max_new_tokens: int,
  stop_ids,
  pad_id: int,
  settings,
  mesh,
  prompt_share: int = 1,
) -> dict:
  """One sampler call over N left-padded rows on ``mesh``; host arrays back (rows padded to a
  multiple of the batch devices by repeating the last row, then trimmed). ``prompt_share``:
  the rows come in aligned runs of that many identical contexts, each prefilled once per
  device-local run (``sample(..., prompt_share=)``)."""
  n, devices = len(tokens_NxC), shard_lib.batch_size_multiple(mesh)
  extra = -n % devices
  pad_rows = lambda x: np.concatenate([x, np.repeat(x[-1:], extra, 0)]) if extra else x
  batch = shard_lib.shard_batch({"p": pad_rows(tokens_NxC), "m": pad_rows(mask_NxC)}, mesh)
  out = jax.device_get(
    shard_lib.under_mesh(sample, mesh)(  # layout constraints apply (as in ``generate``)
      graphdef,
      params,
      batch["p"],
      batch["m"],
      rng,
      max_new_tokens=max_new_tokens,
      eos_id=stop_ids,
      pad_id=pad_id,
      temperature=settings.temperature,
      top_k=settings.top_k,
      top_p=settings.top_p,
      # The padding rows copy the last row, so they extend its run.
      prompt_share=group_run(prompt_share, n + extra, 1, devices),
    )
  )
  return {
    "tokens_NxT": np.asarray(out.tokens_NxT)[:n],
    "mask_NxT": np.asarray(out.mask_NxT, np.int32)[:n],
    "logps_NxT": np.asarray(out.logps_NxT, np.float32)[:n],
    "truncated_N": np.asarray(out.truncated_N)[:n],
  }


def draw_previews(
  graphdef, params, context_BxC, context_mask_BxC, rng, spec: PreviewSpec, settings, mesh
) -> dict:
  """Stage 1: K previews per prompt. Returns ``tokens_BKxM``, ``mask_BKxM`` (prefix masks),
  ``logps_BKxM`` and ``stopped_BK`` (ended on the delimiter). A preview that ends on EOS keeps
  the text before it: EOS is dropped so stage 2 continues the response, not a new one."""
  K = spec.num_previews
  out = draw_rows(
    graphdef,
    params,
    np.repeat(context_BxC, K, 0),
    np.repeat(context_mask_BxC, K, 0),
    rng,
    max_new_tokens=spec.max_preview_tokens,
    stop_ids=(spec.delimiter_id, spec.eos_id),
    pad_id=spec.pad_id,
    settings=settings,
    mesh=mesh,
    prompt_share=K,
  )
  tokens, mask, logps = out["tokens_NxT"], out["mask_NxT"], out["logps_NxT"]
  eos = (tokens == spec.eos_id) & (mask != 0)
  mask = np.where(eos, 0, mask)
  return {
    "tokens_BKxM": np.where(mask != 0, tokens, spec.pad_id).astype(np.int32),
    "mask_BKxM": mask.astype(np.int32),
    "logps_BKxM": np.where(mask != 0, logps, 0.0).astype(np.float32),
    "stopped_BK": np.any((tokens == spec.delimiter_id) & (mask != 0), axis=1),
  }


def draw_completions(
  graphdef,
  params,
  context_BxC,
  context_mask_BxC,
  previews: dict,
  rng,
  spec: PreviewSpec,
  group_size: int,
  settings,
  mesh,
) -> dict:
  """Stage 2: for each prompt, counts_k = allocate(G, K) completions after preview k, all
  B·G rows in one call. Returns the stage-2 sample (``tokens_NxT`` ...) plus ``preview_N``
  (the global preview index b·K + k of each row) and the row's preview ``*_NxM`` arrays."""
  K = spec.num_previews
  B = len(context_BxC)
  local_G = layout.preview_of_rollout(group_size, K)
  preview_N = (np.arange(B)[:, None] * K + local_G[None, :]).reshape(-1)
  prompt_N = preview_N // K
  tokens_NxL = np.concatenate([context_BxC[prompt_N], previews["tokens_BKxM"][preview_N]], 1)
  mask_NxL = np.concatenate([context_mask_BxC[prompt_N], previews["mask_BKxM"][preview_N]], 1)
  tokens_NxL, mask_NxL = layout.left_align(tokens_NxL, mask_NxL, spec.pad_id)
  out = draw_rows(
    graphdef,
    params,
    tokens_NxL,
    mask_NxL,
    rng,
    max_new_tokens=settings.max_new_tokens,
    stop_ids=spec.eos_id,
    pad_id=spec.pad_id,
    settings=settings,
    mesh=mesh,
    # The rows of one preview are consecutive: runs of gcd(counts) lie inside one preview.
    prompt_share=int(np.gcd.reduce(layout.allocate(group_size, K))),
  )
  out.update(
    {
      "preview_N": preview_N.astype(np.int32),
      "preview_NxM": previews["tokens_BKxM"][preview_N],
      "preview_mask_NxM": previews["mask_BKxM"][preview_N],
      "preview_logps_NxM": previews["logps_BKxM"][preview_N],
    }
  )
  return out


__all__ = ["PreviewSpec", "draw_completions", "draw_previews", "draw_rows", "make_context"]
