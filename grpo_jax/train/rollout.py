"""One rollout: B prompts × G samples on the mesh, graded on the host, packed as an update batch."""

from __future__ import annotations

import numpy as np

from grpo_jax.sampling.generate import SampleSettings, generate

__all__ = ["SampleSettings", "generate", "rollout"]


def rollout(
  graphdef,
  params,
  task,
  problems,
  group_size: int,
  rng,
  settings: SampleSettings,
  mesh,
  strategy=None,
) -> tuple[dict, dict]:
  """Samples G completions for each of the B problems and grades them.

  Group ids are the prompt-instance index within the step (METHODS §2 statement 7); without
  strategy sampling every group is one subgroup. ``strategy``: a ``StrategyRollout``; when active
  (enabled, K > 1) it draws previews then completions instead (METHODS §5).
  """
  if strategy is not None and strategy.active:
    return strategy.rollout(graphdef, params, task, problems, group_size, rng, settings, mesh)
  prompts_BxP, prompt_mask_BxP = task.encode_prompts(problems)
  prompts_NxP = np.repeat(prompts_BxP, group_size, axis=0)
  prompt_mask_NxP = np.repeat(prompt_mask_BxP, group_size, axis=0)
  gen = generate(
    graphdef, params, task, prompts_NxP, prompt_mask_NxP, rng, settings, mesh, group_size
  )
  problems_N = [p for p in problems for _ in range(group_size)]
  rewards_N = np.asarray(task.rewards(problems_N, gen["completions"]), np.float32)
  group_ids_N = np.repeat(np.arange(len(problems), dtype=np.int32), group_size)
  batch = {
    "tokens_NxL": np.concatenate([prompts_NxP, gen["tokens_NxT"]], axis=1).astype(np.int32),
    "input_mask_NxL": np.concatenate([prompt_mask_NxP, gen["mask_NxT"]], axis=1),
    "completion_mask_NxT": gen["mask_NxT"],
    "sample_logps_NxT": gen["logps_NxT"],
    "rewards_N": rewards_N,
    "group_ids_N": group_ids_N,
    "subgroup_ids_N": group_ids_N.copy(),
    "truncated_N": np.asarray(gen["truncated_N"], bool),  # the sampler's: no stop token
  }
  info = {
    "response/truncated_frac": float(np.mean(gen["truncated_N"])),
    "completions": gen["completions"],
    "problems": problems_N,
  }
  return batch, info
