"""One rollout: B prompts × G samples on the mesh, graded on the host, packed as an update batch."""

from __future__ import annotations

import dataclasses

import numpy as np

from grpo_jax import sampling
from grpo_jax import sharding as shard_lib


@dataclasses.dataclass(frozen=True)
class SampleSettings:
  max_new_tokens: int
  temperature: float = 1.0
  top_k: int = 0
  top_p: float = 1.0

  @classmethod
  def from_config(cls, sampling_cfg) -> SampleSettings:
    return cls(sampling_cfg.max_new_tokens, sampling_cfg.temperature, sampling_cfg.top_k,
               sampling_cfg.top_p)


def generate(graphdef, params, task, prompts_NxP: np.ndarray, rng, settings: SampleSettings, mesh):
  """Samples one completion per prompt row; returns host arrays and decoded completions."""
  prompt_mask_NxP = (prompts_NxP != task.pad_id).astype(np.int32)
  batch = shard_lib.shard_batch({"p": prompts_NxP, "m": prompt_mask_NxP}, mesh)
  out = sampling.sample(graphdef, params, batch["p"], batch["m"], rng,
                        max_new_tokens=settings.max_new_tokens, eos_id=task.eos_id,
                        pad_id=task.pad_id, temperature=settings.temperature,
                        top_k=settings.top_k, top_p=settings.top_p)
  out = shard_lib.local_rows(out, mesh)  # this process's rows (all rows with one process)
  tokens_NxT = np.asarray(out.tokens_NxT)
  mask_NxT = np.asarray(out.mask_NxT).astype(np.int32)
  return {
      "tokens_NxT": tokens_NxT,
      "mask_NxT": mask_NxT,
      "logps_NxT": np.asarray(out.logps_NxT, np.float32),
      "truncated_N": np.asarray(out.truncated_N),
      "completions": task.decode(tokens_NxT, mask_NxT),
  }


def rollout(graphdef, params, task, problems, group_size: int, rng, settings: SampleSettings,
            mesh, strategy=None) -> tuple[dict, dict]:
  """Samples G completions for each of the B problems and grades them.

  Group ids are the prompt-instance index within the step (METHODS §7); without strategy
  sampling every group is one subgroup. ``strategy``: a ``StrategyRollout``; when active
  (enabled, K > 1) it draws previews then completions instead (METHODS §5).
  """
  if strategy is not None and strategy.active:
    return strategy.rollout(graphdef, params, task, problems, group_size, rng, settings, mesh)
  prompts_BxP = task.encode_prompts(problems)
  prompts_NxP = np.repeat(prompts_BxP, group_size, axis=0)
  gen = generate(graphdef, params, task, prompts_NxP, rng, settings, mesh)
  problems_N = [p for p in problems for _ in range(group_size)]
  rewards_N = np.asarray(task.rewards(problems_N, gen["completions"]), np.float32)
  group_ids_N = np.repeat(np.arange(len(problems), dtype=np.int32), group_size)
  batch = {
      "tokens_NxL": np.concatenate([prompts_NxP, gen["tokens_NxT"]], axis=1).astype(np.int32),
      "input_mask_NxL": np.concatenate(
          [(prompts_NxP != task.pad_id).astype(np.int32), gen["mask_NxT"]], axis=1),
      "completion_mask_NxT": gen["mask_NxT"],
      "sample_logps_NxT": gen["logps_NxT"],
      "rewards_N": rewards_N,
      "group_ids_N": group_ids_N,
      "subgroup_ids_N": group_ids_N.copy(),
  }
  info = {"response/truncated_frac": float(np.mean(gen["truncated_N"])),
          "completions": gen["completions"]}
  return batch, info
