"""The two-stage rollout (METHODS §5): previews, completions conditioned on them, graded and
packed as one :class:`~grpo_jax.rollout.batch.RolloutBatch`.

Batch layout (N = B·G rows, C = prompt + template slots, R = M + T response slots):
  tokens_NxL          [prompt ⊕ template, left-padded to C | preview ⊕ completion, right-padded]
  completion_mask_NxT completion tokens (+ preview tokens when ``strategy.train_on_preview``)
  sample_logps_NxT    aligned with the response (preview log-probs come from whoever wrote the
                      preview: the initial policy when presampled, 0 for a strategy file's)
  subgroup_ids_N      global preview index b·K + k (merged previews share the smaller one)
  lengths_N           completion tokens only; truncated_N stage 2's (no stop token)
The preview is context, never rewarded: the reward reads the completion text only (prefixed by
the delimiter the preview ended on, so a ``<plan>;<answer>`` grammar still parses).
Registered as ``"two_stage"`` in ``grpo_jax.rollout.registry.ROLLOUTS``.
"""

from __future__ import annotations

import time

import jax
import numpy as np
from etils import epath

from grpo_jax.config.experiment import Experiment
from grpo_jax.rollout import dynamic_sampling
from grpo_jax.rollout.batch import RolloutBatch
from grpo_jax.rundir import names, write
from grpo_jax.sampling.engine import build_engine, push_metrics
from grpo_jax.sampling.policy import Policy
from grpo_jax.sharding import distributed
from grpo_jax.strategy import layout
from grpo_jax.strategy import previews as stages
from grpo_jax.strategy.hints import load_strategy_file
from grpo_jax.strategy.presample import (
  PresampleError,
  PresamplePlan,
  load_presample,
  write_presample,
)
from grpo_jax.strategy.stats import PreviewStats


def presample_budget(cfg: Experiment, row_multiple: int) -> int:
  """Prompts the presample must hold: ``strategy.presample_prompts``, or every prompt the run
  can draw (steps × what one step of ``dynamic_sampling.sample_batch`` reads)."""
  per_step = dynamic_sampling.max_prompts_per_step(cfg, row_multiple)
  return cfg.strategy.presample_prompts or cfg.steps * per_step


class TwoStageRollout:
  """Holds the preview spec, the preview source and the per-preview success counts of a run."""

  name = "two_stage"
  majority_vote = False  # evaluation reports pass@k only: the graded text is not the sample

  def __init__(self, cfg: Experiment, task):
    self.cfg, self.task = cfg, task
    self.spec = stages.PreviewSpec.from_config(cfg.strategy, task.tokenizer, task.stop_ids)
    self.prompt_len = task.prompt_len + len(self.spec.template_ids)  # P of the update batch
    self.presampled = None
    # source = 'file': read and checked here, before any model is built (a bad row stops the load)
    s = cfg.strategy
    self.hints = load_strategy_file(s.file, task, self.spec) if s.source == "file" else None
    self.stats = PreviewStats()
    engine = build_engine(cfg)  # vLLM: the process's one engine
    self.engine = None if engine.name == "jax" else engine  # None: our sampler on the mesh

  def describe(self) -> str:
    G, K = self.cfg.sampling.group_size, self.spec.num_previews
    counts = layout.allocate(G, K).tolist()
    source = f" of {self.hints.path}" if self.hints is not None else ""
    return (
      f"strategy sampling: K={K} {self.cfg.strategy.source} previews{source}, completions per "
      f"preview {counts} (G={G}, remainder {G % K} spread over the first previews; "
      f"{self.cfg.sampling.engine} engine)"
    )

  def prepare(self, policy: Policy, workdir, step: int, log=print) -> str | None:
    """Opens the presample file, drawing it first with ``policy`` (the initial one) when it
    does not exist yet and the run is at step 0. Returns its path (None when online)."""
    if self.cfg.strategy.source != "presampled":
      return None
    from grpo_jax import sharding as shard_lib  # noqa: PLC0415

    s, B = self.cfg.strategy, self.cfg.sampling.prompts_per_step
    path = epath.Path(s.presample_path or epath.Path(workdir) / names.PRESAMPLE)
    num = presample_budget(self.cfg, shard_lib.batch_size_multiple(policy.mesh))
    if not distributed.agree((path / names.PRESAMPLE_META).exists()):
      if step > 0:
        raise PresampleError(
          f"no presample at {path} and the run resumes at step {step}: the "
          "initial policy is gone; run --mode=presample on a fresh workdir"
        )
      progress = self.cfg.logging.progress and distributed.is_primary()  # one bar per job
      plan = PresamplePlan(num, B, self.cfg.seed, progress)
      write_presample(path, policy, self.task, self.spec, plan, log=log)
    self.presampled = load_presample(path, self.spec, num)
    return str(path)

  def sample(self, policy: Policy, problems, group_size: int, rng, online: bool = False):
    """Both stages for ``problems``, graded and packed (see the module doc); also returns the
    preview text of each row (``texts_N``). ``online``: fresh previews from ``policy`` even
    when a presample or a strategy file is open (held-out prompts are in neither)."""
    task, spec, K = self.task, self.spec, self.spec.num_previews
    context_BxC, context_mask_BxC = stages.make_context(*task.encode_prompts(problems), spec)
    key_preview, key_completion = jax.random.split(rng)
    push_s = 0.0
    if self.engine is not None:  # both stages drawn by it (``strategy.previews.draw_rows``)
      push_s = self.engine.push_weights(policy.params)
      policy = policy.replace(engine=self.engine)
    if self.presampled is not None and not online:
      previews = self.presampled.previews(task, problems)
    elif self.hints is not None and not online:  # K of the file's strategies, from this step's key
      previews = self.hints.previews(task, problems, key_preview)
    else:
      previews = stages.draw_previews(
        policy, context_BxC, context_mask_BxC, key_preview, spec, task.decode
      )
    samples, preview_N = stages.draw_completions(
      policy, context_BxC, context_mask_BxC, previews, key_completion, spec, group_size
    )
    texts_BK = task.decode(previews.tokens_BKxM, previews.mask_BKxM)
    completions_N = task.decode(samples.tokens_NxT, samples.mask_NxT)
    delimiter = self.cfg.strategy.delimiter
    graded_N = [
      (delimiter if previews.stopped_BK[j] else "") + c for j, c in zip(preview_N, completions_N)
    ]
    problems_N = [problems[j // K] for j in preview_N]
    t0 = time.perf_counter()
    rewards_N, reward_m = task.rewards(problems_N, graded_N)
    rewards_N = np.asarray(rewards_N, np.float32)
    reward_s = time.perf_counter() - t0
    merged_BK = layout.preview_ids(texts_BK, K, self.cfg.strategy.merge_identical)
    group_ids_N, subgroup_ids_N, _ = layout.row_ids(merged_BK, group_size, K)
    packed = layout.pack_responses(
      previews.rows(preview_N),
      layout.Segment(samples.tokens_NxT, samples.mask_NxT, samples.logps_NxT),
      spec.pad_id,
      self.cfg.strategy.train_on_preview,
    )
    context_N = np.repeat(np.arange(len(problems)), group_size)
    distinct_B = [
      len({layout.normalize_preview(t) for t in texts_BK[b : b + K]})
      for b in range(0, len(texts_BK), K)
    ]
    metrics = layout.subgroup_metrics(
      rewards_N,
      group_ids_N,
      subgroup_ids_N,
      previews.mask_BKxM.sum(1),
      distinct_B,
      previews.stopped_BK,
      group_size % K,
    )
    metrics["rollout/decode_waste"] = samples.decode_waste  # stage 2's loop
    metrics["time/reward_s"] = reward_s
    metrics.update(push_metrics(self.engine, push_s))
    if self.engine is not None:
      metrics.update(self.engine.memory)  # memory/engine_*: its own memory
    metrics.update(reward_m)  # this call's reward functions' (or grader's) scalars
    batch = RolloutBatch(
      tokens_NxL=np.concatenate([context_BxC[context_N], packed["tokens_NxR"]], 1),
      input_mask_NxL=np.concatenate([context_mask_BxC[context_N], packed["input_mask_NxR"]], 1),
      completion_mask_NxT=packed["loss_mask_NxR"],
      sample_logps_NxT=packed["logps_NxR"],
      rewards_N=rewards_N,
      group_ids_N=group_ids_N,
      subgroup_ids_N=subgroup_ids_N,
      truncated_N=samples.truncated_N,  # stage 2's: no stop token
      lengths_N=samples.mask_NxT.sum(1),  # completion only (overlong)
      completions_N=[texts_BK[j] + c for j, c in zip(preview_N, completions_N)],
      problems_N=problems_N,
      metrics=metrics,
    )
    return batch, [texts_BK[j] for j in preview_N]

  def __call__(self, policy: Policy, problems, rng) -> RolloutBatch:
    """A training rollout: G = ``sampling.group_size`` rows per problem; previews from the
    presample when open. Counts every row's reward against its preview."""
    batch, texts_N = self.sample(policy, problems, self.cfg.sampling.group_size, rng)
    self.stats.add(texts_N, batch.rewards_N)
    return batch

  def eval_sample(self, policy: Policy, problems, num_samples: int, rng) -> RolloutBatch:
    """``eval.with_strategy``: two-stage samples with fresh previews from ``policy``."""
    return self.sample(policy, problems, num_samples, rng, online=True)[0]

  def eval_sampling_info(self) -> dict:
    return {
      "strategy": {
        "num_previews": self.spec.num_previews,
        "max_preview_tokens": self.spec.max_preview_tokens,
      }
    }

  def finish(self, workdir) -> None:
    """Writes ``strategy_previews.json``: success rate per (normalised) preview, counted over
    every process's rows (process 0 writes)."""
    stats = PreviewStats.merge(distributed.gather_objects([dict(self.stats.counts)]))
    if distributed.is_primary():
      write.strategy_previews(workdir, stats.table())


__all__ = ["TwoStageRollout", "presample_budget"]
