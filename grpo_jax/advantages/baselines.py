"""Per-row baselines b_i, registered by name (``advantage.baseline``; METHODS §1).

Each entry maps (rewards_N, GroupStats, offset_N, coef) to the raw advantage Ã_i = r_i − b_i,
written so that exact cancellations stay exact in float32 (e.g. α = 1 on a subgroup whose rewards
are all equal gives Ã = 0 bit for bit, which matters when Ã is later divided by its own std).
``offset_N`` is the row's subgroup offset δ_s(i) (already shuffled and re-centred when the
ablation asks for it); ``coef`` is α = ``advantage.offset_coef``.

| name              | b_i                                   | source                          |
|-------------------|---------------------------------------|---------------------------------|
| group             | μ_g(i)                                | GRPO (DeepSeekMath), Eq. 2 [P2] |
| rloo              | (Σ_g r − r_i)/(G_g − 1); b_i = r_i if G_g = 1 | RLOO leave-one-out      |
| subgroup_offset   | μ_g + α·δ_s(i),  δ_s = μ_s − μ_g      | Strategy-GRPO at α = 0 |

For ``subgroup_offset``: α = 0 is Strategy-GRPO exactly; α = +1 gives b_i = μ_s (standing
inside the subgroup); α < 0 gives Ã_i = (r_i − μ_s) + (1 − α)·δ_s (credit tilted toward the
subgroup's quality). NudgeRL's λ corresponds to α = 1 − λ.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from grpo_jax.advantages.offsets import GroupStats

BaselineFn = Callable[[jax.Array, GroupStats, jax.Array, float], jax.Array]


def group_baseline(rewards_N, stats: GroupStats, offset_N, coef) -> jax.Array:
  """Ã_i = r_i − μ_g(i): the GRPO group mean as baseline."""
  del offset_N, coef
  return rewards_N - stats.group_mean_N


def rloo_baseline(rewards_N, stats: GroupStats, offset_N, coef) -> jax.Array:
  """Ã_i = r_i − (Σ_{j∈g} r_j − r_i)/(G_g − 1); a singleton group gets Ã = 0."""
  del offset_N, coef
  loo_N = (stats.group_sum_N - rewards_N) / jnp.maximum(stats.group_count_N - 1.0, 1.0)
  return jnp.where(stats.group_count_N > 1.0, rewards_N - loo_N, 0.0)


def subgroup_offset_baseline(rewards_N, stats: GroupStats, offset_N, coef) -> jax.Array:
  """Ã_i = (r_i − μ_g(i)) − α·δ_s(i), i.e. b_i = μ_g + α·δ_s with a signed α.

  At α = 0 this is bit-identical to ``group``; at α = 1 a constant subgroup gives exactly 0
  because r_i and μ_s are then the same float (segment means of constant slots are exact).
  """
  return (rewards_N - stats.group_mean_N) - jnp.asarray(coef, jnp.float32) * offset_N


BASELINES: dict[str, BaselineFn] = {
  "group": group_baseline,
  "rloo": rloo_baseline,
  "subgroup_offset": subgroup_offset_baseline,
}

# Baselines that read the subgroup offsets (only these pay for the shuffle's sort).
USES_OFFSETS = frozenset({"subgroup_offset"})


def get_baseline(name: str) -> BaselineFn:
  return BASELINES[name]
