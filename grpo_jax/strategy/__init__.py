"""Strategy-conditioned sampling (METHODS §5) in one place.

  previews.py   the two sampler stages: K previews per prompt (stop string, end token or M
                tokens), then G completions conditioned on them
  layout.py     host bookkeeping: allocation G → counts_K, subgroup ids, packing preview ⊕
                completion, the ``strategy/*`` metrics
  presample.py  the presample store: previews drawn once by the initial policy
  hints.py      strategies a researcher writes: previews read from a JSONL file
  stats.py      success rate per preview over a run (``strategy_previews.json``)

:func:`is_two_stage` says whether a config samples in two stages, :func:`id_units` what ids its
rollout gives a prompt. The two-stage rollout that runs this method is
``grpo_jax.rollout.two_stage``. The config rules of this
package (K against G, source, delimiter, preview length) are checked when a config is loaded
(``grpo_jax.config.checks``).
"""

from __future__ import annotations

from grpo_jax.config.experiment import Experiment


def is_two_stage(cfg: Experiment) -> bool:
  """Strategy sampling with K = ``strategy.num_previews`` > 1 (K = 1 is plain sampling)."""
  return cfg.strategy.enabled and cfg.strategy.num_previews > 1


def id_units(cfg: Experiment) -> dict[str, int]:
  """Ids per prompt of each id field of a rollout batch: group ids count prompts (1 each);
  subgroup ids count prompts too on the one-stage path, and preview slots b·K + k (K per
  prompt, ``layout.row_ids``; merged previews share the smallest slot of their prompt) on the
  two-stage one (K = ``strategy.num_previews``)."""
  k = cfg.strategy.num_previews if is_two_stage(cfg) else 1
  return {"group_ids_N": 1, "subgroup_ids_N": k}


__all__ = ["id_units", "is_two_stage"]
