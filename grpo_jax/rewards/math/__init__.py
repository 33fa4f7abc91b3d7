"""Trustworthy math rewards: our own answer extraction, an exact fast path, gold
normalisation and size guards in front of math-verify, which runs in a worker process pool
with a hard wall-clock kill. See ``score`` for the pipeline and metric names.
"""

from grpo_jax.rewards.math.extract import extract_answer, last_answer_line, last_boxed
from grpo_jax.rewards.math.fastpath import (
  closed_form_target,
  fast_compare,
  is_integer_gold,
  parse_number,
)
from grpo_jax.rewards.math.guards import guard_reason
from grpo_jax.rewards.math.normalize import clean_latex, expand_e_notation, normalize_gold
from grpo_jax.rewards.math.score import METRIC_KEYS, prepare, score, score_batch
from grpo_jax.rewards.math.verify import VerifierPool, get_pool, host_num_workers, shutdown

__all__ = [
  "METRIC_KEYS",
  "VerifierPool",
  "clean_latex",
  "closed_form_target",
  "expand_e_notation",
  "extract_answer",
  "fast_compare",
  "get_pool",
  "guard_reason",
  "host_num_workers",
  "is_integer_gold",
  "last_answer_line",
  "last_boxed",
  "normalize_gold",
  "parse_number",
  "prepare",
  "score",
  "score_batch",
  "shutdown",
]
