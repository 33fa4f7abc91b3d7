"""``docs/config.md``: every config key with its default, rules and doc, generated from the
groups' declarations (``python -m grpo_jax.config.reference > docs/config.md``; a test checks
the file is current)."""

from __future__ import annotations

import dataclasses
import json

from grpo_jax.config import experiment
from grpo_jax.config.fields import rule_text
from grpo_jax.rundir import tables


def _default(value) -> str:
  text = json.dumps(list(value) if isinstance(value, tuple) else value)
  return f"`{text}`"


def _rows(fields, prefix: str = ""):
  for f in fields:
    doc = f.metadata["doc"].replace("|", "\\|")  # a bar would end the cell
    yield [f"`{prefix}{f.name}`", _default(f.default), rule_text(f.metadata), doc]


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
    tables.markdown(header, _rows(top)),
  ]
  for name, cls in experiment.GROUPS.items():
    doc = " ".join((cls.__doc__ or "").split())
    parts += [
      "",
      f"## {name}",
      "",
      doc,
      "",
      tables.markdown(header, _rows(dataclasses.fields(cls), f"{name}.")),
    ]
  return "\n".join(parts) + "\n"


if __name__ == "__main__":
  print(markdown(), end="")
