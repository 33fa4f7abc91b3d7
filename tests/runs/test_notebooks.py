"""The notebooks run top to bottom (nbclient) on a tiny sweep's run directories and on the bias
script's output, and are stored without outputs; the HA-DW notebook also on run directories
whose held-out results have difficulty levels, and the results notebook's study section on a
made-up study split over two work directories (tests/runs/fake_study.py)."""

import importlib.util
import json
import os
import pathlib
import re

import nbformat
import pytest
from nbclient import NotebookClient

from grpo_jax.eval import benchmarks
from grpo_jax.runs import bias_simulation, sweep
from tests.runs import fake_study

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = ("results.ipynb", "hadw_diagnostics.ipynb", "bias.ipynb", "run_overview.ipynb")
ON_ONE_RUN = ("results.ipynb", "hadw_diagnostics.ipynb", "run_overview.ipynb")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebooks_are_stored_without_outputs(name):
  nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
  code = [c for c in nb.cells if c.cell_type == "code"]
  assert code and all(not c.outputs and c.execution_count is None for c in code)


def _script(name: str):
  """``experiments/<name>.py`` as a module."""
  spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / f"{name}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _bias_output(out: pathlib.Path) -> None:
  bias_simulation.run(str(out), samples=2_000)


def _text_outputs(cells) -> str:
  parts = []
  for cell in cells:
    for out in cell.get("outputs", []):
      parts.append(out.get("text", "") or str(out.get("data", {}).get("text/plain", "")))
  return "\n".join(parts)


def _execute(name: str):
  """``notebooks/<name>`` executed in the notebooks folder."""
  nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
  client = NotebookClient(
    nb,
    timeout=300,
    kernel_name="python3",
    resources={"metadata": {"path": str(ROOT / "notebooks")}},
  )
  client.execute()  # raises CellExecutionError on the first failing cell
  return nb


def _run_notebook(name: str) -> str:
  """Executes ``notebooks/<name>``; its text outputs."""
  return _text_outputs(_execute(name).cells)


def _run_with_levels(root: pathlib.Path, name: str, hadw: bool, gain: float) -> None:
  """A finished 3-step run directory as the loop leaves it: config.json, metrics.jsonl and the
  evaluation's files at steps 0 and 3 with pass@1 by level (level 1 unchanged, level 5 +gain)."""
  run = root / name
  run.mkdir(parents=True)
  config = {"hadw": {"enabled": hadw, "lambda_scale": 1.0}, "sampling": {"group_size": 4}}
  (run / "config.json").write_text(json.dumps({"config": config}))
  keys = ("batch_acc", "anchor", "phi_boosted_mean", "phi_damped_mean", "phi_min", "phi_max")
  rows = [{"step": s, **{f"hadw/{k}": 0.5 for k in keys}} for s in (1, 2, 3)]
  (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
  for step, p5 in ((0, 0.25), (3, 0.25 + gain)):
    by_level = {"1": {"pass@1": 0.75, "num_problems": 4}, "5": {"pass@1": p5, "num_problems": 4}}
    benchmarks.write_result(run, "math500", step, {"pass@1": 0.5, "by_level": by_level})
  (run / "results.json").write_text(json.dumps({"after": {"pass@1": 0.5}}))


@pytest.mark.slow
@pytest.mark.xdist_group("tiny_sweep")
def test_notebooks_run_on_a_tiny_sweep(tiny_sweep, tmp_path, monkeypatch):
  root, _ = tiny_sweep  # the four runs of configs/tiny_sweep.py (tests/plugin.py)
  runs = sweep.expand(str(ROOT / "configs/tiny_sweep.py"))
  assert [sweep.run_status(root / r.name) for r in runs] == ["done"] * 4
  _bias_output(tmp_path / "bias")
  monkeypatch.setenv("GRPO_SWEEP_DIR", str(root))
  monkeypatch.setenv("GRPO_RUN_DIR", str(root / runs[0].name))
  monkeypatch.setenv("GRPO_BIAS_DIR", str(tmp_path / "bias"))
  monkeypatch.setenv("GRPO_STUDY_DIRS", str(tmp_path / "no_study"))
  monkeypatch.setenv("MPLBACKEND", "Agg")
  texts = {name: _run_notebook(name) for name in NOTEBOOKS}
  assert "4 runs under" in texts["results.ipynb"] and "{'done': 4}" in texts["results.ipynb"]
  # The study section says that there is nothing to show, and shows nothing.
  no_study = f"no study runs under {tmp_path / 'no_study'}; run configs/study.py first"
  assert no_study in texts["results.ipynb"] and "H1:" not in texts["results.ipynb"]
  hadw = texts["hadw_diagnostics.ipynb"]
  assert "2 HA-DW runs, 2 without" in hadw
  # The per-level section found each run's eval/countdown_step0.json and _step3.json, and says
  # that countdown's problems have no levels.
  assert "4 (run, benchmark) pairs evaluated at step 0 and later; last steps [3]" in hadw
  assert "no levels in these problems" in hadw
  assert "beta.csv" in texts["bias.ipynb"]


@pytest.mark.slow
def test_notebooks_run_on_one_run_directory(tmp_path, monkeypatch):
  """The run-directory notebooks on one run as the quickstart leaves it (evaluated before and
  after RL, samples logged), pointed at the run itself rather than a sweep."""
  from grpo_jax.config import files as config_file
  from grpo_jax.train import modes

  run = tmp_path / "quickstart"
  cfg = config_file.load(str(ROOT / "configs/tiny_test.py"), ["logging.plot=false"])
  modes.train(cfg, run, log=lambda *_: None)
  monkeypatch.setenv("GRPO_SWEEP_DIR", str(run))
  monkeypatch.setenv("GRPO_RUN_DIR", str(run))
  monkeypatch.setenv("GRPO_STUDY_DIRS", str(tmp_path / "no_study"))
  monkeypatch.setenv("MPLBACKEND", "Agg")
  texts = {name: _run_notebook(name) for name in ON_ONE_RUN}
  assert "1 runs under" in texts["results.ipynb"]
  assert "0 HA-DW runs, 1 without" in texts["hadw_diagnostics.ipynb"]
  overview = texts["run_overview.ipynb"]
  assert f"{run}: 2 steps; task countdown" in overview
  assert "2 evaluations: {'countdown_step0':" in overview and "countdown_step2" in overview
  assert "completions of step 2" in overview and "before {'pass@1'" in overview


def test_hadw_notebook_shows_the_gain_per_level(tmp_path, monkeypatch):
  for name, hadw, gain in (("on_0", True, 0.5), ("on_1", True, 0.25), ("off_0", False, 0.0)):
    _run_with_levels(tmp_path, name, hadw, gain)
  monkeypatch.setenv("GRPO_SWEEP_DIR", str(tmp_path))
  monkeypatch.setenv("MPLBACKEND", "Agg")
  text = _run_notebook("hadw_diagnostics.ipynb")
  assert "3 (run, benchmark) pairs evaluated at step 0 and later; last steps [3]" in text
  assert "per-level gain in pass@1" in text and "no levels" not in text
  table = text[text.index("per-level gain in pass@1") :]
  # level 5: HA-DW runs gain (0.5 + 0.25) / 2 on average, the run without 0; level 1 nothing.
  assert "0.375" in table and "math500" in table


def test_results_notebook_shows_the_study(tmp_path, monkeypatch):
  """The study section on a made-up study (α = −0.5 above the anchor's pass@8 by 0.05 on each of
  6 seeds, split over two work directories): the runs, the primary table, verdicts that agree
  with experiments/study_report.py's on the same runs, and the three figures."""
  dirs = [
    fake_study.make(tmp_path / "study" / "seeds0", seeds=(0, 1, 2), effect=0.05),
    fake_study.make(tmp_path / "study" / "seeds3", seeds=(3, 4, 5), effect=0.05),
  ]
  bias = tmp_path / "bias.json"  # H4 supported: E[p̂ − p] above 0 below p = 1/2, below 0 above
  pooled = [
    {"bin": "[0, 0.5)", "seeds": 4, "mixed": 100, "bias": 0.05, "lo": 0.02, "hi": 0.08}
    | {"predicted": 0.06},
    {"bin": "[0.5, 1]", "seeds": 4, "mixed": 90, "bias": -0.04, "lo": -0.07, "hi": -0.01}
    | {"predicted": -0.05},
  ]
  bias.write_text(json.dumps({"pooled": pooled}))
  monkeypatch.setenv("GRPO_STUDY_DIRS", os.pathsep.join(str(d) for d in dirs))
  monkeypatch.setenv("GRPO_STUDY_BIAS", str(bias))
  monkeypatch.setenv("GRPO_SWEEP_DIR", str(dirs[0]))  # the earlier sections on one of them
  # The kernel's inline backend (not Agg), so that the figures come back as images.
  monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
  nb = _execute("results.ipynb")
  heading = "## The pre-registered study"
  start = next(i for i, c in enumerate(nb.cells) if c.source.startswith(heading))
  cells = [c for c in nb.cells[start:] if c.cell_type == "code"]
  text = _text_outputs(cells)
  assert "54 finished study runs" in text and "seeds [0, 1, 2, 3, 4, 5]" in text
  assert re.search(r"^H1a\s+alpha=-0\.5\s+anchor\s+after/pass@8\s+6\s", text, re.M), text
  assert re.search(r"^H1: supported \(", text, re.M) and "H4: supported" in text
  # The same verdicts as the report's, from the same runs and bias file.
  out = tmp_path / "report"
  args = [*map(str, dirs), "--out", str(out), "--bias", str(bias)]
  assert _script("study_report").main([*args, "--config", str(ROOT / "configs/study.py")]) == 0
  verdicts = json.loads((out / "tests.json").read_text())["verdicts"]
  assert verdicts["H1"] == "supported"
  for h, v in verdicts.items():
    assert re.search(f"^{re.escape(h)}: {re.escape(v)} \\(", text, re.M), (h, v)
  assert "paired Δ after-RL pass@1, grpo+hadw − grpo:" in text
  for plot in ("forest", "training_curves", "strata_bars"):
    (cell,) = [c for c in cells if f"study_plots.{plot}(" in c.source]
    assert any("image/png" in o.get("data", {}) for o in cell.outputs), plot
