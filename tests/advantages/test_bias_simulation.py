"""Bias theory (METHODS §3 statements 11-12) and grpo_jax/runs/bias_simulation.py."""

from __future__ import annotations

import csv
import math
import os

import numpy as np
import pytest

from grpo_jax.runs import bias_simulation as bias


def test_11_closed_form_values_and_symmetry():
  assert round(float(bias.beta_closed(0.1, 8)), 4) == 0.0756
  assert round(float(bias.beta_closed(0.01, 8)), 4) == 0.1194
  for G in bias.GS:
    assert abs(float(bias.beta_closed(0.5, G))) < 1e-15
    p = np.linspace(0.01, 0.49, 25)
    np.testing.assert_allclose(bias.beta_closed(1 - p, G), -bias.beta_closed(p, G), atol=1e-14)
    assert np.all(bias.beta_closed(p, G) >= 0)
  assert float(bias.beta_closed(0.1, 128)) < 1e-4


def test_11_closed_form_matches_monte_carlo_and_bias_only_in_the_difference():
  rng = np.random.default_rng(1)
  for G, p in ((2, 0.2), (4, 0.1), (8, 0.25), (8, 0.9), (16, 0.05), (32, 0.03), (128, 0.005)):
    mc, se = bias.beta_mc(p, G, 200_000, rng)
    assert abs(mc - float(bias.beta_closed(p, G))) < 5 * se + 1e-6, (G, p)
  # E[Â_i | S] = 0 for every p, while E[Â_i − A_i | S] = −β (same r_i in both).
  G, p = 8, 0.1
  r = (rng.random((200_000, G)) < p).astype(np.float64)
  s = r.sum(1)
  r = r[(s >= 1) & (s <= G - 1)]
  adv_hat = r - r.mean(1, keepdims=True)
  assert abs(adv_hat.mean()) < 1e-12
  diff = (adv_hat - (r - p)).mean()
  assert abs(diff + float(bias.beta_closed(p, G))) < 2e-3


def test_12_paper_tables_to_three_decimals():
  assert round(bias.table_average(4, 0, 0.5, 50_000), 4) == 0.7770
  assert round(bias.table_average(6, 0, 0.5, 50_000), 4) == 0.6897
  assert round(bias.table_average(8, 0, 0.5, 50_000), 4) == 0.6409
  assert round(bias.table_average(6, 0, 0.25, 50_000), 4) == 0.8278
  assert round(bias.table_average(8, 0, 0.25, 50_000), 4) == 0.7811
  for table, lo_hi in ((bias.PAPER_TABLE4, lambda G: (0, 0.25)),
                       (bias.PAPER_TABLE5, lambda G: (0, 0.5)),
                       (bias.PAPER_TABLE6, lambda G: (0, min(2 / G, 1.0)))):  # fmt: skip
    for G, want in table.items():
      assert round(bias.table_average(G, *lo_hi(G), 50_000), 3) == round(want, 3), (G, want)


def test_hadw_gap_exact_matches_monte_carlo_and_hand_value():
  rng = np.random.default_rng(2)
  for p, lam, correct in ((0.1, 1.3, True), (0.8, 0.9, False), (0.3, 1.5, True)):
    exact, _ = bias.hadw_gap(p, 8, lam, 0.5, correct)
    mc = bias.hadw_gap_mc(p, 8, lam, 0.5, correct, 400_000, rng)
    assert abs(exact - mc) < 0.01, (p, lam, correct, exact, mc)
  # G = 2, p = 0.2, correct row: S forces R = 1, p̂ = ½ = C -> Φ = λ, Â = ½, A = 0.8.
  g, plain = bias.hadw_gap(0.2, 2, 1.3, 0.5, True)
  assert math.isclose(plain, 0.5 - 0.8) and math.isclose(g, 1.3 * 0.5 - 0.8)
  lo, hi, star = bias.lambda_range(0.2, 2, 0.5, True)
  assert math.isclose(star, 1.6) and math.isclose(lo, 1.0) and math.isclose(hi, 2.2)


def test_script_reduced_run_writes_outputs(tmp_path):
  res = bias.run(str(tmp_path), samples=20_000, ps=[0.1, 0.5, 0.9], lams=[0.8, 1.3])
  names = set(os.listdir(tmp_path))
  assert {"beta.csv", "tables.csv", "hadw_gap.csv", "hadw_lambda_ranges.csv"} <= names
  assert {"beta.png", "hadw_gap.png"} <= names
  assert all(row[-1] for row in res["tables"])
  with open(tmp_path / "beta.csv") as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == len(bias.GS) * 3
  for row in rows:  # closed form within Monte-Carlo error
    se = float(row["mc_se"])
    assert abs(float(row["beta_closed"]) - float(row["beta_mc"])) < 5 * se + 1e-6


@pytest.mark.parametrize("G", [4, 8])
def test_gap_is_linear_in_lambda(G):
  g1, _ = bias.hadw_gap(0.2, G, 1.0, 0.5, False)
  g2, _ = bias.hadw_gap(0.2, G, 2.0, 0.5, False)
  g3, _ = bias.hadw_gap(0.2, G, 3.0, 0.5, False)
  assert math.isclose(g3 - g2, g2 - g1, rel_tol=1e-9)
