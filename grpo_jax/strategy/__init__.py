"""Strategy-conditioned sampling (METHODS §5) in one place.

  previews.py   the two sampler stages: K previews per prompt (stop string, end token or M
                tokens), then G completions conditioned on them
  layout.py     host bookkeeping: allocation G → counts_K, subgroup ids, packing preview ⊕
                completion, the ``strategy/*`` metrics
  presample.py  the presample store: previews drawn once by the initial policy
  stats.py      success rate per preview over a run (``strategy_previews.json``)
  rollout.py    the two-stage rollout (``ROLLOUTS["two_stage"]`` in ``grpo_jax.train.rollout``)

:func:`check_config` holds the config rules of this package; :func:`is_two_stage` says
whether a config samples in two stages.
"""

from grpo_jax.strategy.layout import allocate


def is_two_stage(cfg) -> bool:
  """Strategy sampling with K = ``strategy.num_previews`` > 1 (K = 1 is plain sampling)."""
  s = cfg.strategy if "strategy" in cfg else None
  return bool(s is not None and s.enabled and int(s.num_previews) > 1)


def check_config(cfg) -> None:
  """Raises ValueError on a ``strategy`` group that cannot run, before any model is built:
  K outside [1, G] (also against ``eval.num_samples`` with ``eval.with_strategy``), an unknown
  ``strategy.source``, an empty delimiter, ``max_preview_tokens`` < 1. Rules that need the
  tokenizer (a delimiter no token contains) are checked by ``previews.PreviewSpec``."""
  s = cfg.strategy
  if not s.enabled:
    return
  allocate(cfg.sampling.group_size, s.num_previews)  # validates K <= G
  if cfg.eval.with_strategy:
    allocate(cfg.eval.num_samples, s.num_previews)  # fail now, not after training
  if s.source not in ("presampled", "online"):
    raise ValueError(f"strategy.source must be 'presampled' or 'online', got {s.source!r}")
  if not s.delimiter:
    raise ValueError("strategy.delimiter must be a non-empty string")
  if s.max_preview_tokens < 1:
    raise ValueError("strategy.max_preview_tokens must be >= 1")


__all__ = ["check_config", "is_two_stage"]
