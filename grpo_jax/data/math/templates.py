"""Prompt templates of the two papers, selectable by name (``config.data.template``).

* ``dapo``: DAPO's instruction, verbatim from DAPO-Math-17K; the answer goes on a last line
  ``Answer: ...`` (graded by ``rewards.math``' answer-line rule).
* ``hadw``: HA-DW's template (its App. G): ``"{question}. Let's think step by step and
  output the final answer within \\boxed{}."`` — graded by the last-box rule.
* ``boxed``: MathArena's instruction for AIME/HMMT-style evaluation.

Templates give the user-message text; the tokenizer's chat template, if any, wraps it.
"""

DAPO_PREFIX = (
  "Solve the following math problem step by step. The last line of your response should be "
  "of the form Answer: $Answer (without quotes) where $Answer is the answer to the problem."
  "\n\n"
)
DAPO_SUFFIX = '\n\nRemember to put your answer on its own line after "Answer:".'

TEMPLATES: dict[str, str] = {
  "dapo": DAPO_PREFIX + "{problem}" + DAPO_SUFFIX,
  "hadw": "{problem}. Let's think step by step and output the final answer within \\boxed{{}}.",
  "boxed": "{problem}\n\nPut your final answer within \\boxed{{}}.",
}

# How each template asks for the answer (``rewards.math`` accepts both forms regardless).
ANSWER_FORMAT = {"dapo": "answer_line", "hadw": "boxed", "boxed": "boxed"}


def format_prompt(problem: str, template: str = "dapo") -> str:
  """The prompt text for ``problem`` under the named template."""
  try:
    fmt = TEMPLATES[template]
  except KeyError:
    raise KeyError(f"unknown prompt template {template!r}; known: {sorted(TEMPLATES)}") from None
  return fmt.format(problem=problem.strip())


def strip_dapo_instruction(text: str) -> str:
  """The bare problem from a DAPO-Math-17K prompt (inverse of the ``dapo`` template)."""
  t = text.strip()
  if t.startswith(DAPO_PREFIX.strip()[:40]):
    t = t[len(DAPO_PREFIX) :] if t.startswith(DAPO_PREFIX) else t.split("\n\n", 1)[-1]
  if t.endswith(DAPO_SUFFIX.strip()):
    t = t[: -len(DAPO_SUFFIX.strip())]
  return t.strip()
