"""The update sections of ``accelerator.py``: one jitted ``train.update`` step of the
library at a model's shape (bf16 compute over float32 masters, μ = 1, no KL, each group's prompt
once, every decoder layer rematerialised, vocabulary-chunked log-probs) and its MFU against the
measured bf16 matmul rate; then the same step on completions of mixed lengths, padded and packed
(``loss.pack``)."""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

from experiments.benchmarks import common as bc
from experiments.benchmarks.accel.device import MODELS
from grpo_jax import models


def forward_flops(cfg: models.ModelConfig, positions, unembedded, key_pairs) -> float:
  """Matmul FLOPs (2 per multiply-add) of a forward pass: projections and MLP per position,
  the unembedding per unembedded position, q·k and p·v per (query, visible key) pair."""
  D, H, Hk, Dh, F = cfg.hidden_dim, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.mlp_dim
  dense = cfg.num_layers * 2 * (2 * D * H * Dh + 2 * D * Hk * Dh + 3 * D * F)
  attn = cfg.num_layers * 4 * H * Dh
  return dense * positions + 2 * D * cfg.vocab_size * unembedded + attn * key_pairs


def update_flops(cfg: models.ModelConfig, N: int, P: int, T: int, share: int) -> float:
  """3 × forward of the update's work: each prompt once per ``share`` rows, every completion
  position over its whole context, the completion positions unembedded."""
  prompt_pairs = P * (P + 1) / 2
  completion_pairs = T * P + T * (T + 1) / 2
  pairs = N / share * prompt_pairs + N * completion_pairs
  return 3 * forward_flops(cfg, N / share * P + N * T, N * T, pairs)


def update_config(u: dict, vocab_chunk: int):
  from grpo_jax import config as config_lib

  cfg = config_lib.base_config()
  cfg.sampling.prompts_per_step, cfg.sampling.group_size = u["prompts"], u["group"]
  cfg.sampling.max_new_tokens = u["new_tokens"]
  cfg.model.dtype, cfg.model.param_dtype, cfg.model.remat = "bfloat16", "float32", "full"
  cfg.model.logps_vocab_chunk = vocab_chunk
  cfg.loss.micro_batch_size = u["micro"]
  cfg.loss.share_prompt = True
  cfg.loss.kl_coef = 0.0
  cfg.optimizer.warmup_steps = 0
  cfg.optimizer.learning_rate = 1e-6
  return config_lib.finalize(cfg)


def mixed_lengths(N: int, T: int) -> np.ndarray:
  """Completion lengths uniform over T/8 … T, the first row T long: the batch keeps its full
  width (no length bucket cuts it), and about 44% of its completion slots are padding."""
  lengths_N = np.random.default_rng(1).integers(max(T // 8, 1), T + 1, N)
  lengths_N[0] = T
  return lengths_N


def update_batch(N: int, G: int, P: int, T: int, V: int, lengths_N=None):
  """The update's host arrays: G rows per prompt, completions ``lengths_N`` long (default
  every one T), rewards 0 and 1 in every group (non-zero advantages)."""
  rng = np.random.default_rng(0)
  prompts_NxP = np.repeat(rng.integers(3, V, (N // G, P)), G, axis=0)
  lengths_N = np.full(N, T) if lengths_N is None else lengths_N
  completion_NxT = (np.arange(T)[None] < lengths_N[:, None]).astype(np.int32)
  tokens_NxL = np.concatenate([prompts_NxP, rng.integers(3, V, (N, T)) * completion_NxT], axis=1)
  rewards_N = (np.arange(N) % 2).astype(np.float32)
  groups_N = np.repeat(np.arange(N // G), G).astype(np.int32)
  from grpo_jax.rollout.batch import UpdateBatch

  return UpdateBatch(
    tokens_NxL=tokens_NxL.astype(np.int32),
    input_mask_NxL=np.concatenate([np.ones((N, P), np.int32), completion_NxT], axis=1),
    completion_mask_NxT=completion_NxT,
    sample_logps_NxT=np.zeros((N, T), np.float32),
    rewards_N=rewards_N,
    accuracy_N=rewards_N,
    group_ids_N=groups_N,
    subgroup_ids_N=groups_N,
    loss_mask_N=np.ones(N, np.int32),
    step_accuracy_N=np.full(N, rewards_N.mean(), np.float32),
  )


def update_bytes(cfg: models.ModelConfig, N: int, L: int, T: int, chunk: int) -> float:
  """Masters, gradients, two Adam moments (float32) and a bf16 copy; every layer's bf16 input
  (remat), one layer's float32 attention scores and probabilities and MLP activations, and
  three float32 logits chunks."""
  D, F, H = cfg.hidden_dim, cfg.mlp_dim, cfg.num_heads
  act = cfg.num_layers * N * L * D * 2 + N * H * L * L * 8 + 3 * N * L * F * 2
  return 18 * cfg.num_params + act + 3 * N * T * chunk * 4


def built(u: dict, cfg):
  """(model config, mesh, state, jitted update) of ``u``'s model under ``cfg``."""
  from grpo_jax import sharding as shard_lib
  from grpo_jax.train.optimizer import make_optimizer
  from grpo_jax.train.state import init_state
  from grpo_jax.train.update import make_update_step

  model_cfg = dataclasses.replace(MODELS[u["model"]], remat="full")
  mesh = bc.mesh()
  graphdef, params = models.init_params(model_cfg, 1)
  optimizer = make_optimizer(cfg.optimizer)
  state = init_state(params, optimizer, cfg)
  del params
  shardings = jax.tree.map(lambda _: shard_lib.replicated(mesh), state)
  state = jax.device_put(state, shardings)
  P = u["prompt_len"]
  return model_cfg, mesh, state, make_update_step(graphdef, optimizer, cfg, mesh, shardings, P)


def update_run(u: dict, vocab_chunk: int, rate_tflops: float) -> dict:
  from grpo_jax import sharding as shard_lib
  from grpo_jax.train.microbatch import num_parts, row_blocks
  from grpo_jax.train.update import prompt_share

  N, G, P, T = u["prompts"] * u["group"], u["group"], u["prompt_len"], u["new_tokens"]
  cfg = update_config(u, vocab_chunk)
  model_cfg, mesh, state, update = built(u, cfg)
  batch = shard_lib.shard_batch(update_batch(N, G, P, T, model_cfg.vocab_size), mesh)
  t0 = time.perf_counter()
  compiled = update.lower(state, batch).compile()
  compile_s = time.perf_counter() - t0
  times = []
  for _ in range(u["steps"]):
    t0 = time.perf_counter()
    state, metrics = compiled(state, batch)
    jax.block_until_ready((state, metrics))
    times.append(time.perf_counter() - t0)
  assert np.isfinite(float(metrics["loss/total"]))
  del state, compiled
  k = num_parts(N, u["micro"], "micro")
  blocks = row_blocks(N, k, jax.device_count())
  share = prompt_share(cfg.loss.share_prompt, cfg.sampling.group_size, N, k, blocks)
  flops = update_flops(model_cfg, N, P, T, share)
  step_s = min(times[1:] or times)
  return {
    "model": u["model"],
    "rows": N,
    "L": P + T,
    "micro": u["micro"],
    "rows_per_prompt": share,
    "remat": "full",
    "compile_s": compile_s,
    "step_s": step_s,
    "model_tflop": flops / 1e12,
    "model_tflops_s": flops / step_s / 1e12,
    "mfu_pct": 100 * flops / step_s / 1e12 / rate_tflops,
    "hfu_pct": 100 * flops * 4 / 3 / step_s / 1e12 / rate_tflops,
  }


def pack_run(u: dict, vocab_chunk: int) -> dict:
  """The update on completions of ``mixed_lengths``, padded and packed (``loss.pack``: the real
  tokens in rows of the padded width, each shared prompt once per segment), alternating from one
  state, ``u["steps"]`` times each; the first of each compiles. Seconds are the best of the rest,
  and the packed rows' share of real tokens against the padded rows'."""
  from grpo_jax import sharding as shard_lib
  from grpo_jax.train.packing import Packer

  N, G, P, T = u["prompts"] * u["group"], u["group"], u["prompt_len"], u["new_tokens"]
  cfg = update_config(u, vocab_chunk)
  model_cfg, mesh, state, update = built(u, cfg)
  host = update_batch(N, G, P, T, model_cfg.vocab_size, mixed_lengths(N, T))
  loss = dataclasses.replace(cfg.loss, pack=True)
  packed, fill = Packer(loss, G, shard_lib.batch_size_multiple(mesh))(host)
  sides = {k: shard_lib.shard_batch(b, mesh) for k, b in (("padded", host), ("packed", packed))}
  times, losses = {k: [] for k in sides}, {k: [] for k in sides}
  for _ in range(u["steps"]):
    for name, batch in sides.items():
      t0 = time.perf_counter()
      state, metrics = update(state, batch)
      jax.block_until_ready((state, metrics))
      times[name].append(time.perf_counter() - t0)
      losses[name].append(float(metrics["loss/total"]))
  assert np.isfinite(losses["padded"] + losses["packed"]).all()
  best = {k: min(v[1:] or v) for k, v in times.items()}
  return {
    "model": u["model"],
    "rows": N,
    "L": P + T,
    "packed_rows": int(fill["pack/rows"]),
    "padded_fill": fill["pack/padded_fill"],
    "packed_fill": fill["pack/fill"],
    "padded_compile_s": times["padded"][0] - best["padded"],
    "packed_compile_s": times["packed"][0] - best["packed"],
    "padded_s": best["padded"],
    "packed_s": best["packed"],
    "speedup": best["padded"] / best["packed"],
  }
