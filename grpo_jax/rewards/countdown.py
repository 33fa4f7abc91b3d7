"""Countdown: the expression grammar, its checker (the reward) and its exhaustive solver.

A completion is ``<plan><delimiter><expression>`` (the task appends EOS when tokenising):

  plan        the operator pattern the solver intends, e.g. ``*-`` for ``a*b-c``; free text to
              the checker -- never rewarded, and a plan that disagrees with the expression is fine.
  delimiter   ``;`` (:data:`DELIMITER`); the first one splits plan from expression.
  expression  ``NUM (OP NUM)*`` with OP in ``+ - *`` and NUM a decimal literal without leading
              zeros; no parentheses, no unary minus, no division. Standard precedence: ``*`` binds
              tighter than ``+``/``-``, which associate left to right (``2+3*4 = 14``,
              ``9-4-3 = 2``), exactly as Python evaluates the same string.

reward = 1.0 iff the expression is well formed, its literals are exactly the given numbers as a
multiset (each used once, none missing, none extra), and its value equals the target; anything else,
including any malformed text, is 0.0 and never raises.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Sequence

DELIMITER = ";"
OPERATORS = "+-*"

# [0-9] rather than \d: \d also matches non-ASCII digits that int() would accept.
_EXPRESSION = re.compile(r"(?:0|[1-9][0-9]*)(?:[+\-*](?:0|[1-9][0-9]*))*")
_TOKEN = re.compile(r"[0-9]+|[+\-*]")


def split_completion(completion: str, delimiter: str = DELIMITER) -> tuple[str, str] | None:
  """(plan, expression) around the first delimiter, or None when there is no delimiter."""
  if not isinstance(completion, str) or delimiter not in completion:
    return None
  plan, expression = completion.split(delimiter, 1)
  return plan, expression


def plan_of(completion: str, delimiter: str = DELIMITER) -> str:
  """The strategy part of a completion (text before the first delimiter); '' if none."""
  parts = split_completion(completion, delimiter)
  return "" if parts is None else parts[0]


def evaluate(numbers: Sequence[int], ops: str) -> int:
  """Value of ``n0 op0 n1 op1 n2 ...`` with standard precedence (products first, then +/- left
  to right). ``len(ops) == len(numbers) - 1``."""
  total, sign, term = 0, 1, numbers[0]
  for op, num in zip(ops, numbers[1:]):
    if op == "*":
      term *= num
    else:
      total += sign * term
      sign, term = (1 if op == "+" else -1), num
  return total + sign * term


def parse_expression(expression: str) -> tuple[list[int], str] | None:
  """(numbers, ops) of a well-formed expression (surrounding whitespace ignored), else None."""
  expression = expression.strip()
  if not _EXPRESSION.fullmatch(expression):
    return None
  tokens = _TOKEN.findall(expression)
  return [int(t) for t in tokens[0::2]], "".join(tokens[1::2])


def countdown_reward(
  numbers: Sequence[int], target: int, completion: str, delimiter: str = DELIMITER
) -> float:
  """1.0 iff the expression after the first delimiter uses exactly ``numbers`` (as a multiset)
  and evaluates to ``target`` under standard precedence; 0.0 otherwise (never raises)."""
  try:
    parts = split_completion(completion, delimiter)
    if parts is None:
      return 0.0
    parsed = parse_expression(parts[1])
    if parsed is None:
      return 0.0
    used, ops = parsed
    # Multiset check before evaluating: bounds the work on adversarial literals like 9**9999.
    if Counter(used) != Counter(int(n) for n in numbers):
      return 0.0
    return 1.0 if evaluate(used, ops) == int(target) else 0.0
  except Exception:  # malformed input of any kind scores zero rather than stalling the step
    return 0.0


def all_patterns(num_numbers: int) -> list[str]:
  """Every operator pattern (plan) over ``num_numbers`` operands, e.g. 9 for three numbers."""
  return ["".join(p) for p in itertools.product(OPERATORS, repeat=num_numbers - 1)]


def describe_pattern(plan: str) -> str:
  """Human-readable shape of a plan: ``'*-'`` -> ``'a*b-c'``."""
  letters = "abcdefghijklmnopqrstuvwxyz"
  return letters[0] + "".join(op + letters[i + 1] for i, op in enumerate(plan))


def format_expression(numbers: Sequence[int], plan: str) -> str:
  return str(numbers[0]) + "".join(op + str(n) for op, n in zip(plan, numbers[1:]))


def enumerate_expressions(numbers: Sequence[int]) -> dict[int, list[tuple[str, str]]]:
  """All distinct (plan, expression) over orderings of ``numbers``, grouped by value.

  Orderings are de-duplicated (repeated numbers give one expression, not two), so every entry
  is a distinct string; lists are sorted for determinism.
  """
  by_value: dict[int, list[tuple[str, str]]] = {}
  for order in sorted(set(itertools.permutations(numbers))):
    for plan in all_patterns(len(numbers)):
      by_value.setdefault(evaluate(order, plan), []).append((plan, format_expression(order, plan)))
  return {v: sorted(s) for v, s in by_value.items()}


__all__ = [
  "DELIMITER",
  "OPERATORS",
  "all_patterns",
  "countdown_reward",
  "describe_pattern",
  "enumerate_expressions",
  "evaluate",
  "format_expression",
  "parse_expression",
  "plan_of",
  "split_completion",
]
