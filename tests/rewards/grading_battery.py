"""A grading battery: named groups of (answer, gold, expected reward) cases, every answer boxed
in one sentence and graded through ``score_batch`` (the reward's full path: fast path,
closed-form route and math-verify in the worker) in one call.

A test module declares ``CASES = {group: [(answer, gold, expected), ...]}`` and takes its
``graded`` fixture and its parametrised case list from here (``tests/rewards/test_math_*.py``).
"""

from __future__ import annotations

T, F = 1.0, 0.0


def boxed(x: str) -> str:
  return f"Putting it together, the answer is $\\boxed{{{x}}}$."


def flatten(cases: dict) -> list[tuple]:
  """``[(group, index, answer, gold, expected), ...]`` in the groups' order."""
  return [(g, i, *case) for g, group in cases.items() for i, case in enumerate(group)]


def grade(flat: list[tuple]):
  """``(rewards_N, counts)`` of every case of ``flat``, in one ``score_batch`` call."""
  from grpo_jax.rewards import math as rm

  return rm.score_batch(
    [boxed(a) for _, _, a, _, _ in flat], [g for _, _, _, g, _ in flat], timeout_s=4, num_workers=2
  )


def check_case(rewards_N, flat: list[tuple], group: str, index: int) -> None:
  k = next(j for j, (g, i, *_) in enumerate(flat) if g == group and i == index)
  answer, gold, expected = flat[k][2:]
  assert rewards_N[k] == expected, (group, index, answer, gold)


def check_clean(counts: dict) -> None:
  """No timeout, worker error or unparsed gold while grading the battery."""
  assert counts["reward/timeouts"] == 0 and counts["reward/worker_errors"] == 0
  assert counts["reward/gold_parse_failures"] == 0
