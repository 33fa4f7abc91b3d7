"""The two sampler stages of strategy-conditioned sampling (METHODS §5): previews, then
completions conditioned on them.

  stage 1   K previews per prompt from [prompt | template], B·K rows in one sampler call, each
            ending at the first token whose decoded text completes the delimiter (a stop
            string, kept as the preview's last token), at an end token, or after
            M = max_preview_tokens tokens.
  stage 2   G completions per prompt, counts_k = allocate(G, K) of them conditioned on preview k,
            from [prompt | template | preview] left-aligned: B·G rows in one sampler call.

Both stages are single calls of the jitted ``sampling.sample`` (fixed shapes, so each compiles
once); rows are split over the mesh's batch axes and padded to a multiple of them. Shapes as in
:mod:`grpo_jax.strategy.layout`; C = context slots (prompt + template).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from grpo_jax import sharding as shard_lib
from grpo_jax.models.shared_prompt import group_run
from grpo_jax.sampling.generate import Samples
from grpo_jax.sampling.policy import Policy
from grpo_jax.sampling.sampler import sample
from grpo_jax.strategy import layout


def delimiter_token_ids(tokenizer, delimiter: str) -> tuple[int, ...]:
  """Every non-special token whose decoded text contains ``delimiter`` (a BPE vocabulary merges
  ``"\n"`` into ``".\n"``, ``"\n\n"`` ...): the sampler stops a preview on any of them."""
  special = set(tokenizer.all_special_ids)
  ids = [i for i in range(len(tokenizer)) if i not in special]
  texts = tokenizer.batch_decode([[i] for i in ids])
  return tuple(i for i, t in zip(ids, texts) if delimiter in t)


@dataclasses.dataclass(frozen=True)
class PreviewSpec:
  """What stage 1 writes and how it stops."""

  num_previews: int  # K
  max_preview_tokens: int  # M
  template_ids: tuple[int, ...]
  delimiter: str  # the stop string
  delimiter_ids: tuple[int, ...]  # tokens whose text contains it (stop in the sampler)
  eos_ids: tuple[int, ...]  # the task's end tokens
  pad_id: int

  @classmethod
  def from_config(cls, strategy_cfg, tokenizer, stop_ids=None) -> PreviewSpec:
    """``stop_ids``: the task's end tokens (default: the tokenizer's EOS)."""
    delimiter_ids = delimiter_token_ids(tokenizer, strategy_cfg.delimiter)
    if not delimiter_ids:
      raise ValueError(
        f"no token of the vocabulary contains strategy.delimiter {strategy_cfg.delimiter!r}"
      )
    stop_ids = tuple(stop_ids or (tokenizer.eos_token_id,))
    return cls(
      strategy_cfg.num_previews,
      strategy_cfg.max_preview_tokens,
      tuple(tokenizer.encode(strategy_cfg.preview_template, add_special_tokens=False)),
      strategy_cfg.delimiter,
      delimiter_ids,
      tuple(int(i) for i in stop_ids),
      int(tokenizer.pad_token_id),
    )


def make_context(prompts_BxP: np.ndarray, prompt_mask_BxP: np.ndarray, spec: PreviewSpec):
  """[left-padded prompt | template] and its mask: int32 ``tokens_BxC``, ``mask_BxC``."""
  prompts_BxP = np.asarray(prompts_BxP, np.int32)
  template_BxL = np.broadcast_to(
    np.asarray(spec.template_ids, np.int32), (len(prompts_BxP), len(spec.template_ids))
  )
  tokens_BxC = np.concatenate([prompts_BxP, template_BxL], axis=1)
  mask_BxC = np.concatenate(
    [np.asarray(prompt_mask_BxP, bool), np.ones(template_BxL.shape, bool)], 1
  )
  return tokens_BxC, mask_BxC.astype(np.int32)


def stop_string_ends(tokens_NxM, mask_NxM, delimiter: str, decode) -> np.ndarray:
  """Per row, the number of tokens up to and including the first one whose decoded prefix
  contains ``delimiter`` (also a stop string that spans tokens, e.g. ``"d\\n"`` as ``" add"`` +
  ``"\\n"``), or 0 where the text never contains it. Rows are prefix-masked;
  ``decode(tokens_NxT, mask_NxT) -> texts``. Int [N]."""
  prefix = lambda n, t: decode(tokens_NxM[n : n + 1], (np.arange(mask_NxM.shape[1]) < t)[None])[0]
  ends_N = np.zeros(len(tokens_NxM), np.int64)
  for n, text in enumerate(decode(tokens_NxM, mask_NxM)):
    if delimiter not in text:
      continue
    length = int(mask_NxM[n].sum())
    if delimiter not in prefix(n, length - 1):  # the sampler stopped on the completing token
      ends_N[n] = length
      continue
    ends_N[n] = next(t for t in range(1, length) if delimiter in prefix(n, t))
  return ends_N


def draw_rows(
  policy: Policy, tokens_NxC, mask_NxC, rng, *, stop_ids, pad_id: int, prompt_share: int = 1
) -> Samples:
  """One sampler call over N left-padded rows on ``policy.mesh`` (at most
  ``policy.settings.max_new_tokens`` new tokens, stopping on ``stop_ids``); host arrays back
  (rows padded to a multiple of the batch devices by repeating the last row, then trimmed).
  ``prompt_share``: the rows come in aligned runs of that many identical contexts, each
  prefilled once per device-local run (``Decode.prompt_share``).

  Multi-host: the rows are this process's (``distributed.problem_share``), padded to a multiple
  of its own devices, and so are the rows returned.

  With ``policy.engine`` (an external ``sampling.engine``), that engine draws the rows instead
  (each run of ``prompt_share`` identical contexts one request)."""
  if policy.engine is not None:
    return policy.engine.sample(
      policy, tokens_NxC, mask_NxC, rng, stop_ids=stop_ids, pad_id=pad_id, group_size=prompt_share
    )
  mesh, settings = policy.mesh, policy.settings
  n, devices = len(tokens_NxC), shard_lib.batch_size_multiple(mesh)
  extra = -n % shard_lib.process_row_blocks(mesh)
  pad_rows = lambda x: np.concatenate([x, np.repeat(x[-1:], extra, 0)]) if extra else x
  batch = shard_lib.shard_batch({"p": pad_rows(tokens_NxC), "m": pad_rows(mask_NxC)}, mesh)
  num_rows = batch["p"].shape[0]  # every process's rows
  # The padding rows copy the last row, so they extend its run.
  share = group_run(prompt_share, num_rows, 1, devices)
  decode = settings.decode(stop_ids, pad_id, prompt_share=share, row_blocks=devices)
  # Under the mesh: layout constraints apply (as in ``generate``).
  sampled = shard_lib.under_mesh(sample, mesh)(
    policy.graphdef, policy.params, batch["p"], batch["m"], rng, decode
  )
  return Samples.from_sampler(shard_lib.local_rows(sampled, mesh), settings, num_rows, n)


@dataclasses.dataclass(frozen=True)
class Previews:
  """K previews of each of B prompts, BK rows of M slots, right-padded with prefix masks."""

  tokens_BKxM: np.ndarray  # int32; pad after the preview
  mask_BKxM: np.ndarray  # int32; 1 = a preview token
  logps_BKxM: np.ndarray  # float32; the sampler's log-probs (0 off the mask)
  stopped_BK: np.ndarray  # bool; ended on the delimiter

  def rows(self, preview_N: np.ndarray) -> layout.Segment:
    """The preview of each of N rows (``preview_N``: global preview indices b·K + k)."""
    return layout.Segment(
      self.tokens_BKxM[preview_N], self.mask_BKxM[preview_N], self.logps_BKxM[preview_N]
    )


def draw_previews(policy: Policy, context_BxC, context_mask_BxC, rng, spec, decode) -> Previews:
  """Stage 1: K previews per prompt, at most M = ``spec.max_preview_tokens`` tokens each,
  ``stopped_BK`` where one ended on the delimiter. A preview that ends on an end token keeps
  the text before it: the end token is dropped so stage 2 continues the response, not a new
  one. ``decode``: the
  task's ``decode(tokens_NxT, mask_NxT) -> texts``, which finds delimiters that span tokens
  (cut after the token that completes them)."""
  K = spec.num_previews
  out = draw_rows(
    policy.with_max_new_tokens(spec.max_preview_tokens),
    np.repeat(context_BxC, K, 0),
    np.repeat(context_mask_BxC, K, 0),
    rng,
    stop_ids=tuple(dict.fromkeys(spec.delimiter_ids + spec.eos_ids)),
    pad_id=spec.pad_id,
    prompt_share=K,
  )
  tokens, mask, logps = out.tokens_NxT, out.mask_NxT, out.logps_NxT
  mask = np.where(np.isin(tokens, spec.eos_ids) & (mask != 0), 0, mask)
  ends_N = stop_string_ends(tokens, mask, spec.delimiter, decode)
  mask = np.where((ends_N[:, None] > 0) & (np.arange(mask.shape[1]) >= ends_N[:, None]), 0, mask)
  return Previews(
    tokens_BKxM=np.where(mask != 0, tokens, spec.pad_id).astype(np.int32),
    mask_BKxM=mask.astype(np.int32),
    logps_BKxM=np.where(mask != 0, logps, 0.0).astype(np.float32),
    stopped_BK=ends_N > 0,
  )


def draw_completions(
  policy: Policy, context_BxC, context_mask_BxC, previews: Previews, rng, spec, group_size: int
) -> tuple[Samples, np.ndarray]:
  """Stage 2: for each prompt, counts_k = allocate(G, K) completions after preview k, all
  B·G rows in one call. Returns the stage-2 samples and int32 ``preview_N`` (the global
  preview index b·K + k of each row; ``previews.rows(preview_N)`` are their previews)."""
  K = spec.num_previews
  B = len(context_BxC)
  local_G = layout.preview_of_rollout(group_size, K)
  preview_N = (np.arange(B)[:, None] * K + local_G[None, :]).reshape(-1)
  prompt_N = preview_N // K
  tokens_NxL = np.concatenate([context_BxC[prompt_N], previews.tokens_BKxM[preview_N]], 1)
  mask_NxL = np.concatenate([context_mask_BxC[prompt_N], previews.mask_BKxM[preview_N]], 1)
  tokens_NxL, mask_NxL = layout.left_align(tokens_NxL, mask_NxL, spec.pad_id)
  out = draw_rows(
    policy,
    tokens_NxL,
    mask_NxL,
    rng,
    stop_ids=spec.eos_ids,
    pad_id=spec.pad_id,
    # The rows of one preview are consecutive: runs of gcd(counts) lie inside one preview.
    prompt_share=int(np.gcd.reduce(layout.allocate(group_size, K))),
  )
  return out, preview_N.astype(np.int32)


__all__ = [
  "PreviewSpec",
  "Previews",
  "delimiter_token_ids",
  "draw_completions",
  "draw_previews",
  "draw_rows",
  "make_context",
  "stop_string_ends",
]
