"""The one-stage rollout (plain GRPO sampling, registered as ``"one_stage"`` in
``grpo_jax.rollout.registry.ROLLOUTS``): B prompts × G samples on the mesh, graded on the host,
packed as one :class:`~grpo_jax.rollout.batch.RolloutBatch`.
"""

from __future__ import annotations

import time

import numpy as np

from grpo_jax.config.experiment import Experiment
from grpo_jax.rollout.batch import RolloutBatch
from grpo_jax.sampling.engine import build_engine, generate_with, push_metrics
from grpo_jax.sampling.policy import Policy, SampleSettings


class OneStageRollout:
  """G completions per prompt from the prompt alone; every group is one subgroup. The rows come
  from ``sampling.engine`` (``grpo_jax.sampling.engine``)."""

  name = "one_stage"

  def __init__(self, cfg: Experiment, task):
    self.cfg, self.task = cfg, task
    self.majority_vote = task.votes  # the task extracts comparable final answers
    self.prompt_len = task.prompt_len
    self.engine = build_engine(cfg)  # vLLM: the process's one engine

  def describe(self) -> str:
    return f"strategy sampling off: one-stage GRPO sampling ({self.engine.name} engine)"

  def prepare(self, policy: Policy, workdir, step: int, log=print) -> None:
    del policy, workdir, step, log

  def sample(self, policy: Policy, problems, group_size: int, rng) -> RolloutBatch:
    """Samples G completions for each of the B problems and grades them. Group ids are the
    prompt-instance index within the step (METHODS §2 statement 7)."""
    task = self.task
    prompts_BxP, prompt_mask_BxP = task.encode_prompts(problems)
    prompts_NxP = np.repeat(prompts_BxP, group_size, axis=0)
    prompt_mask_NxP = np.repeat(prompt_mask_BxP, group_size, axis=0)
    samples, push_s = generate_with(
      self.engine, policy, task, prompts_NxP, prompt_mask_NxP, rng, group_size
    )
    problems_N = [p for p in problems for _ in range(group_size)]
    t0 = time.perf_counter()
    rewards_N, reward_m = task.rewards(problems_N, list(samples.completions))
    rewards_N = np.asarray(rewards_N, np.float32)
    reward_s = time.perf_counter() - t0
    group_ids_N = np.repeat(np.arange(len(problems), dtype=np.int32), group_size)
    return RolloutBatch(
      tokens_NxL=np.concatenate([prompts_NxP, samples.tokens_NxT], axis=1),
      input_mask_NxL=np.concatenate([prompt_mask_NxP, samples.mask_NxT], axis=1),
      completion_mask_NxT=samples.mask_NxT,
      sample_logps_NxT=samples.logps_NxT,
      rewards_N=rewards_N,
      group_ids_N=group_ids_N,
      subgroup_ids_N=group_ids_N.copy(),
      truncated_N=samples.truncated_N,  # the sampler's: no stop token
      lengths_N=samples.mask_NxT.sum(1),
      completions_N=list(samples.completions),
      problems_N=problems_N,
      metrics={
        "rollout/decode_waste": samples.decode_waste,
        "time/reward_s": reward_s,
        **push_metrics(self.engine, push_s),
        **self.engine.memory,  # memory/engine_*: an external engine's own
        **reward_m,  # this call's reward functions' (or grader's) scalars
      },
    )

  def __call__(self, policy: Policy, problems, rng) -> RolloutBatch:
    return self.sample(policy, problems, self.cfg.sampling.group_size, rng)

  def eval_sample(self, policy: Policy, problems, num_samples: int, rng) -> RolloutBatch:
    return self.sample(policy, problems, num_samples, rng)

  def eval_sampling_info(self) -> dict:
    return {}

  def finish(self, workdir) -> None:
    del workdir


__all__ = ["OneStageRollout", "Policy", "RolloutBatch", "SampleSettings"]
