"""The study's report (docs/study_design.md's analysis plan) from its run directories, as
``experiments/study_report.py`` writes it: ``runs.csv``, ``report.md`` (per condition, the
primary comparisons with Holm, the verdicts, the secondary and withdrawn comparisons, strata,
RL's own effect, the config's ``BIAS`` hypothesis from the group-bias JSON, the training metrics
it ``DESCRIBE``s and its ``CONTRASTS``), ``tests.json`` and three figures (the training curves:
its ``CURVES``, by default :data:`grpo_jax.runs.study_plots.CURVES`)."""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import re

import numpy as np

from grpo_jax.config import files as config_file
from grpo_jax.rundir import tables
from grpo_jax.runs import aggregate, power, study, study_plots, study_prior

COLUMNS = ("condition", "seed", "status", "steps", "before/pass@1", "before/pass@{k}")
COLUMNS += ("after/pass@1", "after/pass@{k}", "final/reward/mean", "final/loss/entropy")


_f = tables.number
_interval = tables.interval


def top_k(rows) -> int:
  """The largest k of the runs' after/pass@k columns."""
  ks = [int(m.split("@")[1]) for r in rows for m in r if re.fullmatch(r"after/pass@\d+", m)]
  return max(ks, default=1)


def _other_metric(metric: str, k: int) -> str:
  """after/pass@1 ↔ after/pass@k (the secondary metric of a comparison)."""
  return f"after/pass@{k}" if metric == study.P1 else study.P1


def conditions_table(rows, conditions, k: int) -> str:
  metrics = ("before/pass@1", "after/pass@1", f"before/pass@{k}", f"after/pass@{k}")
  return describe_table(rows, conditions, (*metrics, "final/reward/mean"))


def describe_table(rows, conditions, metrics) -> str:
  """Per condition, each of ``metrics`` (the pass rates; a config's ``DESCRIBE``): mean [95% t]
  over seeds."""
  lines = []
  for c in conditions:
    done = [r for r in rows if r["condition"] == c and r["status"] == "done"]
    cells = [_interval(*aggregate.t_interval([r.get(m, math.nan) for r in done])) for m in metrics]
    lines.append([c, len(done), *cells])
  return tables.markdown(["condition", "n", *metrics], lines)


def contrasts(rows, declared) -> list[dict]:
  """A config's ``CONTRASTS``: (id, conditions, metric a, metric b, rule) each. Per seed, a − b
  averaged over the conditions' finished runs; its mean and 95% t interval over seeds; ``holds``
  by the rule: 'above' (the interval above 0) or 'not above' (it is not)."""
  out = []
  for cid, names, a, b, rule in declared:
    per_seed: dict = {}
    for r in rows:
      if r["condition"] in names and r["status"] == "done" and a in r and b in r:
        per_seed.setdefault(r[aggregate.SEED], []).append(r[a] - r[b])
    mean, lo, hi = aggregate.t_interval([float(np.mean(v)) for v in per_seed.values()])
    above = math.isfinite(lo) and lo > 0
    holds = above if rule == "above" else not above
    out.append({"id": cid, "conditions": list(names), "a": a, "b": b, "rule": rule})
    out[-1] |= {"n": len(per_seed), "mean": mean, "lo": lo, "hi": hi, "holds": holds}
  return out


def contrasts_table(tests) -> str:
  lines = [
    [t["id"], ", ".join(t["conditions"]), f"{t['a']} − {t['b']}", t["n"]]
    + [_interval(t["mean"], t["lo"], t["hi"], signed=True), t["rule"], str(t["holds"]).lower()]
    for t in tests
  ]
  header = ["id", "conditions", "a − b (per seed, mean over the conditions)", "n", "[95% t]"]
  return tables.markdown([*header, "holds if", "holds"], lines)


def tests_table(tests, holm=True) -> str:
  header = ["id", "A − B", "metric", "n", "Δ [95% t]", "p"] + (
    ["Holm p", "detectable Δ"] if holm else []
  )
  lines = []
  for t in tests:
    cells = [t["id"], f"{t['a']} − {t['b']}", t["metric"], t["n"]]
    cells += [_interval(t["mean"], t["lo"], t["hi"], signed=True), _f(t["p"])]
    if holm:
      cells += [_f(t["p_holm"]), _f(t["mde"])]
    lines.append(cells)
  return tables.markdown(header, lines)


def strata_table(strata, conditions, pairs) -> str:
  lines = []
  for c in conditions:
    cells = []
    for s in study.STRATA:
      sel = [r for r in strata if r["condition"] == c and r["stratum"] == s]
      problems = np.mean([r["problems"] for r in sel]) if sel else 0
      mean, lo, hi = aggregate.t_interval([r["after"] for r in sel])
      cells.append(f"{_interval(mean, lo, hi)} ({problems:.0f})")
    lines.append([c, *cells])
  deltas = []
  for a, b in pairs:
    d = study.strata_deltas(strata, a, b)
    cells = [_interval(d[s]["mean"], d[s]["lo"], d[s]["hi"], signed=True) for s in study.STRATA]
    deltas.append([f"{a} − {b}", *cells])
  by_condition = tables.markdown(["condition", *study.STRATA], lines)
  return by_condition + "\n\n" + tables.markdown(["paired Δ pass@1", *study.STRATA], deltas)


def rl_effect_table(rows, conditions, k: int) -> str:
  lines = []
  for c in conditions:
    done = [r for r in rows if r["condition"] == c and r["status"] == "done"]
    cells = []
    for m in ("pass@1", f"pass@{k}"):
      t = power.paired_test([r[f"after/{m}"] - r[f"before/{m}"] for r in done])
      cells.append(_interval(t["mean"], t["lo"], t["hi"], signed=True))
    lines.append([c, len(done), *cells])
  header = ["condition", "n", "Δ pass@1 (after − before)", f"Δ pass@{k}"]
  return tables.markdown(header, lines)


def evidence(tests: list[dict], ids) -> str:
  """Each comparison's Δ beside the smallest Δ the design detects (the verdict's grounds)."""
  by_id = {t["id"]: t for t in tests}
  parts = [f"{i} Δ {_f(by_id[i]['mean'], True)}, detectable {_f(by_id[i]['mde'])}" for i in ids]
  return "; ".join(parts)


def bias_evidence(bias: dict | None) -> str:
  """H4's grounds: each judged half's interval beside the closed-form β at its measured p."""
  rows = (bias or {}).get("pooled", [])
  cells = [
    f"{r['bin']} {_interval(r['bias'], r['lo'], r['hi'], True)}, β {_f(r['predicted'], True)}"
    for r in rows
  ]
  return "; ".join(cells)


def bias_section(bias: dict | None) -> tuple[str, str]:
  """(H4's verdict, its tables) from experiments/group_bias.py's JSON: the pre-registered halves
  (``pooled``, judged) and quarters (``pooled_fine``, descriptive)."""
  if bias is None:
    return study.UNRESOLVED, ""
  header = ["p bin", "seeds", "mixed groups", "E[p̂ − p given mixed] [95% t]", "β(p, G)"]
  row = lambda r: [
    r["bin"], r["seeds"], r["mixed"], _interval(r["bias"], r["lo"], r["hi"], signed=True),
    _f(r["predicted"], True),
  ]  # fmt: skip
  parts = [
    tables.markdown(header, map(row, bias.get(key, []))) for key in ("pooled", "pooled_fine")
  ]
  return study.bias_verdict(bias["pooled"]), "\n\n".join(parts)


def write(
  sweep_dirs: list[str],
  config: str,
  out: str,
  bias_path: str | None = None,
  last_k: int = 10,
  prior_dir: str | None = None,
) -> str:
  """Reads every run under ``sweep_dirs``, labelled by ``config``'s CONDITIONS, writes the
  report's files under ``out`` and returns ``report.md``'s text. ``bias_path``:
  experiments/group_bias.py's JSON (H4); ``prior_dir``: an earlier report's ``out``, whose runs
  stand in for the (condition, seed) pairs the directories lack."""
  module = config_file.load_module(config)
  conditions = module.CONDITIONS
  # The config names its family (study.Comparison fields), hypotheses, strata pair and any
  # withdrawn comparisons.
  primary, hypotheses, withdrawn = study.family(module)
  reference, treated = module.STRATA_PAIR
  names = list(conditions)
  rows = study.collect(sweep_dirs, conditions, last_k, getattr(module, "ADDED_KEYS", {}))
  k = top_k(rows)
  columns = [c.format(k=k) for c in COLUMNS]
  strata = study.strata_rows(rows, reference=reference)
  prior = study_prior.read(prior_dir) if prior_dir else None
  reran = 0
  if prior is not None:
    rows, strata, reran = study_prior.merge(rows, strata, prior, columns[3:])
  panels = getattr(module, "CURVES", study_plots.CURVES)
  curves = study.curve_record(rows, study_plots.curve_metrics(panels), prior and prior.curves)
  out = pathlib.Path(out)
  out.mkdir(parents=True, exist_ok=True)
  aggregate.to_csv([{c: r.get(c) for c in columns} for r in rows], out / "runs.csv")

  tests = study.primary_tests(rows, primary)
  other = [study.Comparison(c.id, c.a, c.b, _other_metric(c.metric, k), c.sign) for c in primary]
  other_tests = [{**t, "id": t["id"] + "′"} for t in study.primary_tests(rows, other)]
  withdrawn_tests = [
    {**dataclasses.asdict(c), **study.paired(rows, c.a, c.b, c.metric)} for c in withdrawn
  ]
  hadw_strata = study.strata_deltas(strata, treated, reference)
  verdicts = {}
  for h in hypotheses:
    extra = study.hard_gain_larger(hadw_strata) if h == "H3" else True
    verdicts[h] = study.verdict(tests, h, hypotheses, extra)
  grounds = {h: evidence(tests, hypotheses[h][0]) for h in hypotheses}
  # The hypothesis judged from experiments/group_bias.py's JSON, where the config names one.
  bias_id = getattr(module, "BIAS", None)
  if bias_path and not bias_id:
    raise ValueError(f"--bias: {config} names no BIAS hypothesis to judge it by")
  bias = json.loads(pathlib.Path(bias_path).read_text()) if bias_path else None
  bias_table = ""
  if bias_id:
    verdicts[bias_id], bias_table = bias_section(bias)
    grounds[bias_id] = bias_evidence(bias) or "no --bias file"

  done = [r for r in rows if r["status"] == "done"]
  unfinished = sorted(r["name"] for r in rows if r["status"] != "done")
  seeds = sorted({r["seed"] for r in done})
  report = [
    f"# Study results: {len(done)} finished runs, seeds {seeds}",
    "",
    f"Unfinished runs left out: {len(unfinished)}.",
    "",
    *(
      [
        f"{sum('dir' not in r for r in done)} runs are read from the prior report {prior_dir} "
        f"(their directories are not here); {reran} runs here rerun prior ones and reproduce "
        "them. The training curves of conditions without runs here come from the prior's "
        "record where it has them.",
        "",
      ]
      if prior is not None
      else []
    ),
    "## Per condition (mean over seeds [95% t interval])",
    "",
    conditions_table(rows, names, k),
    "",
    f"## Primary comparisons (paired over seeds; Holm over the {len(tests)})",
    "",
    tests_table(tests),
    "",
    "## Verdicts",
    "",
    *[f"- **{h}**: {v} ({grounds[h]})" for h, v in verdicts.items()],
    "",
    "## The same comparisons on the other metric (secondary, unadjusted)",
    "",
    tests_table(other_tests, holm=False),
    "",
    "## Withdrawn comparisons (outside the family, unadjusted; docs/study_design.md)",
    "",
    tests_table(withdrawn_tests, holm=False) if withdrawn_tests else "none",
    "",
    "## pass@1 after RL by difficulty before RL (mean over seeds; problems per stratum)",
    "",
    strata_table(strata, names, getattr(module, "STRATA_PAIRS", [(treated, reference)])),
    "",
    "## RL's own effect (after − before, paired per run)",
    "",
    rl_effect_table(rows, names, k),
    "",
  ]
  if bias_id:
    head = f"## {bias_id}: the group-relative bias in the warm-started policy's own samples"
    report += [head, "", bias_table or "not measured", ""]
  described = getattr(module, "DESCRIBE", ())
  if described:
    head = f"## Training metrics (per run the mean over its last {last_k} steps)"
    report += [head, "", describe_table(rows, names, described), ""]
  contrast_tests = contrasts(rows, getattr(module, "CONTRASTS", ()))
  if contrast_tests:
    report += ["## Registered contrasts of the training metrics", ""]
    report += [contrasts_table(contrast_tests), ""]
  (out / "report.md").write_text("\n".join(report))
  record = {"tests": tests, "secondary": other_tests, "withdrawn": withdrawn_tests}
  record |= {"verdicts": verdicts, "strata": strata, "curves": curves}
  record |= {"contrasts": contrast_tests}
  (out / "tests.json").write_text(json.dumps(record, indent=2, default=float) + "\n")
  study_plots.forest(tests).savefig(out / "forest.png", dpi=120)
  figure = study_plots.training_curves(rows, names, record=curves, panels=panels)
  figure.savefig(out / "curves.png", dpi=110)
  study_plots.strata_bars(strata, names).savefig(out / "strata.png", dpi=120)
  return "\n".join(report)
