"""Host-level generation: prompt rows in, tokens, masks, log-probs and decoded texts out.

Shared by training rollouts (``grpo_jax.rollout.one_stage``) and evaluation (``grpo_jax.eval``),
so evaluation does not depend on the training package.
"""

from __future__ import annotations

import numpy as np

from grpo_jax import sharding as shard_lib
from grpo_jax.models.shared_prompt import group_run
from grpo_jax.sampling.policy import Policy, SampleSettings
from grpo_jax.sampling.sampler import sample
from grpo_jax.sampling.waste import decode_waste


def generate(
  policy: Policy, task, prompts_NxP: np.ndarray, prompt_mask_NxP: np.ndarray, rng, group_size=1
) -> dict:
  """Samples one completion per prompt row; returns host arrays and decoded completions.

  ``prompt_mask_NxP``: 1 on real prompt tokens (the task's, never re-derived from a pad id).
  Rows stop on any of ``task.stop_ids``. ``decode_waste``: the share of the decode loop's
  slot-steps spent on stopped rows (``waste.decode_waste``) over its ``decode_steps``.

  ``group_size``: the rows come in groups of that many consecutive copies of one prompt (every
  process's rows whole groups), whose prompts are prefilled once per device-local run.
  """
  mesh, settings = policy.mesh, policy.settings
  batch = shard_lib.shard_batch(
    {"p": prompts_NxP, "m": np.asarray(prompt_mask_NxP, np.int32)}, mesh
  )
  N, devices = batch["p"].shape[0], shard_lib.batch_size_multiple(mesh)  # all processes' rows
  blocks = devices if N % devices == 0 else 1  # the device-local runs
  # Under the mesh: the model's activation and KV-cache layout constraints apply.
  share = group_run(group_size, N, 1, blocks)
  decode = settings.decode(task.stop_ids, task.pad_id, prompt_share=share, row_blocks=blocks)
  out = shard_lib.under_mesh(sample, mesh)(
    policy.graphdef, policy.params, batch["p"], batch["m"], rng, decode
  )
  out = shard_lib.local_rows(out, mesh)  # this process's rows (all rows with one process)
  tokens_NxT = np.asarray(out.tokens_NxT)
  mask_NxT = np.asarray(out.mask_NxT).astype(np.int32)
  return {
    "tokens_NxT": tokens_NxT,
    "mask_NxT": mask_NxT,
    "logps_NxT": np.asarray(out.logps_NxT, np.float32),
    "truncated_N": np.asarray(out.truncated_N),
    "completions": task.decode(tokens_NxT, mask_NxT),
    "decode_steps": int(out.decode_steps),
    "decode_waste": loop_waste(out, settings, N),
  }


def loop_waste(out, settings: SampleSettings, num_rows: int) -> float:
  """``waste.decode_waste`` of one sampler call (the rows of this process, all with one)."""
  slots = settings.decode_slots if 0 < settings.decode_slots < num_rows else num_rows
  lengths_N = np.asarray(out.lengths_N)
  return decode_waste(lengths_N, int(out.decode_steps), slots * len(lengths_N) // num_rows)


__all__ = ["Policy", "SampleSettings", "generate"]
