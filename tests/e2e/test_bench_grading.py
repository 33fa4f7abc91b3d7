"""experiments/benchmarks/grading.py end to end on the 2-layer cut of the real checkpoint: every
workload graded at every pool size, the same rewards whatever the pool size, and the forced
workloads really reach the worker pool. No time is asserted."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def run_grading(args: list[str], out: pathlib.Path) -> dict:
  proc = subprocess.run(
    [sys.executable, "-m", "experiments.benchmarks.grading", *args, "--json", str(out)],
    cwd=ROOT,
    env={**os.environ, "JAX_PLATFORMS": "cpu"},
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(out.read_text())


def test_bench_grading_grades_every_workload_alike_at_every_pool_size(tmp_path, smollm2_2layer_dir):
  keep = tmp_path / "completions.jsonl"
  args = ["--hf_dir", str(smollm2_2layer_dir), "--completions", "24", "--rows_per_call", "8"]
  args += ["--max_new_tokens", "8", "--reps", "1", "--keep", str(keep)]
  report = run_grading([*args, "--workers", "1,2"], tmp_path / "sampled.json")
  assert len(keep.read_text().splitlines()) == 24
  assert report["completions"] == 24 and report["sampled_per_s"] > 0
  by_workload = {}
  for r in report["grading"]:
    by_workload.setdefault(r["workload"], []).append(r)
  assert sorted(by_workload) == ["as_sampled", "closed_form", "sympy"]
  for name, rows in by_workload.items():
    assert [r["workers"] for r in rows] == [1, 2]
    assert len({(r["accuracy"], r["verifier_calls"]) for r in rows}) == 1, name
    assert all(r["graded_per_s"] > 0 and r["timeouts"] == 0 for r in rows)
  # Every distinct (gold, answer) pair of the forced workloads goes through a worker.
  assert by_workload["closed_form"][0]["verifier_calls"] > 0
  assert by_workload["sympy"][0]["verifier_calls"] > 0
  # Regrading the kept completions samples nothing and grades them the same.
  again = run_grading([*args, "--workers", "2"], tmp_path / "kept.json")
  assert again["sampled_per_s"] == report["sampled_per_s"]
  assert [(r["workload"], r["accuracy"]) for r in again["grading"]] == [
    (r["workload"], r["accuracy"]) for r in report["grading"] if r["workers"] == 2
  ]
