"""Where each math dataset lives and how its columns map to ``{id, problem, answer, meta}``.

Hub ids, splits and columns are those of the public releases (checked against their dataset
cards); every loader also takes a local copy (jsonl / parquet / ``save_to_disk`` folder) with
the same columns, since training machines may not reach the Hub.

DAPO-Math-17K: the raw release ``BytedTsinghua-SIA/DAPO-Math-17k`` repeats each of its
17,917 problems about 100 times (≈1.79 M rows; DAPO issues #15 and #36). ``dapo_math_17k``
loads it and deduplicates on the problem text (after removing the DAPO instruction), which
leaves 17,398 distinct problems. ``dapo_math_17k_dedup`` is the already-deduplicated
``open-r1/DAPO-Math-17k-Processed`` (config ``en``: English only, ≈14.1 k; ``all`` ≈17.4 k);
it is deduplicated again here on the same key, which is a no-op on the published files.
Both strip DAPO's instruction so that ``templates.py`` decides the prompt.

GSM8K (``openai/gsm8k``, config ``main``): the gold is the text after ``####`` in ``answer``
and the worked solution the text before it (``after:####:answer`` / ``before:####:answer``).
``arithmetic`` / ``arithmetic_eval`` are generated locally (``arithmetic.py``; hub id
``generated:arithmetic``), train and eval disjoint by problem text.

Column paths are dotted for nested structs (``reward_model.ground_truth``); ``prompt[-1]``
style chat lists are read by ``load.py`` (the last user message's content).
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class MathDatasetSpec:
  """One dataset: hub location and the columns holding the problem, answer and id.

  Attributes:
    hub_id: Hugging Face dataset id.
    config: dataset config name, or None.
    split: split to read.
    problem: column with the problem text (or a chat message list).
    answer: column with the gold answer, ``"boxed:<column>"`` to take the last
      ``\\boxed{}`` of a worked solution (MATH train), or ``"after:<marker>:<column>"`` for
      the text after the last ``marker`` (GSM8K's ``####``; thousands commas dropped).
    solution: column with a reference worked solution (kept as ``row["solution"]``), or
      ``"before:<marker>:<column>"`` for the text before the last ``marker``; None when the
      set has none.
    id: column with a stable id, or None to use the row index.
    meta: columns copied into ``meta`` (e.g. ``level`` for difficulty stratification).
    dedupe: drop rows whose problem text repeats (keeping the first).
    strip_dapo_instruction: remove DAPO's "Solve the following ... Answer:" wrapper.
    prefix: column whose text is prepended to the problem (OlympiadBench ``context``).
  """

  hub_id: str
  split: str
  problem: str
  answer: str
  id: str | None = None
  config: str | None = None
  meta: tuple[str, ...] = ()
  dedupe: bool = False
  strip_dapo_instruction: bool = False
  prefix: str | None = None
  solution: str | None = None


CATALOGUE: dict[str, MathDatasetSpec] = {
  # ---- training sets ----
  "dapo_math_17k": MathDatasetSpec(
    hub_id="BytedTsinghua-SIA/DAPO-Math-17k",
    split="train",
    problem="prompt",  # [{"role": "user", "content": "<instruction + problem>"}]
    answer="reward_model.ground_truth",  # integer strings
    id="extra_info.index",
    meta=("data_source",),
    dedupe=True,  # ≈1.79 M rows → 17,398 distinct problems
    strip_dapo_instruction=True,
  ),
  "dapo_math_17k_dedup": MathDatasetSpec(
    hub_id="open-r1/DAPO-Math-17k-Processed",
    config="en",
    split="train",
    problem="prompt",  # the user message text, still with DAPO's instruction
    answer="solution",
    id="extra_info.index",
    meta=("data_source",),
    dedupe=True,
    strip_dapo_instruction=True,
  ),
  "math_train": MathDatasetSpec(
    hub_id="DigitalLearningGmbH/MATH-lighteval",  # the `lighteval/MATH` mirror HA-DW reads
    config="default",
    split="train",
    problem="problem",
    answer="boxed:solution",
    meta=("level", "type"),
    solution="solution",
  ),
  "gsm8k": MathDatasetSpec(
    hub_id="openai/gsm8k",
    config="main",
    split="train",
    problem="question",
    answer="after:####:answer",  # "...<<48/2=24>>24 ...\n#### 72"
    solution="before:####:answer",
  ),
  "arithmetic": MathDatasetSpec(
    hub_id="generated:arithmetic",  # arithmetic.generate: 20,000 rows, levels 1-5
    split="train",
    problem="problem",
    answer="answer",
    id="id",
    meta=("level", "kind"),
    solution="solution",
  ),
  # ---- benchmarks ----
  "gsm8k_test": MathDatasetSpec(
    hub_id="openai/gsm8k",
    config="main",
    split="test",
    problem="question",
    answer="after:####:answer",
    solution="before:####:answer",
  ),
  "arithmetic_eval": MathDatasetSpec(
    hub_id="generated:arithmetic",  # 1,000 rows, no problem text shared with "arithmetic"
    split="eval",
    problem="problem",
    answer="answer",
    id="id",
    meta=("level", "kind"),
    solution="solution",
  ),
  "math500": MathDatasetSpec(
    hub_id="HuggingFaceH4/MATH-500",
    split="test",
    problem="problem",
    answer="answer",
    id="unique_id",
    meta=("level", "subject"),  # level 1-5 for difficulty stratification
  ),
  "aime24": MathDatasetSpec(
    hub_id="HuggingFaceH4/aime_2024",
    split="train",
    problem="problem",
    answer="answer",
    id="id",
    meta=("year", "url"),
  ),
  "aime25": MathDatasetSpec(
    hub_id="MathArena/aime_2025",
    split="train",
    problem="problem",
    answer="answer",
    id="problem_idx",
  ),
  "aime26": MathDatasetSpec(
    hub_id="MathArena/aime_2026",
    split="train",
    problem="problem",
    answer="answer",  # int64
    id="problem_idx",
  ),
  "hmmt_feb25": MathDatasetSpec(
    hub_id="MathArena/hmmt_feb_2025",
    split="train",
    problem="problem",
    answer="answer",  # LaTeX strings: fractions, radicals, factorial products
    id="problem_idx",
    meta=("problem_type",),
  ),
  "amc23": MathDatasetSpec(
    hub_id="math-ai/amc23",
    split="test",
    problem="question",
    answer="answer",  # floats such as 27.0, cast to "27"
    id="id",
    meta=("url",),
  ),
  "minerva": MathDatasetSpec(
    hub_id="math-ai/minervamath",
    split="test",
    problem="question",
    answer="answer",  # mixed: 4.5e33, -1./3, LaTeX; normalised by rewards.math at scoring
  ),
  "olympiadbench": MathDatasetSpec(
    hub_id="Hothan/OlympiadBench",
    config="OE_TO_maths_en_COMP",  # open-ended, text-only, English, maths, competition: 675
    split="train",
    problem="question",
    answer="final_answer",  # list of "$...$" strings, joined with ", "
    id="id",
    meta=("is_multiple_answer", "unit", "answer_type", "subfield"),
    prefix="context",
  ),
}

TRAIN_SETS = ("dapo_math_17k", "dapo_math_17k_dedup", "math_train", "gsm8k", "arithmetic")
BENCHMARKS = (
  "gsm8k_test",
  "arithmetic_eval",
  "math500",
  "aime24",
  "aime25",
  "aime26",
  "hmmt_feb25",
  "amc23",
  "minerva",
  "olympiadbench",
)


def get_spec(name: str) -> MathDatasetSpec:
  """The catalogue entry ``name``; a KeyError lists the valid names."""
  try:
    return CATALOGUE[name]
  except KeyError:
    raise KeyError(f"unknown math dataset {name!r}; known: {sorted(CATALOGUE)}") from None


def has_solutions(name: str) -> bool:
  """True when catalogue set ``name`` carries reference solutions (``row["solution"]``)."""
  return get_spec(name).solution is not None
