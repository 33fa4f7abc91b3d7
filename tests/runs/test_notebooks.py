"""The notebooks run top to bottom (nbclient) on a tiny sweep's run directories and on the bias
script's output, and are stored without outputs; the HA-DW notebook also on run directories
whose held-out results have difficulty levels."""

import importlib.util
import json
import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

from grpo_jax.eval import benchmarks
from grpo_jax.runs import sweep

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = ("results.ipynb", "hadw_diagnostics.ipynb", "bias.ipynb")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebooks_are_stored_without_outputs(name):
  nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
  code = [c for c in nb.cells if c.cell_type == "code"]
  assert code and all(not c.outputs and c.execution_count is None for c in code)


def _bias_output(out: pathlib.Path) -> None:
  spec = importlib.util.spec_from_file_location("bias", ROOT / "experiments/bias_simulation.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  module.run(str(out), samples=2_000)


def _text_outputs(nb) -> str:
  parts = []
  for cell in nb.cells:
    for out in cell.get("outputs", []):
      parts.append(out.get("text", "") or str(out.get("data", {}).get("text/plain", "")))
  return "\n".join(parts)


def _run_notebook(name: str) -> str:
  """Executes ``notebooks/<name>`` in the notebooks folder; its text outputs."""
  nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
  client = NotebookClient(
    nb,
    timeout=300,
    kernel_name="python3",
    resources={"metadata": {"path": str(ROOT / "notebooks")}},
  )
  client.execute()  # raises CellExecutionError on the first failing cell
  return _text_outputs(nb)


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
  root, _ = tiny_sweep  # the four runs of configs/tiny_sweep.py (tests/conftest.py)
  runs = sweep.expand(str(ROOT / "configs/tiny_sweep.py"))
  assert [sweep.run_status(root / r.name) for r in runs] == ["done"] * 4
  _bias_output(tmp_path / "bias")
  monkeypatch.setenv("GRPO_SWEEP_DIR", str(root))
  monkeypatch.setenv("GRPO_BIAS_DIR", str(tmp_path / "bias"))
  monkeypatch.setenv("MPLBACKEND", "Agg")
  texts = {name: _run_notebook(name) for name in NOTEBOOKS}
  assert "4 runs under" in texts["results.ipynb"] and "{'done': 4}" in texts["results.ipynb"]
  hadw = texts["hadw_diagnostics.ipynb"]
  assert "2 HA-DW runs, 2 without" in hadw
  # The per-level section found each run's eval/countdown_step0.json and _step3.json, and says
  # that countdown's problems have no levels.
  assert "4 (run, benchmark) pairs evaluated at step 0 and later; last steps [3]" in hadw
  assert "no levels in these problems" in hadw
  assert "beta.csv" in texts["bias.ipynb"]


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
