"""experiments/study_report.py on a made-up study split over two work directories: the planted
effect (α = −0.5 above the anchor by 0.05 pass@8 on every seed) is found, significant after
Holm, and H1 is supported; without it H1 is not resolved. Tables, verdicts and figures."""

import importlib.util
import json
import pathlib
import shutil

import matplotlib.pyplot as plt
import pytest

from grpo_jax.config import files as config_file
from grpo_jax.runs import study
from tests.runs import fake_study

ROOT = pathlib.Path(__file__).resolve().parents[2]


def report_module():
  path = ROOT / "experiments/study_report.py"
  spec = importlib.util.spec_from_file_location("study_report", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def run_report(tmp_path, effect):
  a = fake_study.make(tmp_path / f"e{effect}" / "seeds0", seeds=(0, 1, 2), effect=effect)
  b = fake_study.make(tmp_path / f"e{effect}" / "seeds3", seeds=(3, 4, 5), effect=effect)
  bias = tmp_path / "bias.json"
  pooled = [
    {"bin": "[0, 0.5)", "seeds": 4, "mixed": 100, "bias": 0.05, "lo": 0.02, "hi": 0.08}
    | {"predicted": 0.06},
    {"bin": "[0.5, 1]", "seeds": 4, "mixed": 90, "bias": -0.04, "lo": -0.07, "hi": -0.01}
    | {"predicted": -0.05},
  ]
  bias.write_text(json.dumps({"pooled": pooled}))
  out = tmp_path / f"report{effect}"
  args = [str(a), str(b), "--out", str(out), "--bias", str(bias)]
  assert report_module().main(args + ["--config", str(ROOT / "configs/study.py")]) == 0
  return out, json.loads((out / "tests.json").read_text())


def test_planted_effect_is_found_and_judged(tmp_path):
  out, record = run_report(tmp_path, 0.05)
  tests = {t["id"]: t for t in record["tests"]}
  assert tests["H1a"]["n"] == 6 and tests["H1a"]["seeds"] == [0, 1, 2, 3, 4, 5]
  assert tests["H1a"]["mean"] == pytest.approx(0.05, abs=0.005)
  assert tests["H1a"]["p_holm"] < 0.05 and record["verdicts"]["H1"] == "supported"
  assert tests["H2a"]["mean"] < 0 and tests["H2a"]["p_holm"] < 0.05
  assert record["verdicts"]["H4"] == "supported"
  text = (out / "report.md").read_text()
  assert "seeds [0, 1, 2, 3, 4, 5]" in text and "- **H1**: supported (H1a Δ +" in text
  assert "| alpha=-0.5 − anchor |" in text  # the strata's paired table
  for fig in ("forest.png", "curves.png", "strata.png"):
    assert (out / fig).stat().st_size > 10_000
  runs = (out / "runs.csv").read_text().splitlines()
  assert len(runs) == 1 + 9 * 6 and runs[0].startswith("condition,seed,status")
  # H2'' (scramble − α = −0.5) and H5a, H5b (shrunk − α = −0.5, − anchor) are in the family of
  # eight; H2' is reported outside it.
  ids = ["H1a", "H1b", "H2a", "H2b", "H2''", "H3", "H5a", "H5b"]
  assert [t["id"] for t in record["tests"]] == ids
  assert tests["H5a"]["mean"] == pytest.approx(-0.05, abs=0.005) and tests["H5a"]["n"] == 6
  assert tests["H2''"]["n"] == 6 and tests["H2''"]["mean"] == pytest.approx(-0.05, abs=0.005)
  assert [t["id"] for t in record["withdrawn"]] == ["H2'"] and "p_holm" not in record["withdrawn"][
    0
  ]
  assert "## Withdrawn comparisons" in text and "| H2' | shuffle − noise |" in text


def test_without_the_effect_h1_is_not_supported(tmp_path):
  root = fake_study.make(tmp_path / "seeds0", seeds=range(6), effect=0.0)
  rows = study.collect([root], fake_study.conditions(), absent=fake_study.added_keys())
  assert len(rows) == 9 * 6  # runs without the key added with the shrunk arm are labelled too
  primary, hypotheses, _ = study.family(config_file.load_module(str(ROOT / "configs/study.py")))
  tests = study.primary_tests(rows, primary)
  assert abs(tests[0]["mean"]) < 0.005
  assert study.verdict(tests, "H1", hypotheses) == study.UNRESOLVED


def test_a_config_with_its_own_family(tmp_path):
  """configs/smollm2_study.py names its comparisons (pass@4), hypotheses and strata pair."""
  config = "configs/smollm2_study.py"
  root = fake_study.make(tmp_path / "arm", range(5), 0.05, config, better="alpha=-0.5", k=4)
  out = tmp_path / "report"
  argv = [str(root), "--out", str(out), "--config", str(ROOT / config)]
  assert report_module().main(argv) == 0
  record = json.loads((out / "tests.json").read_text())
  tests = {t["id"]: t for t in record["tests"]}
  assert set(tests) == {"R1", "R2"} and tests["R1"]["metric"] == "after/pass@4"
  assert tests["R1"]["mean"] == pytest.approx(0.05, abs=0.005) and tests["R1"]["n"] == 5
  assert record["verdicts"]["H1"] == "supported" and record["verdicts"]["H3"] != "supported"
  assert "| anchor+hadw − anchor |" in (out / "report.md").read_text()


def test_the_signal_arm_reports_its_contrasts(tmp_path):
  """configs/smollm2_signal.py: its family P1-P4 and the registered contrasts E1a (the file's
  strategies' between-share above its null: planted) and E1b (self-written previews' not)."""
  config = "configs/smollm2_signal.py"
  root = fake_study.make(tmp_path / "arm", range(3), 0.05, config, better="file/shrunk", k=4)
  out = tmp_path / "report"
  argv = [str(root), "--out", str(out), "--config", str(ROOT / config), "--last_k", "20"]
  assert report_module().main(argv) == 0
  record = json.loads((out / "tests.json").read_text())
  assert [t["id"] for t in record["tests"]] == ["P1", "P2", "P3", "P4"]
  e1 = {t["id"]: t for t in record["contrasts"]}
  assert e1["E1a"]["n"] == 3 and e1["E1a"]["mean"] == pytest.approx(0.3, abs=0.03)
  assert e1["E1a"]["holds"] and e1["E1a"]["lo"] > 0
  assert abs(e1["E1b"]["mean"]) < 0.03 and e1["E1b"]["holds"]
  text = (out / "report.md").read_text()
  assert "## Registered contrasts of the training metrics" in text and "| E1a |" in text
  assert "final/strategy/offset_reliability" in text
  # No bias hypothesis is registered for this arm: no H4 verdict, no H4 section.
  assert "H4" not in record["verdicts"] and "H4" not in text
  # The curves are the config's: the between-share (its null beside it) per condition and step.
  share = record["curves"]["strategy/between_share"]
  assert set(record["curves"]) >= {"strategy/between_share_null", "adv/zero_std_frac"}
  assert "hadw/anchor" not in record["curves"]
  assert len(share["file/anchor"]["step"]) == fake_study.STEPS
  null = record["curves"]["strategy/between_share_null"]["file/anchor"]["mean"]
  assert share["file/anchor"]["mean"][0] == pytest.approx(null[0] + 0.3, abs=0.05)
  with pytest.raises(ValueError, match="names no BIAS"):
    report_module().main(argv + ["--bias", str(tmp_path / "bias.json")])


def test_a_prior_report_stands_in_for_runs_that_are_gone(tmp_path):
  """--prior: a condition added after the earlier run directories are gone (scramble), run beside
  a rerun of alpha=-0.5, gives the report of the whole study; a rerun that does not reproduce
  its earlier row, or no rerun at all, is refused."""
  full = fake_study.make(tmp_path / "full", seeds=range(5), effect=0.05)
  config = ["--config", str(ROOT / "configs/study.py")]
  main = report_module().main
  assert main([str(full), "--out", str(tmp_path / "all"), *config]) == 0
  new = tmp_path / "new"
  new.mkdir()
  for run in list(full.iterdir()):
    if "magnitude_scramble" in run.name:
      run.rename(new / run.name)
    elif "offset_coef=-0.5" in run.name and "offset_control=none" in run.name:
      if "offset_strength" in run.name:  # shrunk: in the prior only
        continue
      shutil.copytree(run, new / run.name)
  assert main([str(full), "--out", str(tmp_path / "first"), *config]) == 0
  argv = [str(new), "--out", str(tmp_path / "merged"), "--prior", str(tmp_path / "first")]
  assert main(argv + config) == 0
  whole = json.loads((tmp_path / "all" / "tests.json").read_text())
  merged = json.loads((tmp_path / "merged" / "tests.json").read_text())
  for a, b in zip(whole["tests"], merged["tests"], strict=True):
    assert (a["id"], a["n"]) == (b["id"], b["n"]) and a["mean"] == pytest.approx(b["mean"])
    assert a["p_holm"] == pytest.approx(b["p_holm"])
  key = lambda s: (s["condition"], s["seed"], s["stratum"])
  assert sorted(map(key, merged["strata"])) == sorted(map(key, whole["strata"]))
  assert set(merged["curves"]["reward/mean"]) == set(fake_study.conditions())
  text = (tmp_path / "merged" / "report.md").read_text()
  assert "35 runs are read from the prior report" in text and "; 5 runs here rerun" in text
  # A rerun that differs from its earlier row breaks the pairing.
  rerun = next(p for p in new.iterdir() if "magnitude_scramble" not in p.name)
  results = json.loads((rerun / "results.json").read_text())
  results["after"]["pass@8"] += 0.01
  (rerun / "results.json").write_text(json.dumps(results))
  with pytest.raises(ValueError, match="after/pass@8 is .* not reproduced"):
    main(argv + config)
  for p in new.iterdir():
    if "magnitude_scramble" not in p.name:
      shutil.rmtree(p)
  with pytest.raises(ValueError, match="no run here reruns one of the prior report's"):
    main(argv + config)


def test_runs_recorded_under_the_replaced_keys_give_the_same_report(tmp_path):
  """A study recorded before advantage.offset_control (its three booleans in the runs' names and
  sweep_run.json, the scramble's on its own runs only) is labelled and tested as today's."""
  config = ["--config", str(ROOT / "configs/study.py")]
  record = {}
  for recorded in (False, True):
    root = fake_study.make(tmp_path / f"runs{recorded}", seeds=range(4), recorded=recorded)
    out = tmp_path / f"report{recorded}"
    assert report_module().main([str(root), "--out", str(out), *config]) == 0
    plt.close("all")  # two reports' figures in one process
    record[recorded] = json.loads((out / "tests.json").read_text())
  names = [p.name for p in (tmp_path / "runsTrue").iterdir()]
  assert sum("advantage.offset_shuffle=true" in n for n in names) == 4
  assert not any("offset_control" in n for n in names)
  assert len(record[True]["tests"]) == 8 and record[True]["tests"] == record[False]["tests"]
  assert record[True]["verdicts"] == record[False]["verdicts"]
