"""The pre-registered study's analysis (docs/study_design.md): primary comparisons with paired t
tests over seeds and Holm's correction, difficulty strata, and a verdict per hypothesis.

Rows are :func:`grpo_jax.runs.aggregate.load_run`'s, each labelled with its condition name
(:func:`label`). A comparison ``A − B`` pairs the runs of one seed (they share the warm start,
the prompt stream and the evaluation draws). Verdicts follow the design's rules:

- *supported*: the hypothesis's rule holds (its primary Δ in the predicted direction with a
  Holm-adjusted p < 0.05, and its secondary conditions in the predicted direction);
- *contradicted*: a primary Δ of the hypothesis has the opposite sign with Holm p < 0.05;
- *not resolved at this power*: anything else, given with the smallest effect the design could
  detect at the observed spread (:func:`grpo_jax.runs.power.min_detectable`).
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
from etils import epath

from grpo_jax.rundir import names, read
from grpo_jax.runs import aggregate, power

SUPPORTED, CONTRADICTED, UNRESOLVED = "supported", "contradicted", "not resolved at this power"
STRATA = ("unsolved", "hard", "easy")  # before-RL solve rate 0, (0, 1/2], (1/2, 1]


@dataclasses.dataclass(frozen=True)
class Comparison:
  """``a − b`` on ``metric``, predicted to have the sign ``sign`` (+1 or −1)."""

  id: str
  a: str
  b: str
  metric: str
  sign: int


P1 = "after/pass@1"


def collect(roots, conditions: dict[str, dict], last_k: int = 10, absent=None) -> list[dict]:
  """:func:`aggregate.collect`'s rows of every run under the ``roots`` (a study split over
  several work directories), each with its ``dir`` and ``condition`` (:func:`label`)."""
  rows = []
  for root in roots:
    root = epath.Path(root)
    dirs = [p for p in root.iterdir() if read.is_run(p)]
    rows += [{**aggregate.load_run(d, last_k), "dir": str(d)} for d in sorted(dirs)]
  return label(rows, conditions, absent)


def label(rows: list[dict], conditions: dict[str, dict], absent=None) -> list[dict]:
  """Each row with ``condition``: the name whose overrides it matches (``seed`` aside); rows
  matching none are dropped, two names matching one row is an error. ``absent``: key → the
  value a row without that key ran with (keys a sweep gained after some of its runs, which
  keep their names: a study config's ``ADDED_KEYS``). Keys since replaced are read as their
  replacement already (``aggregate.load_run``)."""
  absent = absent or {}
  out = []
  for row in rows:
    filled = {**absent, **row}
    names = [
      name
      for name, overrides in conditions.items()
      if all(aggregate._same(filled.get(k), v) for k, v in overrides.items())
    ]
    if len(names) > 1:
      raise ValueError(f"run {row['name']} matches conditions {names}")
    if names:
      out.append({**row, "condition": names[0]})
  return out


def paired(rows: list[dict], a: str, b: str, metric: str) -> dict:
  """Δ = metric(a) − metric(b) over the seeds where both runs are done: ``power.paired_test``'s
  fields and ``seeds``."""
  pick = lambda c: {
    r[aggregate.SEED]: r[metric]
    for r in rows
    if r["condition"] == c and r["status"] == "done" and metric in r
  }
  ra, rb = pick(a), pick(b)
  seeds = sorted(s for s in ra if s in rb)
  out = power.paired_test([ra[s] - rb[s] for s in seeds])
  out["seeds"] = seeds
  return out


def primary_tests(rows: list[dict], comparisons, family_alpha: float = 0.05) -> list[dict]:
  """One dict per comparison: its fields, the paired test, ``p_holm`` (Holm over all the given
  comparisons: an untestable one, p NaN, stays in the family at p = 1, so the family is always
  m = len(comparisons)) and ``mde``: the smallest Δ these seeds detect with 80% power at Holm's
  first step (α / m) given the observed sd."""
  tests = [{**dataclasses.asdict(c), **paired(rows, c.a, c.b, c.metric)} for c in comparisons]
  adjusted = power.holm([t["p"] for t in tests]) if tests else []
  for t, p in zip(tests, adjusted, strict=True):
    t["p_holm"] = float(p)
  for t in tests:
    t["mde"] = math.nan
    if t["n"] >= 2 and math.isfinite(t["sd"]) and t["sd"] > 0:
      t["mde"] = power.min_detectable(t["n"], t["sd"], family_alpha, family=len(comparisons))
  return tests


def family(module) -> tuple[tuple[Comparison, ...], dict, tuple[Comparison, ...]]:
  """(primary comparisons, hypotheses, withdrawn comparisons) a study config declares: its
  ``PRIMARY`` and ``HYPOTHESES`` (required) and ``WITHDRAWN`` (optional), comparisons as
  :class:`Comparison` fields. A config without them is a ValueError naming what it lacks."""
  missing = [n for n in ("PRIMARY", "HYPOTHESES", "STRATA_PAIR") if not hasattr(module, n)]
  if missing:
    raise ValueError(f"study config {module.__name__} lacks {missing}: a study names its family")
  as_comparison = lambda c: c if isinstance(c, Comparison) else Comparison(*c)
  primary = tuple(map(as_comparison, module.PRIMARY))
  withdrawn = tuple(map(as_comparison, getattr(module, "WITHDRAWN", ())))
  return primary, dict(module.HYPOTHESES), withdrawn


def _significant(test: dict, sign: int, level: float = 0.05) -> bool:
  return test["p_holm"] < level and np.sign(test["mean"]) == sign


def verdict(tests: list[dict], hypothesis: str, hypotheses: dict, extra_ok: bool = True) -> str:
  """The design's verdict for ``hypothesis`` from :func:`primary_tests`. ``extra_ok``: the
  hypothesis's secondary condition (H3: the gain larger in the hard strata than the easy one).
  ``hypotheses``: name → (its comparison ids, those that must be significant)."""
  by_id = {t["id"]: t for t in tests}
  ids, required = hypotheses[hypothesis]
  members = [by_id[i] for i in ids]
  if any(_significant(t, -t["sign"]) for t in members):
    return CONTRADICTED
  directions = all(np.sign(t["mean"]) == t["sign"] for t in members)
  if directions and extra_ok and all(_significant(by_id[i], by_id[i]["sign"]) for i in required):
    return SUPPORTED
  return UNRESOLVED


def bias_verdict(pooled: list[dict]) -> str:
  """H4 from ``experiments/group_bias.py``'s pooled rows (``bin`` "[lo, hi)", ``bias``, ``lo``,
  ``hi``): supported when every bin below 1/2 has its interval above 0 and every bin above 1/2
  below 0 (the sign of β(p, G)); contradicted when any interval excludes 0 on the other side.
  Bins that straddle 1/2 are not judged."""
  judged = []
  for r in pooled:
    lo_edge, hi_edge = (float(x) for x in r["bin"].strip("[]()").split(","))
    sign = +1 if hi_edge <= 0.5 else -1 if lo_edge >= 0.5 else 0
    if sign:
      judged.append((sign, r["lo"] > 0, r["hi"] < 0))
  if any((sign > 0 and below) or (sign < 0 and above) for sign, above, below in judged):
    return CONTRADICTED
  if judged and all((above if sign > 0 else below) for sign, above, below in judged):
    return SUPPORTED
  return UNRESOLVED


def stratum_of(correct_fraction: float) -> str:
  """unsolved (0), hard (≤ 1/2), easy (> 1/2): the before-RL solve rate of a problem."""
  if correct_fraction <= 0:
    return "unsolved"
  return "hard" if correct_fraction <= 0.5 else "easy"


def problem_files(run_dir) -> dict[int, epath.Path]:
  """step → ``eval/<benchmark>_step<k>_problems.jsonl`` of the run's (single) benchmark."""
  files = sorted((epath.Path(run_dir) / names.EVAL).glob("*_step*_problems.jsonl"))
  benchmarks = {p.name.rsplit("_step", 1)[0] for p in files}
  if len(benchmarks) > 1:
    raise ValueError(f"{run_dir} holds several benchmarks {sorted(benchmarks)}; pass one run's")
  return {int(p.name.rsplit("_step", 1)[1].split("_")[0]): p for p in files}


def correct_PxN(path) -> np.ndarray:
  """The per-problem correctness matrix of one ``*_problems.jsonl`` file."""
  lines = epath.Path(path).read_text().splitlines()
  return np.array([json.loads(ln)["correct"] for ln in lines if ln.strip()], bool)


def strata_rows(rows: list[dict], reference: str) -> list[dict]:
  """Per run and difficulty stratum: ``before`` / ``after`` pass@1 on the problems of that
  stratum. Strata come from the seed's ``reference`` run's before-RL evaluation (every run of a
  seed evaluates the same problems with the same warm-started policy before RL, so a seed
  without a reference run here takes the run's own). Rows without a run directory (a prior
  report's, :mod:`grpo_jax.runs.study_prior`) are skipped."""
  ref_dirs = {r[aggregate.SEED]: r["dir"] for r in rows if r["condition"] == reference}
  out = []
  for r in rows:
    seed = r[aggregate.SEED]
    if r["status"] != "done" or "dir" not in r:
      continue
    ref_files, files = problem_files(ref_dirs.get(seed, r["dir"])), problem_files(r["dir"])
    strata = np.array([stratum_of(c.mean()) for c in correct_PxN(ref_files[min(ref_files)])])
    before, after = correct_PxN(files[min(files)]), correct_PxN(files[max(files)])
    for s in STRATA:
      mask = strata == s
      if mask.any():
        row = {"condition": r["condition"], "seed": seed, "stratum": s, "problems": int(mask.sum())}
        row.update(before=float(before[mask].mean()), after=float(after[mask].mean()))
        out.append(row)
  return out


def strata_deltas(strata: list[dict], a: str, b: str) -> dict[str, dict]:
  """stratum → paired test of after-RL pass@1 (a − b) over seeds."""
  out = {}
  for s in STRATA:
    pick = lambda c, s=s: {
      r["seed"]: r["after"] for r in strata if r["condition"] == c and r["stratum"] == s
    }
    ra, rb = pick(a), pick(b)
    out[s] = power.paired_test([ra[k] - rb[k] for k in sorted(ra) if k in rb])
  return out


def hard_gain_larger(deltas: dict[str, dict]) -> bool:
  """H3's secondary rule: the mean gain over the unsolved and hard strata exceeds the easy one's."""
  hard = [deltas[s]["mean"] for s in ("unsolved", "hard") if math.isfinite(deltas[s]["mean"])]
  easy = deltas["easy"]["mean"]
  return bool(hard) and math.isfinite(easy) and float(np.mean(hard)) > easy


def curves(rows: list[dict], metric: str) -> dict[str, dict]:
  """condition → ``step``, ``mean``, ``lo``, ``hi`` (95% t band over seeds) of a training metric,
  over the steps every done run of the condition logged (runs with a directory here); a
  condition whose runs do not log the metric (a feature they do not use) has no steps."""
  by_cond: dict[str, list[dict[int, float]]] = {}
  for r in rows:
    if r["status"] != "done" or "dir" not in r:
      continue
    series = {m["step"]: m[metric] for m in read.metrics(r["dir"]) if metric in m}
    series = {k: v for k, v in series.items() if isinstance(v, int | float)}
    by_cond.setdefault(r["condition"], []).append(series)
  out = {}
  for cond, runs in by_cond.items():
    steps = sorted(set.intersection(*(set(s) for s in runs)))
    stats = np.array([aggregate.t_interval([s[k] for s in runs]) for k in steps]).reshape(-1, 3)
    out[cond] = {"step": steps, "mean": stats[:, 0], "lo": stats[:, 1], "hi": stats[:, 2]}
  return out


def curve_record(rows: list[dict], metrics, prior: dict | None = None) -> dict[str, dict]:
  """metric → condition → ``step``/``mean``/``lo``/``hi`` lists (JSON, a report's
  ``tests.json``): :func:`curves` of the rows, with ``prior``'s (an earlier report's record,
  :mod:`grpo_jax.runs.study_prior`) for the conditions that have no run directory here."""
  out = {}
  for m in metrics:
    own = {c: {k: np.asarray(v).tolist() for k, v in d.items()} for c, d in curves(rows, m).items()}
    out[m] = {**(prior or {}).get(m, {}), **own}
  return out


__all__ = [
  "Comparison",
  "bias_verdict",
  "collect",
  "family",
  "curve_record",
  "curves",
  "hard_gain_larger",
  "label",
  "paired",
  "primary_tests",
  "strata_deltas",
  "strata_rows",
  "stratum_of",
  "verdict",
]
