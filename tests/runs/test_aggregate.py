"""Aggregation of run directories against hand-computed values: last-k means, eval CIs, the
t interval over seeds, paired differences, failed runs, CSV / Markdown and the CLI."""

import csv
import importlib.util
import io
import json
import math
import pathlib

import numpy as np
import pytest

from grpo_jax.eval import benchmarks
from grpo_jax.runs import aggregate, aggregate_report

ROOT = pathlib.Path(__file__).resolve().parents[2]
T975_DF2 = 4.302652729911275  # Student t quantile 0.975 with 2 degrees of freedom


def make_run(root, name, overrides, rewards, after=None, error=None):
  run = root / name
  run.mkdir(parents=True)
  (run / "config.json").write_text("{}")
  (run / "sweep_run.json").write_text(json.dumps({"name": name, "overrides": overrides}))
  lines = [
    json.dumps({"step": i + 1, "reward/mean": r, "hadw/anchor": 0.5}) for i, r in enumerate(rewards)
  ]
  (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
  # What the evaluation writes at step 0: eval/countdown_step0.json (results.json, written at
  # the end, holds only "after" here, so the before/ columns must come from that file).
  benchmarks.write_result(run, "countdown", 0, {"pass@1": 0.05, "pass@1_ci": [0.0, 0.1]})
  if after is not None:
    results = {
      "after": {"pass@1": after, "pass@1_ci": [after - 0.05, after + 0.05], "num_problems": 200}
    }
    (run / "results.json").write_text(json.dumps(results))
  if error:
    (run / "error.txt").write_text(error)
  return run


@pytest.fixture
def sweep_dir(tmp_path):
  root = tmp_path / "sweep"
  ref = {0: 0.1, 1: 0.1, 2: 0.2}
  cond = {0: 0.2, 1: 0.3, 2: 0.3}
  for seed in (0, 1, 2):
    make_run(
      root,
      f"seed={seed},a=0.0",
      {"seed": seed, "a": 0.0},
      [0.1, 0.2, 0.3, 0.4, 0.5],
      after=ref[seed],
    )
    make_run(root, f"seed={seed},a=-0.5", {"seed": seed, "a": -0.5}, [0.0] * 4, after=cond[seed])
  make_run(root, "seed=3,a=-0.5", {"seed": 3, "a": -0.5}, [0.0], error="Traceback ...")
  return root


def test_load_run_reads_last_k_means_and_eval_intervals(sweep_dir):
  row = aggregate.load_run(sweep_dir / "seed=0,a=0.0", last_k=3)
  assert row["status"] == "done" and row["steps"] == 5 and row["seed"] == 0 and row["a"] == 0.0
  assert row["final/reward/mean"] == pytest.approx((0.3 + 0.4 + 0.5) / 3)
  assert row["final/hadw/anchor"] == pytest.approx(0.5)
  assert (row["after/pass@1"], row["after/pass@1_lo"], row["after/pass@1_hi"]) == pytest.approx(
    (0.1, 0.05, 0.15)
  )
  assert (row["before/pass@1"], row["before/pass@1_lo"]) == (0.05, 0.0)
  failed = aggregate.load_run(sweep_dir / "seed=3,a=-0.5")
  assert failed["status"] == "failed" and "after/pass@1" not in failed


def test_an_unfinished_run_reads_the_evaluation_files_of_its_first_benchmark(tmp_path):
  run = make_run(tmp_path, "partial", {"seed": 0}, [0.1])
  config = {"config": {"data": {"eval_sets": ["math500", "aime24"]}}}
  (run / "config.json").write_text(json.dumps(config))
  for name, shift in (("aime24", 0.5), ("math500", 0.0)):
    for step in (0, 2, 10):  # step 10 is the latest, though "step10" sorts before "step2"
      result = {"pass@1": shift + step / 100, "pass@1_ci": [step / 200, step / 50]}
      benchmarks.write_result(run, name, step, result)
  row = aggregate.load_run(run)
  assert row["status"] == "partial" and "before/step" not in row
  assert (row["before/pass@1"], row["before/pass@1_hi"]) == (0.0, 0.0)
  assert (row["after/pass@1"], row["after/pass@1_lo"]) == pytest.approx((0.1, 0.05))


def test_the_primary_benchmark_is_the_first_evaluation_set_with_results():
  names = ["aime24_T0.6", "math500_T0.6", "math_T0.6"]
  assert aggregate.primary_benchmark(names, ["math", "aime24"]) == "math_T0.6"
  assert aggregate.primary_benchmark(names, ["gsm8k", "aime24"]) == "aime24_T0.6"
  assert aggregate.primary_benchmark(["countdown"], ["aime24"]) == "countdown"
  assert aggregate.primary_benchmark([], ["aime24"]) is None


def test_t_interval_matches_the_hand_computed_student_interval():
  mean, lo, hi = aggregate.t_interval([0.1, 0.2, 0.3])
  half = T975_DF2 * 0.1 / math.sqrt(3)
  assert (mean, lo, hi) == pytest.approx((0.2, 0.2 - half, 0.2 + half))
  assert math.isnan(aggregate.t_interval([0.4])[1]) and aggregate.t_interval([0.4])[0] == 0.4
  assert math.isnan(aggregate.t_interval([])[0])


def test_over_seeds_groups_by_overrides_and_pairs_with_the_reference(sweep_dir):
  rows = aggregate.collect(sweep_dir, last_k=3)
  assert len(rows) == 7
  seeds = aggregate.over_seeds(rows, ["after/pass@1"], reference={"a": 0.0})
  by_a = {s["a"]: s for s in seeds}
  assert set(by_a) == {0.0, -0.5}
  cond = by_a[-0.5]
  assert cond["n"] == 3 and cond["seeds"] == "0 1 2"  # the failed seed-3 run is left out
  x = np.array([0.2, 0.3, 0.3])
  half = T975_DF2 * x.std(ddof=1) / math.sqrt(3)
  assert (cond["after/pass@1"], cond["after/pass@1_lo"], cond["after/pass@1_hi"]) == pytest.approx(
    (x.mean(), x.mean() - half, x.mean() + half)
  )
  d = np.array([0.1, 0.2, 0.1])
  half = T975_DF2 * d.std(ddof=1) / math.sqrt(3)
  assert (cond["delta/after/pass@1"], cond["delta/after/pass@1_lo"]) == pytest.approx(
    (d.mean(), d.mean() - half)
  )
  assert by_a[0.0]["delta/after/pass@1"] == pytest.approx(0.0)


def test_paired_difference_uses_only_seeds_both_conditions_finished(sweep_dir):
  rows = aggregate.collect(sweep_dir)
  d = aggregate.paired_difference(rows, {"a": -0.5}, {"a": 0.0}, "after/pass@1")
  assert d["n"] == 3 and d["deltas"] == pytest.approx([0.1, 0.2, 0.1])
  assert d["mean"] == pytest.approx(0.4 / 3)
  rows = [r for r in rows if not (r.get("seed") == 1 and r.get("a") == 0.0)]
  assert aggregate.paired_difference(rows, {"a": -0.5}, {"a": 0.0}, "after/pass@1")["n"] == 2


def test_csv_and_markdown_hold_every_row(sweep_dir):
  rows = aggregate.collect(sweep_dir)
  parsed = list(csv.DictReader(io.StringIO(aggregate.to_csv(rows))))
  assert len(parsed) == 7 and {"seed", "a", "status", "after/pass@1_lo"} <= set(parsed[0])
  md = aggregate.to_markdown(rows, ["after/pass@1"], extra=("status",))
  assert md.splitlines()[0] == "| seed | a | status | after/pass@1 |"
  assert "| 0 | 0.0 | done | 0.100 [0.050, 0.150] |" in md
  assert "| 3 | -0.5 | failed | – |" in md


def test_collect_follows_the_sweep_order(sweep_dir):
  names = ["seed=2,a=-0.5", "seed=0,a=0.0"]
  (sweep_dir / "sweep.json").write_text(json.dumps({"runs": [{"name": n} for n in names]}))
  assert [r["name"] for r in aggregate.collect(sweep_dir)][:2] == names


def test_cli_writes_csv_and_markdown(sweep_dir, tmp_path, capsys):
  spec = importlib.util.spec_from_file_location("aggregate_cli", ROOT / "experiments/aggregate.py")
  cli = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(cli)
  out = tmp_path / "table"
  argv = [str(sweep_dir), "--out", str(out), "--last_k", "2", "--reference", "a=0.0"]
  argv += ["--metrics", "after/pass@1", "--pair", "a=-0.5:a=0.0"]
  assert cli.main(argv) == 0
  assert len(list(csv.DictReader(out.with_name("table.csv").open()))) == 7
  seeds = list(csv.DictReader(out.with_name("table_seeds.csv").open()))
  assert {s["a"] for s in seeds} == {"0.0", "-0.5"}
  md = out.with_name("table_table.md").read_text()
  assert "delta/after/pass@1" in md and md.strip() in capsys.readouterr().out
  assert "| a=-0.5 | a=0.0 | 3 | +0.133 [" in md
  parsed = aggregate_report.parse_reference("a.b=0.0,c=false,d=window")
  assert parsed == {"a.b": 0.0, "c": False, "d": "window"}
