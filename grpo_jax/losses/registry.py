"""Name -> implementation lookup shared by the loss registries (kinds, aggregations, KL).

Variants are data, not branches: the config names a variant, a small dict maps the name to the
function, and an unknown name is an error that lists every valid one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

V = TypeVar("V")


def lookup(table: Mapping[str, V], name: str, what: str) -> V:
  """``table[name]``, or a ValueError naming ``what`` and listing the valid names."""
  if name not in table:
    valid = ", ".join(sorted(table))
    raise ValueError(f"unknown {what} {name!r}; valid: {valid}")
  return table[name]
