"""Rules of the repository that review alone did not hold: the front page and the performance
page stay short, the scripts under experiments/ import the installed package (no ``sys.path``
edits, nothing from tests/), and the library never imports torch. Each checker is shown to
flag a planted violation."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
MAX_LINES = {"README.md": 120, "docs/performance.md": 150}
SCRIPT_RULES = {
  "a sys.path edit": re.compile(r"^\s*sys\.path\.(insert|append)\(", re.M),
  "an import from tests/": re.compile(r"^\s*(import|from) (real_model|fake_study|tests)\b", re.M),
}
TORCH = re.compile(r"^\s*(import torch|from torch\b)", re.M)


def too_long(root: pathlib.Path) -> list[str]:
  out = []
  for name, limit in MAX_LINES.items():
    lines = len((root / name).read_text().splitlines())
    if lines > limit:
      out.append(f"{name}: {lines} lines > {limit}")
  return out


def script_violations(files) -> list[str]:
  return [
    f"{f.name}: {what}"
    for f in files
    for what, rx in SCRIPT_RULES.items()
    if rx.search(f.read_text())
  ]


def torch_imports(files) -> list[str]:
  return [str(f) for f in files if TORCH.search(f.read_text())]


def test_front_page_and_performance_page_are_short():
  assert too_long(ROOT) == []


def test_scripts_import_the_installed_package():
  assert script_violations(sorted((ROOT / "experiments").glob("*.py"))) == []


def test_the_library_never_imports_torch():
  assert torch_imports(sorted((ROOT / "grpo_jax").rglob("*.py"))) == []


@pytest.mark.parametrize(
  ("text", "flagged"),
  [
    ("import sys\nsys.path.insert(0, 'x')\n", ["s.py: a sys.path edit"]),
    ("def f():\n  import real_model\n", ["s.py: an import from tests/"]),
    ("'''sys.path.insert(0, x) in prose'''\nimport json\n", []),
  ],
)
def test_checkers_flag_planted_violations(tmp_path, text, flagged):
  (tmp_path / "s.py").write_text(text)
  assert script_violations([tmp_path / "s.py"]) == flagged
  (tmp_path / "t.py").write_text("def f():\n  import torch\n")
  assert torch_imports([tmp_path / "t.py"]) == [str(tmp_path / "t.py")]
  (tmp_path / "README.md").write_text("x\n" * 121)
  (tmp_path / "docs").mkdir()
  (tmp_path / "docs/performance.md").write_text("x\n" * 150)
  assert too_long(tmp_path) == ["README.md: 121 lines > 120"]
