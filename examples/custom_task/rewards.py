"""Reward functions of the sentiment example (docs/custom_task.md), called TRL's way:
``fn(prompts, completions, **columns) -> list[float | None]``, one entry per completion, where
``columns`` holds every other field of the rows (here ``id``, ``review`` and ``label``)."""

import re

LABELS = ("positive", "negative")


def label(prompts, completions, label, **columns):
  """1 when the answer names the row's label and not the other one, 0 otherwise; no score
  (None) for a row without a label."""
  del prompts, columns
  out = []
  for completion, gold in zip(completions, label):
    named = set(re.findall(r"[a-z]+", completion.lower())) & set(LABELS)
    out.append(None if not gold else float(named == {gold}))
  return out


def brevity(prompts, completions, **columns):
  """-0.1 per word past the third, at most -0.5: the answer is one word."""
  del prompts, columns
  return [max(-0.5, -0.1 * max(0, len(c.split()) - 3)) for c in completions]
