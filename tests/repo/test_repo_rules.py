"""Rules of the repository that review alone did not hold: the front page, the performance
page and the launcher and analysis scripts at the top of experiments/ (their logic lives in the
library) stay short, the scripts under experiments/ import the installed package (no ``sys.path``
edits, nothing from tests/), the library never imports torch (but for the vLLM engine), and
every page the code and docs cite is in the repository, and the tests tree mirrors the package.
Each checker is shown to flag a planted violation."""

import collections
import os
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAX_LINES = {"README.md": 120, "docs/performance.md": 150}
SCRIPT_MAX_LINES = 60  # each experiments/*.py: flags parsed, the library called
SCRIPT_RULES = {
  "a sys.path edit": re.compile(r"^\s*sys\.path\.(insert|append)\(", re.M),
  "an import from tests/": re.compile(r"^\s*(import|from) (real_model|fake_study|tests)\b", re.M),
}
TORCH = re.compile(r"^\s*(import torch|from torch\b)", re.M)
# A page the code or docs cite by path (docs/x.md, configs/x.py, tests/..., examples/...), and
# a citation of material that lives outside the repository.
CITED = re.compile(
  r"\b((?:docs|configs|examples|notebooks|experiments|tests)/[\w./-]*\w\.(?:md|py|ipynb|jsonl))"
)
OUTSIDE = re.compile(r"\.\./shared|\bshared/(?:research|seeds|design)|\bseed `?00\d|\bSTYLE\.md")
CITING = ("grpo_jax", "tests", "experiments", "configs", "docs", "examples", "README.md")


def citing_files(root: pathlib.Path) -> list[pathlib.Path]:
  files = []
  for name in CITING:
    path = root / name
    files += [path] if path.is_file() else sorted(path.rglob("*.py")) + sorted(path.rglob("*.md"))
  return files


def broken_citations(root: pathlib.Path) -> list[str]:
  """``file: cited path`` for each cited path that does not exist, and ``file: outside`` for
  a citation of material outside the repository."""
  out = []
  for f in citing_files(root):
    if f.name == pathlib.Path(__file__).name:  # this file plants violations
      continue
    text = f.read_text()
    name = f.relative_to(root)
    out += [f"{name}: {c}" for c in sorted(set(CITED.findall(text))) if not (root / c).exists()]
    out += [f"{name}: {m.group(0)}" for m in OUTSIDE.finditer(text)]
  return out


def too_long(root: pathlib.Path) -> list[str]:
  out = []
  scripts = {
    p.relative_to(root).as_posix(): SCRIPT_MAX_LINES for p in root.glob("experiments/*.py")
  }
  for name, limit in {**MAX_LINES, **scripts}.items():
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


def test_front_page_performance_page_and_scripts_are_short():
  assert too_long(ROOT) == []


def test_every_cited_page_is_in_the_repository():
  assert broken_citations(ROOT) == []


# The tests tree mirrors the package: one folder per grpo_jax package, plus end-to-end runs, the
# shared helpers and these rules; the root holds the conftest and the suite's plugin. pytest
# imports a test file by its basename, so two files of one name collide.
TEST_FOLDERS = {"e2e", "support", "repo"}
TESTS_ROOT = {"conftest.py", "plugin.py"}


def tree_problems(tests: pathlib.Path, packages: set[str]) -> list[str]:
  out = [
    f"tests/{p.name}: at the root" for p in sorted(tests.glob("*.py")) if p.name not in TESTS_ROOT
  ]
  folders = sorted(p.name for p in tests.iterdir() if p.is_dir() and p.name[0] not in "._")
  out += [f"tests/{f}/: no such package" for f in folders if f not in packages | TEST_FOLDERS]
  names = collections.Counter(p.name for p in tests.rglob("test_*.py"))
  return out + [f"{name}: {n} files" for name, n in sorted(names.items()) if n > 1]


def test_the_tests_tree_mirrors_the_package():
  packages = {p.parent.name for p in (ROOT / "grpo_jax").glob("*/__init__.py")}
  assert tree_problems(ROOT / "tests", packages) == []


def test_the_tests_tree_checker_flags_strays(tmp_path):
  for path in ("conftest.py", "helper.py", "train/test_a.py", "e2e/test_a.py", "misc/test_b.py"):
    (tmp_path / path).parent.mkdir(exist_ok=True)
    (tmp_path / path).write_text("")
  assert tree_problems(tmp_path, {"train"}) == [
    "tests/helper.py: at the root",
    "tests/misc/: no such package",
    "test_a.py: 2 files",
  ]


def test_scripts_import_the_installed_package():
  assert script_violations(sorted((ROOT / "experiments").rglob("*.py"))) == []


# vLLM is a torch program: its engine hands it torch tensors (the optional .[vllm] extra).
TORCH_ALLOWED = {ROOT / "grpo_jax/sampling/vllm_engine.py"}


def test_the_library_never_imports_torch():
  files = sorted(set((ROOT / "grpo_jax").rglob("*.py")) - TORCH_ALLOWED)
  assert torch_imports(files) == []
  assert all(f.is_file() for f in TORCH_ALLOWED)


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
  (tmp_path / "experiments").mkdir()
  (tmp_path / "experiments/short.py").write_text("x = 1\n" * 60)
  (tmp_path / "experiments/long.py").write_text("x = 1\n" * 61)
  assert too_long(tmp_path) == ["README.md: 121 lines > 120", "experiments/long.py: 61 lines > 60"]


def test_the_citation_checker_flags_a_missing_page_and_an_outside_one(tmp_path):
  (tmp_path / "docs").mkdir()
  (tmp_path / "docs/here.md").write_text("see docs/here.md and configs/gone.py\n")
  (tmp_path / "README.md").write_text("as in seed 000 (../shared/seeds/)\n")
  assert broken_citations(tmp_path) == [
    "docs/here.md: configs/gone.py",
    "README.md: seed 000",
    "README.md: ../shared",
  ]


@pytest.mark.xdist_group("loadgroup_check")
def test_xdist_groups_stay_on_one_worker(request):
  """Under xdist, --dist=loadgroup (pyproject addopts) keeps a group's tests on one worker and
  marks their ids with the group; pytest 9.2 with pytest-xdist 3.8 dropped it silently, so the
  real-model tier's tests were split and one worker waited on the other's fixture."""
  if not os.environ.get("PYTEST_XDIST_WORKER"):
    pytest.skip("single-process run")
  assert request.node.nodeid.endswith("@loadgroup_check"), request.node.nodeid
