"""The notebooks run top to bottom (nbclient) on a tiny sweep's run directories and on the bias
script's output, and are stored without outputs."""

import importlib.util
import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

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
  texts = {}
  for name in NOTEBOOKS:
    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    client = NotebookClient(
      nb,
      timeout=300,
      kernel_name="python3",
      resources={"metadata": {"path": str(ROOT / "notebooks")}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    texts[name] = _text_outputs(nb)
  assert "4 runs under" in texts["results.ipynb"] and "{'done': 4}" in texts["results.ipynb"]
  assert "2 HA-DW runs, 2 without" in texts["hadw_diagnostics.ipynb"]
  assert "beta.csv" in texts["bias.ipynb"]
