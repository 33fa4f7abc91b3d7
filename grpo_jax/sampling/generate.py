"""Host-level generation: prompt rows in, :class:`Samples` (tokens, masks, log-probs and decoded
texts) out.

Shared by training rollouts (``grpo_jax.rollout.one_stage``) and evaluation (``grpo_jax.eval``),
so evaluation does not depend on the training package.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from grpo_jax import sharding as shard_lib
from grpo_jax.models.shared_prompt import group_run
from grpo_jax.sampling.policy import Policy, SampleSettings
from grpo_jax.sampling.sampler import sample
from grpo_jax.sampling.waste import decode_waste


@dataclasses.dataclass(frozen=True)
class Samples:
  """One sampler call's rows on the host, N rows of T response slots."""

  tokens_NxT: np.ndarray  # int32; pad after the stop
  mask_NxT: np.ndarray  # int32; 1 = a sampled token, up to and including the stop token
  logps_NxT: np.ndarray  # float32; the sampler's log-probs of the sampled tokens
  truncated_N: np.ndarray  # bool; no stop token within the window
  decode_waste: float  # the decode loop's slot-steps spent on stopped rows (waste.decode_waste)
  decode_steps: int  # the decode loop's iterations
  completions: tuple[str, ...] = ()  # the decoded texts (``generate``; not ``draw_rows``)

  @classmethod
  def from_sampler(cls, out, settings: SampleSettings, num_rows: int, n: int | None = None):
    """The host copy of a sampler output (``sampling.sample``) of ``num_rows`` rows (every
    process's), cut to its first ``n`` local rows (all when None)."""
    return cls(
      tokens_NxT=np.asarray(out.tokens_NxT, np.int32)[:n],
      mask_NxT=np.asarray(out.mask_NxT, np.int32)[:n],
      logps_NxT=np.asarray(out.logps_NxT, np.float32)[:n],
      truncated_N=np.asarray(out.truncated_N)[:n],
      decode_waste=loop_waste(out, settings, num_rows),
      decode_steps=int(out.decode_steps),
    )


def generate(
  policy: Policy, task, prompts_NxP: np.ndarray, prompt_mask_NxP: np.ndarray, rng, group_size=1
) -> Samples:
  """Samples one completion per prompt row; returns host arrays and decoded completions.

  ``prompt_mask_NxP``: 1 on real prompt tokens (the task's, never re-derived from a pad id).
  Rows stop on any of ``task.stop_ids``.

  ``group_size``: the rows come in groups of that many consecutive copies of one prompt (every
  process's rows whole groups), whose prompts are prefilled once per device-local run.
  """
  samples = sample_rows(
    policy, prompts_NxP, prompt_mask_NxP, rng, stop_ids=task.stop_ids, pad_id=task.pad_id,
    group_size=group_size,
  )  # fmt: skip
  completions = task.decode(samples.tokens_NxT, samples.mask_NxT)
  return dataclasses.replace(samples, completions=tuple(completions))


def sample_rows(
  policy: Policy, prompts_NxP, prompt_mask_NxP, rng, *, stop_ids, pad_id: int, group_size=1
) -> Samples:
  """``generate``'s rows without the texts: the jitted sampler on ``policy.mesh``, stopping on
  ``stop_ids`` (``sampling.engine = 'jax'``)."""
  mesh, settings = policy.mesh, policy.settings
  batch = shard_lib.shard_batch(
    {"p": prompts_NxP, "m": np.asarray(prompt_mask_NxP, np.int32)}, mesh
  )
  N, devices = batch["p"].shape[0], shard_lib.batch_size_multiple(mesh)  # all processes' rows
  blocks = devices if N % devices == 0 else 1  # the device-local runs
  # Under the mesh: the model's activation and KV-cache layout constraints apply.
  share = group_run(group_size, N, 1, blocks)
  decode = settings.decode(stop_ids, pad_id, prompt_share=share, row_blocks=blocks)
  out = shard_lib.under_mesh(sample, mesh)(
    policy.graphdef, policy.params, batch["p"], batch["m"], rng, decode
  )
  out = shard_lib.local_rows(out, mesh)  # this process's rows (all rows with one process)
  return Samples.from_sampler(out, settings, N)


def loop_waste(out, settings: SampleSettings, num_rows: int) -> float:
  """``waste.decode_waste`` of one sampler call (the rows of this process, all with one)."""
  slots = settings.decode_slots if 0 < settings.decode_slots < num_rows else num_rows
  lengths_N = np.asarray(out.lengths_N)
  return decode_waste(lengths_N, int(out.decode_steps), slots * len(lengths_N) // num_rows)


__all__ = ["Policy", "SampleSettings", "Samples", "generate", "sample_rows"]
