"""The study's power analysis: Holm's adjustment by hand, the paired test against scipy's, the
noncentral-t power against a simulation, and the planning script on a small CSV."""

import csv
import math
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from grpo_jax.runs import power

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_holm_by_hand():
  # Sorted 0.005, 0.01, 0.03, 0.04 → ×4, ×3, ×2, ×1 = 0.02, 0.03, 0.06, 0.04 → monotone 0.06.
  np.testing.assert_allclose(power.holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])
  np.testing.assert_allclose(power.holm([0.5, 0.9]), [1.0, 1.0])


def test_holm_keeps_an_untestable_comparison_in_the_family_at_p_1():
  # m = 3, not 2: sorted 0.01, 0.04, (NaN → 1) → ×3, ×2, ×1 = 0.03, 0.08, 1.
  np.testing.assert_allclose(power.holm([0.01, math.nan, 0.04]), [0.03, 1.0, 0.08])
  np.testing.assert_allclose(power.holm([0.01, 0.04]), [0.02, 0.04])  # a family of two


def test_paired_test_matches_scipy():
  d = np.array([0.03, -0.01, 0.02, 0.05, 0.0, 0.015])
  got, ref = power.paired_test(d), stats.ttest_1samp(d, 0.0)
  assert got["n"] == 6
  np.testing.assert_allclose(got["p"], ref.pvalue, rtol=1e-10)
  half = stats.t.ppf(0.975, 5) * d.std(ddof=1) / np.sqrt(6)
  np.testing.assert_allclose([got["lo"], got["hi"]], [d.mean() - half, d.mean() + half])


def test_power_matches_a_simulated_paired_t_test():
  rng = np.random.default_rng(0)
  n, sd, effect, alpha = 8, 0.03, 0.025, 0.05
  d = rng.normal(effect, sd, size=(20000, n))
  t = d.mean(1) / (d.std(1, ddof=1) / np.sqrt(n))
  simulated = np.mean(np.abs(t) > stats.t.ppf(1 - alpha / 2, n - 1))
  assert abs(power.power_paired(n, sd, effect, alpha) - simulated) < 0.015


def test_seeds_needed_and_detectable_effect_are_inverse():
  n = power.seeds_needed(0.03, 0.02, family=6)
  assert (
    power.power_paired(n, 0.03, 0.02, 0.05 / 6)
    >= 0.8
    > power.power_paired(n - 1, 0.03, 0.02, 0.05 / 6)
  )
  # Normal approximation ((z_{1-α/2m} + z_0.8)·sd/δ)² is a lower bound a few seeds below.
  approx = ((stats.norm.ppf(1 - 0.05 / 12) + stats.norm.ppf(0.8)) * 0.03 / 0.02) ** 2
  assert approx <= n <= approx + 4
  mde = power.min_detectable(n, 0.03, family=6)
  assert mde <= 0.02 + 1e-9 and power.min_detectable(n - 1, 0.03, family=6) > 0.02


@pytest.fixture
def small_csv(tmp_path):
  rng = np.random.default_rng(1)
  path = tmp_path / "runs.csv"
  cols = ["name", "status", "steps", "seed", "advantage.offset_coef", "after/pass@8"]
  cols += ["final/time/rollout_s", "final/time/update_s"]
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(cols)
    for seed in range(6):
      base = rng.uniform(0.5, 0.7)
      for alpha, shift in ((0.0, 0.0), (-0.5, 0.03)):
        value = base + shift + rng.normal(0, 0.01)
        w.writerow([f"s{seed}a{alpha}", "done", 25, seed, alpha, value, 0.3, 0.9])
  return path


def test_script_reports_the_condition_and_a_design(small_csv):
  cmd = [sys.executable, str(ROOT / "experiments/power_analysis.py"), str(small_csv)]
  cmd += ["--reference", "advantage.offset_coef=0.0", "--steps", "25,100", "--conditions", "2"]
  out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
  row = next(ln for ln in out.splitlines() if ln.startswith("| advantage.offset_coef=-0.5"))
  cells = [c.strip() for c in row.strip("|").split("|")]
  assert cells[1] == "6" and 0.01 < float(cells[2]) < 0.05  # n, mean Δ near the planted +0.03
  assert float(cells[4]) < 0.05  # the planted difference is significant
  plan = [ln for ln in out.splitlines() if ln.startswith("| 25 |") or ln.startswith("| 100 |")]
  seeds = [int(ln.split("|")[3]) for ln in plan]
  assert seeds[0] > seeds[1] > 0  # longer runs, fewer seeds in the same budget
  # 3 h / (30 s + 25 × 1.2 s) / 2 conditions = 90 seeds at 25 steps.
  assert seeds[0] == 90


def test_power_is_finite_where_scipys_lower_tail_is_not():
  # nct.cdf(−crit, 2, 7.48) is NaN in scipy; the lower tail there is ~0, so power = upper tail.
  df, nc = 2, 0.0864109559169077 * np.sqrt(3) / 0.02
  crit = stats.t.ppf(1 - 0.025 / 2, df)
  got = power.power_paired(3, 0.02, 0.0864109559169077, 0.025)
  np.testing.assert_allclose(got, stats.nct.sf(crit, df, nc), atol=1e-9)
  assert 0.7 < got < 0.9


def test_paired_test_of_equal_differences_is_not_significant():
  # Two seeds that both moved by the same 0.015 (pass@8 is discrete): no spread, no test.
  assert math.isnan(power.paired_test([0.015, 0.015 + 1e-17])["p"])
  assert power.paired_test([0.0, 0.0, 0.0])["p"] == 1.0
