"""The policy as the sampler sees it: one frozen handle that rollouts and evaluation share."""

from __future__ import annotations

import dataclasses

import jax

from grpo_jax.sampling.steps import Decode


@dataclasses.dataclass(frozen=True)
class SampleSettings:
  """How each row is continued: at most ``max_new_tokens`` tokens, temperature, top-k, top-p;
  and how the loop runs: ``decode_slots`` (continuous batching, 0 = off)."""

  max_new_tokens: int
  temperature: float = 1.0
  top_k: int = 0
  top_p: float = 1.0
  decode_slots: int = 0

  @classmethod
  def from_config(cls, sampling_cfg) -> SampleSettings:
    s = sampling_cfg
    return cls(s.max_new_tokens, s.temperature, s.top_k, s.top_p, s.decode_slots)

  def decode(self, stop_ids, pad_id: int, prompt_share: int = 1, row_blocks: int = 1) -> Decode:
    """The sampler program's static settings for a task's ``stop_ids`` and ``pad_id``."""
    return Decode(
      self.max_new_tokens,
      stop_ids,
      pad_id,
      self.temperature,
      self.top_k,
      self.top_p,
      prompt_share=prompt_share,
      decode_slots=self.decode_slots,
      row_blocks=row_blocks,
    )


@dataclasses.dataclass(frozen=True)
class Policy:
  """Model definition, parameters (placed for sampling), the mesh and the sample settings;
  ``engine``: an external rollout engine that draws instead of our sampler (None: ours).

  Frozen: ``policy.replace(params=...)`` is the same policy after an update,
  ``policy.with_max_new_tokens(M)`` the same sampler with a shorter window (strategy previews).
  """

  graphdef: object
  params: object
  mesh: jax.sharding.Mesh
  settings: SampleSettings
  engine: object = None  # an external ``sampling.engine.RolloutEngine`` drawing the rows

  def replace(self, **changes) -> Policy:
    return dataclasses.replace(self, **changes)

  def with_max_new_tokens(self, max_new_tokens: int) -> Policy:
    settings = dataclasses.replace(self.settings, max_new_tokens=int(max_new_tokens))
    return dataclasses.replace(self, settings=settings)


__all__ = ["Policy", "SampleSettings"]
