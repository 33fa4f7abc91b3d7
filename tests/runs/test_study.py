"""The study's analysis against hand-computed values: condition labels, paired tests with Holm,
the verdict rules, difficulty strata from per-problem files, training curves, and the
group-relative bias estimator against the closed form β(p, G) on simulated samples."""

import json
import math
import pathlib

import numpy as np
import pytest
from scipy import stats

from grpo_jax.config import files as config_file
from grpo_jax.runs import group_bias, group_bias_report, power, study

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The pre-registered study's family, as its config declares it.
PRIMARY, HYPOTHESES, WITHDRAWN = study.family(
  config_file.load_module(str(ROOT / "configs/study.py"))
)

CONDITIONS = {
  "grpo": {"strategy.enabled": False, "hadw.enabled": False},
  "grpo+hadw": {"strategy.enabled": False, "hadw.enabled": True},
}


def rows_of(values: dict[str, list[float]], metric="after/pass@8") -> list[dict]:
  """Done rows: condition → per-seed metric values (seed = position)."""
  return [
    {"name": f"{c},seed={s}", "status": "done", "seed": s, "condition": c, metric: v}
    for c, vals in values.items()
    for s, v in enumerate(vals)
  ]


def test_label_matches_overrides_and_drops_strangers():
  rows = [
    {"name": "a", "seed": 0, "strategy.enabled": False, "hadw.enabled": True},
    {"name": "b", "seed": 0, "strategy.enabled": False, "hadw.enabled": False},
    {"name": "c", "seed": 0, "strategy.enabled": True, "hadw.enabled": False},
  ]
  assert [r["condition"] for r in study.label(rows, CONDITIONS)] == ["grpo+hadw", "grpo"]
  with pytest.raises(ValueError, match="matches conditions"):
    study.label(rows, {"x": {"seed": 0}, "y": {"strategy.enabled": False}})


def test_paired_uses_common_seeds_and_holm_over_the_family():
  a, b, c = [0.30, 0.33, 0.31, 0.36], [0.25, 0.30, 0.30, 0.30], [0.31, 0.29, 0.33, 0.35]
  rows = rows_of({"x": a, "y": b, "z": c})
  rows[3]["status"] = "failed"  # seed 3 of x: paired over seeds 0-2 only
  t = study.paired(rows, "x", "y", "after/pass@8")
  d = np.array(a[:3]) - np.array(b[:3])
  assert t["seeds"] == [0, 1, 2] and t["n"] == 3
  np.testing.assert_allclose(t["p"], stats.ttest_1samp(d, 0).pvalue)
  comps = (
    study.Comparison("1", "x", "y", "after/pass@8", +1),
    study.Comparison("2", "z", "y", "after/pass@8", +1),
  )
  tests = study.primary_tests(rows, comps)
  np.testing.assert_allclose([t["p_holm"] for t in tests], power.holm([t["p"] for t in tests]))
  small, large = sorted(t["p"] for t in tests)  # Holm by hand: 2·p₍₁₎, then max(that, p₍₂₎)
  adjusted = sorted(t["p_holm"] for t in tests)
  np.testing.assert_allclose(adjusted, [min(1, 2 * small), min(1, max(2 * small, large))])
  # The detectable effect: 80% power at Holm's first step with the observed sd.
  sd = d.std(ddof=1)
  assert power.power_paired(3, sd, tests[0]["mde"], 0.05 / 2) == pytest.approx(0.8, abs=1e-6)


def test_an_untestable_comparison_keeps_the_family_size():
  """A comparison whose paired Δ are all equal (no t statistic) stays in the Holm family at
  p = 1: the others are adjusted over m = 3, not over the 2 that could be tested."""
  a, b, c = [0.30, 0.33, 0.31, 0.36], [0.25, 0.30, 0.30, 0.30], [0.31, 0.29, 0.33, 0.35]
  w = [v + 0.02 for v in b]  # w − y = 0.02 on every seed
  rows = rows_of({"x": a, "y": b, "z": c, "w": w})
  comps = (
    study.Comparison("1", "x", "y", "after/pass@8", +1),
    study.Comparison("2", "z", "y", "after/pass@8", +1),
    study.Comparison("3", "w", "y", "after/pass@8", +1),
  )
  tests = study.primary_tests(rows, comps)
  assert math.isnan(tests[2]["p"]) and tests[2]["n"] == 4
  p1 = stats.ttest_1samp(np.subtract(a, b), 0).pvalue
  p2 = stats.ttest_1samp(np.subtract(c, b), 0).pvalue
  (i, small), (j, large) = sorted(enumerate([p1, p2]), key=lambda x: x[1])
  want = [0.0, 0.0, 1.0]  # by hand: 3·p₍₁₎, max(that, 2·p₍₂₎), max(that, 1·1)
  want[i] = min(1.0, 3 * small)
  want[j] = min(1.0, max(3 * small, 2 * large))
  np.testing.assert_allclose([t["p_holm"] for t in tests], want)
  assert want[i] > min(1.0, 2 * small)  # a family of 2 would have adjusted less
  # The detectable Δ is at Holm's first step of the whole family: α / 3.
  sd = np.subtract(a, b).std(ddof=1)
  assert power.power_paired(4, sd, tests[0]["mde"], 0.05 / 3) == pytest.approx(0.8, abs=1e-6)


def _tests(deltas: dict[str, list[float]]) -> list[dict]:
  """primary_tests over the design's family, with seeded per-seed Δ for each comparison."""
  rows = []
  for comp in PRIMARY:
    base = [0.3] * len(deltas[comp.id])
    rows += rows_of({f"{comp.id}:a": np.add(base, deltas[comp.id]), f"{comp.id}:b": base})
  comps = [
    study.Comparison(c.id, f"{c.id}:a", f"{c.id}:b", "after/pass@8", c.sign) for c in PRIMARY
  ]
  return study.primary_tests(rows, comps)


STRONG_UP = [0.05, 0.06, 0.055, 0.052, 0.058, 0.061]
NULL = [0.01, -0.012, 0.004, -0.003, 0.011, -0.009]


def test_a_config_without_its_family_is_refused():
  with pytest.raises(ValueError, match=r"lacks \['PRIMARY', 'HYPOTHESES', 'STRATA_PAIR'\]"):
    study.family(config_file.load_module(str(ROOT / "configs/mini_repro.py")))


def test_verdict_rules():
  deltas = {c.id: NULL for c in PRIMARY}
  assert {h: study.verdict(_tests(deltas), h, HYPOTHESES) for h in HYPOTHESES} == dict.fromkeys(
    HYPOTHESES, study.UNRESOLVED
  )
  # H1: (a) significant up and (b) up → supported; (b) down spoils it even when (a) holds.
  deltas.update(H1a=STRONG_UP, H1b=[0.01, 0.02, 0.0, 0.01, 0.015, 0.005])
  assert study.verdict(_tests(deltas), "H1", HYPOTHESES) == study.SUPPORTED
  deltas.update(H1b=[-0.01, -0.02, 0.0, -0.01, -0.015, -0.005])
  assert study.verdict(_tests(deltas), "H1", HYPOTHESES) == study.UNRESOLVED
  # H2 predicts Δ < 0: a significant rise is a contradiction.
  deltas.update(H2a=STRONG_UP)
  assert study.verdict(_tests(deltas), "H2", HYPOTHESES) == study.CONTRADICTED
  # H3 needs its secondary rule as well.
  deltas.update(H3=STRONG_UP)
  assert study.verdict(_tests(deltas), "H3", HYPOTHESES) == study.SUPPORTED
  assert study.verdict(_tests(deltas), "H3", HYPOTHESES, extra_ok=False) == study.UNRESOLVED


def _problems(path, correct_PxN):
  path.parent.mkdir(parents=True, exist_ok=True)
  lines = [json.dumps({"correct": [bool(x) for x in row]}) for row in correct_PxN]
  path.write_text("\n".join(lines) + "\n")


def test_strata_from_the_reference_runs_before_evaluation(tmp_path):
  # Before RL (4 samples): problem 0 unsolved, 1 hard (1/4), 2 hard (2/4), 3 easy (3/4).
  before = [[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]]
  after = {"grpo": [[0, 0, 0, 1], [1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]}
  after["grpo+hadw"] = [[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 0, 0]]
  rows = []
  for cond in after:
    d = tmp_path / cond
    _problems(d / "eval" / "countdown_step0_problems.jsonl", before)
    _problems(d / "eval" / "countdown_step50_problems.jsonl", after[cond])
    rows.append({"condition": cond, "seed": 0, "status": "done", "dir": str(d)})
  strata = study.strata_rows(rows, reference="grpo")
  got = {(r["condition"], r["stratum"]): (r["problems"], r["before"], r["after"]) for r in strata}
  assert got[("grpo", "unsolved")] == (1, 0.0, 0.25)
  assert got[("grpo", "hard")] == (2, 3 / 8, 4 / 8)
  assert got[("grpo+hadw", "easy")] == (1, 0.75, 0.5)
  assert got[("grpo+hadw", "hard")] == (2, 3 / 8, 6 / 8)
  assert [study.stratum_of(x) for x in (0, 0.125, 0.5, 0.51, 1)] == [
    "unsolved",
    "hard",
    "hard",
    "easy",
    "easy",
  ]
  # One seed: the paired means, and the hard strata gaining more than the easy one.
  deltas = study.strata_deltas(strata, "grpo+hadw", "grpo")
  assert deltas["unsolved"]["mean"] == 0.25 and deltas["easy"]["mean"] == -0.5
  assert study.hard_gain_larger(deltas)


def test_curves_mean_and_band_over_seeds(tmp_path):
  rows = []
  for seed, rewards in enumerate(([0.1, 0.2, 0.3], [0.3, 0.4, 0.5], [0.2, 0.3])):
    d = tmp_path / f"s{seed}"
    d.mkdir()
    lines = [json.dumps({"step": i + 1, "reward/mean": r}) for i, r in enumerate(rewards)]
    (d / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    rows.append({"condition": "x", "seed": seed, "status": "done", "dir": str(d)})
  c = study.curves(rows, "reward/mean")["x"]
  assert c["step"] == [1, 2]  # the steps every run logged
  np.testing.assert_allclose(c["mean"], [0.2, 0.3])
  half = stats.t.ppf(0.975, 2) * 0.1 / math.sqrt(3)
  np.testing.assert_allclose(c["hi"] - c["mean"], [half, half])


def test_beta_matches_monte_carlo():
  rng = np.random.default_rng(0)
  for p, G in ((0.1, 8), (0.3, 4), (0.8, 8)):
    r = rng.binomial(G, p, 400_000)
    mixed = (r > 0) & (r < G)
    assert abs(group_bias.beta(p, G) - (r[mixed].mean() / G - p)) < 2e-3
  assert group_bias.beta(0.5, 8) == pytest.approx(0.0, abs=1e-12)


def test_bias_by_bin_recovers_beta_on_simulated_samples():
  """Problems of known p (0.1, 0.3, 0.7, 0.9), 64 samples each: the estimator's bias per bin
  equals the closed form β(p, 8) averaged over the true p of the groups it holds, within 4
  standard errors."""
  rng = np.random.default_rng(1)
  p_P = np.repeat([0.1, 0.3, 0.7, 0.9], 1500)
  correct_PxM = rng.random((len(p_P), 64)) < p_P[:, None]
  rows = group_bias.bias_by_bin(correct_PxM, 8)
  assert [r["bin"] for r in rows] == ["[0, 0.25)", "[0.25, 0.5)", "[0.5, 0.75)", "[0.75, 1]"]
  est = group_bias.group_estimates(correct_PxM, 8)
  for row, lo, hi in zip(rows, (0, 0.25, 0.5, 0.75), (0.25, 0.5, 0.75, 1.01), strict=True):
    sel = (est["p_bin"] >= lo) & (est["p_bin"] < hi) & est["mixed"]
    p_true = np.tile(p_P, 8)[sel]
    expected = group_bias.beta(p_true, 8).mean()
    assert abs(row["bias"] - expected) < 4 * row["se"], row
  assert rows[0]["bias"] > 0.05 and rows[-1]["bias"] < -0.05
  with pytest.raises(ValueError, match="need >= 3"):
    group_bias.group_estimates(correct_PxM[:, :16], 8)


def test_bias_verdict():
  row = lambda b, lo, hi: {"bin": b, "bias": (lo + hi) / 2, "lo": lo, "hi": hi}
  good = [row("[0, 0.25)", 0.05, 0.1), row("[0.25, 0.5)", 0.01, 0.03)]
  good += [row("[0.5, 0.75)", -0.03, -0.01), row("[0.75, 1]", -0.1, -0.05)]
  assert study.bias_verdict(good) == study.SUPPORTED
  unsure = [*good[:3], row("[0.75, 1]", -0.1, 0.02)]
  assert study.bias_verdict(unsure) == study.UNRESOLVED
  wrong = [*good[:3], row("[0.75, 1]", 0.01, 0.05)]
  assert study.bias_verdict(wrong) == study.CONTRADICTED


def test_group_bias_report_pools_seeds_by_bin():
  row = lambda b, bias, mixed: {"bin": b, "bias": bias, "mixed": mixed, "predicted": 0.05}
  per_seed = {
    0: [row("[0, 0.5)", 0.04, 10), row("[0.5, 1]", -0.02, 3)],
    1: [row("[0, 0.5)", 0.06, 12), row("[0.5, 1]", float("nan"), 0)],
  }
  hard, easy = group_bias_report.pooled(per_seed)
  half = stats.t.ppf(0.975, 1) * np.std([0.04, 0.06], ddof=1) / math.sqrt(2)
  assert (hard["seeds"], hard["mixed"]) == (2, 22)
  np.testing.assert_allclose([hard["bias"], hard["hi"]], [0.05, 0.05 + half])
  assert easy["bias"] == -0.02 and math.isnan(easy["lo"])  # one seed had no mixed group
  text = group_bias_report.markdown([hard, easy], 8, 64)
  assert "| [0, 0.5) | 2 | 22 | +0.050 [" in text and "| [0.5, 1] | 1 | 3 | -0.020 |" in text
