"""Math datasets (DAPO-Math-17K, MATH, GSM8K, a generated arithmetic set, and the
AIME/HMMT/AMC/MATH500/Minerva/OlympiadBench benchmarks) loaded from the Hub or a local copy as
``{id, problem, answer, meta}`` (plus ``solution`` where ``has_solutions``), and the papers'
prompt templates.
"""

from grpo_jax.data.math.catalogue import (
  BENCHMARKS,
  CATALOGUE,
  TRAIN_SETS,
  MathDatasetSpec,
  get_spec,
  has_solutions,
)
from grpo_jax.data.math.load import (
  LoadReport,
  MalformedRow,
  answer_to_string,
  load_math_dataset,
  normalize_row,
  open_source,
)
from grpo_jax.data.math.templates import (
  ANSWER_FORMAT,
  TEMPLATES,
  format_prompt,
  strip_dapo_instruction,
)

__all__ = [
  "ANSWER_FORMAT",
  "BENCHMARKS",
  "CATALOGUE",
  "LoadReport",
  "MalformedRow",
  "MathDatasetSpec",
  "TEMPLATES",
  "TRAIN_SETS",
  "answer_to_string",
  "format_prompt",
  "get_spec",
  "has_solutions",
  "load_math_dataset",
  "normalize_row",
  "open_source",
  "strip_dapo_instruction",
]
