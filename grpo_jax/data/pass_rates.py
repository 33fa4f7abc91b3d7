"""Per-problem pass rates (the difficulty profile) and the learnable band they select.

RL learns only from groups with mixed rewards: with binary rewards a group of G rollouts of a
problem the policy solves with probability p is informative (not all equal) with probability

  q(p, G) = 1 − p^G − (1 − p)^G,

0.08 at G = 8 for p = 0.01 or 0.99, 0.57 for p = 0.1 or 0.9, 0.99 for p = 0.5. A profile row is
``{"id", "n", "correct", "pass_rate", "level"}`` (``level`` where the set has one), one JSON line
per problem in ``<workdir>/profile/pass_rates.jsonl`` (``grpo_jax.train.profile`` writes it);
``data.pass_rate_band = (lo, hi)`` keeps the training problems with lo ≤ pass_rate ≤ hi.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import numpy as np

from grpo_jax.rundir import tables


def informative_prob(p, group_size: int):
  """q(p, G) = 1 − p^G − (1 − p)^G: the chance that G Bernoulli(p) rewards are not all equal."""
  p = np.asarray(p, np.float64)
  return 1.0 - p**group_size - (1.0 - p) ** group_size


def profile_row(problem: dict, correct_N: np.ndarray) -> dict:
  """The profile line of one problem from its n samples' correctness."""
  n, c = int(correct_N.size), int(np.sum(correct_N))
  row = {"id": str(problem["id"]), "n": n, "correct": c, "pass_rate": c / n}
  level = (problem.get("meta") or {}).get("level")
  if level is not None:
    row["level"] = level
  return row


def read(path) -> list[dict]:
  """The rows of a profile file (an ``etils.epath.Path`` or str); a line that does not parse or
  lacks a key is an error naming the file and line (a half-written last line is dropped: the
  profile that wrote it was killed and redoes that chunk)."""
  from etils import epath

  path = epath.Path(path)
  lines = path.read_text().splitlines()
  rows = []
  for i, line in enumerate(lines, 1):
    if not line.strip():
      continue
    try:
      row = json.loads(line)
    except json.JSONDecodeError:
      if i == len(lines):  # an interrupted append
        break
      raise ValueError(f"{path}:{i}: not a JSON line: {line[:80]!r}") from None
    missing = {"id", "n", "correct", "pass_rate"} - set(row)
    if missing:
      raise ValueError(f"{path}:{i}: profile row lacks {sorted(missing)}")
    rows.append(row)
  return rows


def band_ids(rows: Iterable[dict], band: tuple[float, float]) -> set[str]:
  """Ids of the profiled problems with lo ≤ pass rate ≤ hi."""
  lo, hi = band
  return {r["id"] for r in rows if lo <= r["pass_rate"] <= hi}


def band_counts(rows: list[dict], band: tuple[float, float]) -> dict:
  """Kept and dropped problems per level (``"all"`` for every level), with the dropped split
  into below (too hard) and above (too easy) the band."""
  lo, hi = band
  out: dict[str, dict] = {}
  for r in rows:
    p = r["pass_rate"]
    where = "kept" if lo <= p <= hi else "below" if p < lo else "above"
    for key in ["all"] + ([str(r["level"])] if "level" in r else []):
      out.setdefault(key, {"kept": 0, "below": 0, "above": 0})[where] += 1
  for c in out.values():
    c["dropped"] = c["below"] + c["above"]
  return dict(sorted(out.items(), key=lambda kv: (kv[0] == "all", kv[0])))


def level_table(rows: list[dict], group_size: int, band: tuple[float, float] | None = None) -> str:
  """Per level: problems, mean pass rate, the share of problems never / always solved, and
  the mean informative-group probability q(p, G) at the configured G (with a band, the kept
  problems too)."""
  groups: dict[str, list[dict]] = {}
  for r in rows:
    groups.setdefault(str(r.get("level", "-")), []).append(r)
  groups = dict(sorted(groups.items()))
  if len(groups) > 1:
    groups["all"] = list(rows)
  header = ["level", "problems", "pass rate", "never", "always", f"informative (G={group_size})"]
  header += [f"kept in [{band[0]:g}, {band[1]:g}]"] if band else []
  rows = []
  for name, rs in groups.items():
    p = np.array([r["pass_rate"] for r in rs])
    q = informative_prob(p, group_size)
    row = [name, len(rs), p.mean(), tables.number(np.mean(p == 0), digits=2)]
    row += [tables.number(np.mean(p == 1), digits=2), q.mean()]
    row += [int(np.sum((p >= band[0]) & (p <= band[1])))] if band else []
    rows.append(row)
  return tables.markdown(header, rows)


__all__ = [
  "band_counts",
  "band_ids",
  "informative_prob",
  "level_table",
  "profile_row",
  "read",
]
