"""The difficulty profile's rows, the band they select and the per-level table."""

import json

import numpy as np
import pytest

from grpo_jax.data import pass_rates


def test_informative_prob_hand_values():
  # 1 - p^G - (1-p)^G at G = 8.
  q = pass_rates.informative_prob(np.array([0.0, 0.5, 0.9, 0.99, 1.0]), 8)
  expected = [0.0, 1 - 2 * 0.5**8, 1 - 0.9**8 - 0.1**8, 1 - 0.99**8 - 0.01**8, 0.0]
  np.testing.assert_allclose(q, expected, atol=1e-12)
  assert q[3] == pytest.approx(0.0773, abs=1e-4)  # p = 0.99: 92% of groups all-equal


def test_profile_row_and_band():
  rows = [
    pass_rates.profile_row({"id": 7, "meta": {"level": 2}}, np.array([1, 0, 0, 1])),
    pass_rates.profile_row({"id": "b", "meta": {}}, np.array([0, 0, 0, 0])),
    pass_rates.profile_row({"id": "c", "meta": {"level": 1}}, np.array([1, 1, 1, 1])),
    pass_rates.profile_row({"id": "d", "meta": {"level": 2}}, np.array([1, 0, 0, 0])),
  ]
  assert rows[0] == {"id": "7", "n": 4, "correct": 2, "pass_rate": 0.5, "level": 2}
  assert "level" not in rows[1]
  assert pass_rates.band_ids(rows, (0.1, 0.9)) == {"7", "d"}
  assert pass_rates.band_ids(rows, (0.0, 0.25)) == {"b", "d"}
  counts = pass_rates.band_counts(rows, (0.3, 0.9))
  assert counts["2"] == {"kept": 1, "below": 1, "above": 0, "dropped": 1}
  assert counts["1"] == {"kept": 0, "below": 0, "above": 1, "dropped": 1}
  assert counts["all"] == {"kept": 1, "below": 2, "above": 1, "dropped": 3}
  assert list(counts)[-1] == "all"


def test_level_table_numbers():
  rows = [
    {"id": "a", "n": 4, "correct": 2, "pass_rate": 0.5, "level": 1},
    {"id": "b", "n": 4, "correct": 0, "pass_rate": 0.0, "level": 1},
    {"id": "c", "n": 4, "correct": 4, "pass_rate": 1.0, "level": 2},
  ]
  table = pass_rates.level_table(rows, 4, band=(0.1, 0.9)).splitlines()
  q = 1 - 2 * 0.5**4
  assert table[2] == f"| 1 | 2 | 0.250 | 0.50 | 0.00 | {q / 2:.3f} | 1 |"
  assert table[3] == "| 2 | 1 | 1.000 | 0.00 | 1.00 | 0.000 | 0 |"
  assert table[4].startswith("| all | 3 | 0.500 | 0.33 | 0.33 |")


def test_read_reports_bad_lines_and_drops_a_cut_last_line(tmp_path):
  good = {"id": "a", "n": 2, "correct": 1, "pass_rate": 0.5}
  path = tmp_path / "p.jsonl"
  path.write_text(json.dumps(good) + "\n" + '{"id": "b", "n"')  # killed mid-append
  assert pass_rates.read(path) == [good]
  path.write_text('{"id": "b", "n"\n' + json.dumps(good) + "\n")
  with pytest.raises(ValueError, match=r"p.jsonl:1: not a JSON line"):
    pass_rates.read(path)
  path.write_text(json.dumps({"id": "a", "n": 2}) + "\n")
  with pytest.raises(ValueError, match=r"p.jsonl:1: profile row lacks \['correct', 'pass_rate'\]"):
    pass_rates.read(path)
