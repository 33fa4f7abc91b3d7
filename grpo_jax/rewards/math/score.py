"""Binary math reward: r = 1 if the completion's final answer equals the gold, else 0.

Per item (METHODS §6):
  1. ``extract_answer``: last ``\\boxed``/``\\fbox``, else last ``Answer:`` line; none → 0
     (``reward/no_answer``, also counted in ``reward/parse_failures``).
  2. ``normalize_gold`` / ``clean_latex``; identical strings → 1 (``reward/fastpath``).
  3. ``fast_compare``: exact integer/rational verdict without sympy (``reward/fastpath``).
  4. ``guard_reason``: refuse pathological answers → 0 (``reward/guarded``).
  5. an exact gold (integer or fraction) and an answer that is not a plain number
     (``2^{10}``, ``5!``): exact closed-form evaluation in the worker pool
     (``reward/closed_form``, also in ``reward/verifier_calls``); refused past its size limits
     → 0 (``reward/guarded``). With an integer gold an answer that is not a closed-form
     number scores 0; with a fraction it goes on to math-verify within the same check.
  6. otherwise math-verify in the worker pool with a hard kill, on the answer without its
     whitelisted unit words (``units.py``) and with math-verify's own unit removal off, so
     ``\\sqrt2 \\text{ or more}`` stays unequal; timeout → 0 (``reward/timeouts``),
     unparsable answer → 0 (``reward/parse_failures``), unparsable gold → 0
     (``reward/gold_parse_failures``: a data problem, also in ``reward/parse_failures``).

Identical (gold, answer) pairs in a batch are verified once: the G rollouts of a prompt
often agree.
"""

import numpy as np

from grpo_jax.rewards.math import fastpath, guards, normalize, units, verify
from grpo_jax.rewards.math.extract import extract_answer

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_NUM_WORKERS = 0  # one worker per host core (verify.host_num_workers)

METRIC_KEYS = (
  "reward/timeouts",
  "reward/parse_failures",
  "reward/fastpath",
  "reward/no_answer",
  "reward/guarded",
  "reward/verifier_calls",
  "reward/gold_parse_failures",
  "reward/worker_errors",
  "reward/closed_form",
)


def prepare(completion: str, gold) -> tuple[str | None, str]:
  """(cleaned extracted answer or None, normalised gold) for one item."""
  g = normalize.normalize_gold(gold)
  pred = extract_answer(completion)
  if pred is not None:
    pred = normalize.strip_thousands(normalize.clean_latex(normalize.expand_e_notation(pred)))
  return pred, g


def score_batch(
  completions: list[str],
  golds: list,
  timeout_s: float = DEFAULT_TIMEOUT_S,
  num_workers: int = DEFAULT_NUM_WORKERS,
) -> tuple[np.ndarray, dict]:
  """Rewards for N completions against their golds.

  Args:
    completions: N generated texts.
    golds: N dataset answers (str, int or float; see ``normalize_gold``).
    timeout_s: hard wall-clock limit per math-verify check, after which the worker is
      killed and the item scores 0.
    num_workers: size of the shared worker pool; 0 = one per host core.

  Returns:
    ``rewards_N`` (float32, values in {0, 1}) and a dict of integer counts keyed by
    ``METRIC_KEYS``.
  """
  if len(completions) != len(golds):
    raise ValueError(f"{len(completions)} completions but {len(golds)} golds")
  n = len(completions)
  rewards_N = np.zeros((n,), np.float32)
  counts = dict.fromkeys(METRIC_KEYS, 0)
  queued: dict[tuple[str, str], list[int]] = {}
  routes: dict[tuple[str, str], dict] = {}
  for i, (completion, gold) in enumerate(zip(completions, golds)):
    pred, g = prepare(completion, gold)
    if pred is None:
      counts["reward/no_answer"] += 1
      counts["reward/parse_failures"] += 1
      continue
    if normalize.canonical(pred) == normalize.canonical(g):
      counts["reward/fastpath"] += 1
      rewards_N[i] = 1.0
      continue
    verdict = fastpath.fast_compare(pred, g)
    if verdict is not None:
      counts["reward/fastpath"] += 1
      rewards_N[i] = float(verdict)
      continue
    if guards.guard_reason(pred) is not None:
      counts["reward/guarded"] += 1
      continue
    key = (g, pred)
    if key not in queued:
      target = fastpath.closed_form_target(pred, g)
      if target is not None:
        value, strict = target
        routes[key] = {"value": str(value), "strict": strict}
    queued.setdefault(key, []).append(i)
  if queued:
    pairs = list(queued)
    counts["reward/verifier_calls"] = len(pairs)
    counts["reward/closed_form"] = len(routes)
    # The worker parses answers without math-verify's unit removal: whitelisted units go here.
    items = []
    for pair in pairs:
      item = (pair[0], units.strip_unit_tail(pair[1]))
      items.append((*item, routes[pair]) if pair in routes else item)
    results = verify.get_pool(num_workers).check(items, timeout_s=timeout_s)
    for pair, (status, equal) in zip(pairs, results):
      rows = queued[pair]
      if status == verify.OK:
        rewards_N[rows] = float(equal)
      elif status == verify.GUARDED:
        counts["reward/guarded"] += len(rows)
      elif status == verify.TIMEOUT:
        counts["reward/timeouts"] += len(rows)
      elif status in (verify.PRED_PARSE, verify.GOLD_PARSE):
        counts["reward/parse_failures"] += len(rows)
        if status == verify.GOLD_PARSE:
          counts["reward/gold_parse_failures"] += len(rows)
      else:
        counts["reward/worker_errors"] += len(rows)
  return rewards_N, counts


def score(completion: str, gold) -> float:
  """1.0 if ``completion``'s final answer equals ``gold``, else 0.0 (see ``score_batch``)."""
  rewards_N, _ = score_batch([completion], [gold])
  return float(rewards_N[0])
