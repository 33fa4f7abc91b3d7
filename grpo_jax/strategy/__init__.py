"""Strategy-conditioned sampling (METHODS §5) in one place.

  previews.py   the two sampler stages: K previews per prompt (stop string, end token or M
                tokens), then G completions conditioned on them
  layout.py     host bookkeeping: allocation G → counts_K, subgroup ids, packing preview ⊕
                completion, the ``strategy/*`` metrics
  presample.py  the presample store: previews drawn once by the initial policy
  stats.py      success rate per preview over a run (``strategy_previews.json``)
  rollout.py    the two-stage rollout (``ROLLOUTS["two_stage"]`` in ``grpo_jax.train.rollout``)

:func:`is_two_stage` says whether a config samples in two stages. The config rules of this
package (K against G, source, delimiter, preview length) are checked when a config is loaded
(``grpo_jax.config.checks``).
"""


def is_two_stage(cfg) -> bool:
  """Strategy sampling with K = ``strategy.num_previews`` > 1 (K = 1 is plain sampling)."""
  s = cfg.strategy if "strategy" in cfg else None
  return bool(s is not None and s.enabled and int(s.num_previews) > 1)


__all__ = ["is_two_stage"]
