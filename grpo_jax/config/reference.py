"""``docs/config.md``: every config key with its default, rules and doc, generated from the
groups' declarations (``python -m grpo_jax.config.reference > docs/config.md``; a test checks
the file is current)."""

from __future__ import annotations

import dataclasses
import json

from grpo_jax.config import experiment
from grpo_jax.config.fields import leaf_fields, rule_text
from grpo_jax.rundir import tables


def _default(value) -> str:
  text = json.dumps(list(value) if isinstance(value, tuple) else value)
  return f"`{text}`"


def _rows(keyed_fields):
  for key, f in keyed_fields:
    doc = f.metadata["doc"].replace("|", "\\|")  # a bar would end the cell
    rule = rule_text(f.metadata)
    if isinstance(f.default, tuple) and f.metadata["choices"]:
      rule = "each " + rule  # a tuple whose every element is a choice
    yield [f"`{key}`", _default(f.default), rule, doc]


def markdown() -> str:
  """The reference page."""
  header = ["key", "default", "valid", "meaning"]
  top = [f for f in dataclasses.fields(experiment.Experiment) if f.name in experiment.TOP]
  parts = [
    "# Config keys",
    "",
    "Every key of `grpo_jax.config.base_config()`, generated from its declaration in",
    "`grpo_jax/config/groups_run.py` and `groups_method.py` by",
    "`python -m grpo_jax.config.reference > docs/config.md`. Override any of them on the",
    "command line: `--config.loss.kind=dapo`. A bad value fails at load, naming the key.",
    "",
    tables.markdown(header, _rows((f.name, f) for f in top)),
  ]
  for name, cls in experiment.GROUPS.items():
    doc = " ".join((cls.__doc__ or "").split())
    parts += [
      "",
      f"## {name}",
      "",
      doc,
      "",
      tables.markdown(header, _rows(leaf_fields(cls, f"{name}."))),
    ]
  return "\n".join(parts) + "\n"


if __name__ == "__main__":
  print(markdown(), end="")
