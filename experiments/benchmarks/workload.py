"""The work ``step.py`` times, shared by its peers: the checkpoint's prompts, the cheap host-side
reward, the benchmark's config and ``OursSteps``, our RL step set up once and timed per call
(``peers/trl.py`` and ``peers/tunix.py`` run theirs on the same work)."""

from __future__ import annotations

import json
import os
import tempfile
import time

import jax
import numpy as np

from experiments.benchmarks import common as bc
from grpo_jax import config as config_lib
from grpo_jax import models
from grpo_jax import sharding as shard_lib
from grpo_jax.rewards.graded import Graded
from grpo_jax.rollout.one_stage import OneStageRollout, Policy, SampleSettings
from grpo_jax.train.checkpoint import Checkpointer
from grpo_jax.train.microbatch import num_parts, row_blocks
from grpo_jax.train.optimizer import make_optimizer
from grpo_jax.train.state import init_state
from grpo_jax.train.update import make_update_step, prompt_share


def reward_of(text: str) -> float:
  """Share of completion words that end in an even digit ("t12" of the toy vocabulary, "48" of
  the real model's text): cheap, deterministic, varies per row."""
  words = text.split()
  return sum(w[-1] in "02468" for w in words) / max(len(words), 1)


def prompts_of(name: str, n: int, P: int, seed: int = 0) -> dict:
  """``n`` prompts for checkpoint ``name``: ``prompts_BxP``, ``mask_BxP``, ``pad_id`` and
  ``texts`` (what TRL tokenizes back into the same ids). The toy checkpoints: P random tokens
  (seed ``seed``); any other model: the arithmetic task's chat prompts (``seed`` picks which
  ``n``), left-padded to its prompt slots."""
  if name in ("tiny", "small"):
    prompts_BxP = bc.random_prompts(n, P, bc.SIZES[name]["vocab"], seed)
    texts = [" ".join(f"t{i}" for i in p) for p in prompts_BxP]
    return dict(prompts_BxP=prompts_BxP, mask_BxP=np.ones_like(prompts_BxP), pad_id=bc.PAD_ID,
                texts=texts)  # fmt: skip
  return bc.chat_prompts(name, n, start=seed * n)


class BenchTask:
  """The task interface ``OneStageRollout`` needs: fixed prompts (``prompts_of``), HF-tokenizer
  decoding, the reward above. ``eos_id = -1``: no sampled token ends a row (no early stop)."""

  votes = False  # no answers to vote on

  def __init__(self, tokenizer, prompts: dict):
    self.tokenizer, self.prompts_BxP, self.mask_BxP = (
      tokenizer,
      prompts["prompts_BxP"],
      prompts["mask_BxP"],
    )
    self.pad_id, self.eos_id, self.prompt_len = prompts["pad_id"], -1, self.prompts_BxP.shape[1]
    self.stop_ids = (self.eos_id,)
    self.load_metrics = {}  # nothing to report

  def encode_prompts(self, problems):
    rows = np.asarray(problems)
    return self.prompts_BxP[rows], self.mask_BxP[rows]

  def decode(self, tokens_NxT, mask_NxT):
    return self.tokenizer.batch_decode(
      np.where(mask_NxT > 0, tokens_NxT, self.pad_id), skip_special_tokens=True
    )

  def rewards(self, problems, completions) -> Graded:
    return Graded(np.array([reward_of(c) for c in completions], np.float32), {})


def bench_config(B: int, G: int, T: int, micro: int = 0, kl_coef: float = 0.0):
  cfg = config_lib.base_config()
  cfg.loss.kl_coef = kl_coef  # β of the KL penalty to the initial policy (TRL's ``beta``)
  cfg.sampling.prompts_per_step, cfg.sampling.group_size, cfg.sampling.max_new_tokens = B, G, T
  cfg.loss.micro_batch_size = micro
  cfg.loss.share_prompt = True
  cfg.optimizer.warmup_steps = 0
  cfg.optimizer.learning_rate = 1e-6
  return config_lib.finalize(cfg)


def rows_per_prompt(cfg, N: int) -> int:
  """Rows per prompt pass of the update of N rows under ``cfg`` (1 = every row its own)."""
  k = num_parts(N, int(cfg.loss.micro_batch_size), "micro_batch_size")
  return prompt_share(
    cfg.loss.share_prompt, cfg.sampling.group_size, N, k, row_blocks(N, k, jax.device_count())
  )


def update_flops(name: str, N: int, P: int, T: int, share: int = 1) -> float:
  """3 × forward of the work done: the prompt once per ``share`` rows (its causal pairs too),
  every row's completion over its whole context, the completion positions unembedded."""
  f = bc.flops_of(name)
  L = P + T
  prompt_pairs = bc.causal_pairs(0, P)
  completion_pairs = bc.causal_pairs(P, L) - prompt_pairs
  pairs = N / share * prompt_pairs + N * completion_pairs
  return 3 * f.forward(N / share * P + N * T, N * T, pairs)


class OursSteps:
  """Our RL step on one model, set up once (checkpoint, optimizer state, compiled update).
  Each call runs and times one step, rollout + update, then its breakdown pieces apart (not
  part of the step): grading (decode + rewards on the host; sampling = rollout − grading), one
  log-prob forward pass and a checkpoint save. ``summary`` takes the best of steps 2 onward
  (step 1 compiles); ``close`` ends the checkpointer."""

  def __init__(
    self, name: str, B: int, G: int, P: int, T: int, counter, micro: int, kl_coef: float = 0.0
  ):
    self.hf = hf = models.load_hf(bc.model_dir(name), dtype="float32")
    prompts = prompts_of(name, B, P)
    P = prompts["prompts_BxP"].shape[1]  # the chat prompts' slots
    self.name, self.B, self.G, self.P, self.T, self.counter = name, B, G, P, T, counter
    self.cfg = cfg = bench_config(B, G, T, micro, kl_coef)
    self.mesh = mesh = bc.mesh()
    optimizer = make_optimizer(cfg.optimizer)
    state = init_state(hf.params, optimizer, cfg)
    shardings = jax.tree.map(lambda _: shard_lib.replicated(mesh), state)
    self.state = jax.device_put(state, shardings)
    self.update = make_update_step(hf.graphdef, optimizer, cfg, mesh, shardings, prompt_len=P)
    self.logps_fn = jax.jit(lambda p, t, m: models.token_logps(hf.graphdef, p, t, m))
    self.task = BenchTask(hf.tokenizer, prompts)
    self.settings = SampleSettings(max_new_tokens=T)
    self.rollout = OneStageRollout(cfg, self.task)
    self.ckpt_dir = tempfile.TemporaryDirectory(prefix="bench_ckpt_")
    self.ckpt = Checkpointer(self.ckpt_dir.name, every=1, keep=1)
    self.per_step = []

  def __call__(self) -> dict:
    step, B, G, T, task = len(self.per_step), self.B, self.G, self.T, self.task
    before = self.counter.count
    rng = jax.random.fold_in(jax.random.key(0), step)
    t0 = time.perf_counter()
    policy = Policy(self.hf.graphdef, self.state.params, self.mesh, self.settings)
    batch = self.rollout(policy, list(range(B)), rng).device_batch()
    t_roll = time.perf_counter() - t0
    t_up = time.perf_counter()
    self.state, metrics = self.update(self.state, batch)
    jax.block_until_ready(metrics)
    self.kl = float(np.asarray(metrics.get("loss/kl", np.nan)).mean())
    t_up = time.perf_counter() - t_up
    total = time.perf_counter() - t0
    assert batch.completion_mask_NxT.sum() == B * G * T  # no early stop
    compiles = self.counter.count - before
    t_rew = time.perf_counter()
    T_cols = batch.completion_mask_NxT.shape[1]
    texts = task.decode(batch.tokens_NxL[:, -T_cols:], batch.completion_mask_NxT)
    task.rewards(list(range(len(texts))), texts)
    t_rew = time.perf_counter() - t_rew
    tokens_NxL, mask_NxL = batch.tokens_NxL, batch.input_mask_NxL
    t_lp = time.perf_counter()
    self.logps_fn(self.state.params, tokens_NxL, mask_NxL).block_until_ready()
    t_lp = time.perf_counter() - t_lp
    t_ck = time.perf_counter()
    self.ckpt.save(step, self.state)
    self.ckpt.wait()
    t_ck = time.perf_counter() - t_ck
    self.per_step.append(
      {
        "step": step + 1,
        "total_s": total,
        "rollout_s": t_roll,
        "sampling_s": max(t_roll - t_rew, 0.0),
        "rewards_s": t_rew,
        "logprobs_s": t_lp,
        "update_s": t_up,
        "checkpoint_s": t_ck,
        "compiles": compiles,
      }
    )
    print(json.dumps({"model": self.name, "ours": self.per_step[-1]}), flush=True)
    return self.per_step[-1]

  def close(self):
    self.ckpt.close()
    self.ckpt_dir.cleanup()

  def summary(self, ceiling: float) -> dict:
    warm = self.per_step[1:] or self.per_step
    best = {k: min(s[k] for s in warm) for k in warm[0] if k.endswith("_s")}
    N = self.B * self.G
    rows_share = rows_per_prompt(self.cfg, N)
    flops = update_flops(self.name, N, self.P, self.T, rows_share)
    return {
      "model": os.path.basename(self.name.rstrip("/")),
      "P": self.P,
      "T": self.T,
      "kl_coef": float(self.cfg.loss.kl_coef),
      "kl_last": self.kl,  # the last update's KL to the reference (0 at β = 0 or unused)
      "step_s": best["total_s"],
      **{k: v for k, v in best.items() if k != "total_s"},
      "compiles_by_step": [s["compiles"] for s in self.per_step],
      "rows_per_prompt": rows_share,
      "update_mfu_pct": 100 * flops / best["update_s"] / 1e9 / ceiling,
      "step_flops_pct": 100 * (flops / 3 * 4) / best["total_s"] / 1e9 / ceiling,
    }
