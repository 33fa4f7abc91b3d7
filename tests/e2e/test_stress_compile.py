"""``tests/e2e/stress_compile.py`` counts the workers that die: a planted test that kills its
own worker with SIGSEGV is counted with its fatal-error line; a passing selection is not."""

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

PLANTED = """
import os
import signal


def test_dies():
  os.kill(os.getpid(), signal.SIGSEGV)


def test_lives():
  assert True
"""


def _stress(select, out):
  cmd = [sys.executable, "tests/e2e/stress_compile.py", "--select", str(select)]
  cmd += ["--runs", "1", "--workers", "1", "--out", str(out)]
  proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  return [json.loads(x) for x in out.read_text().splitlines()][-1], proc.stdout


def test_a_dying_worker_is_counted_and_a_passing_run_is_not(tmp_path):
  planted = tmp_path / "test_planted.py"
  planted.write_text(PLANTED)
  row, stdout = _stress(planted, tmp_path / "crash.jsonl")
  assert row["crashes"] and row["passed"] == 1, row
  assert row["fatal"] == ["Fatal Python error: Segmentation fault"], row
  assert "1 of 1 runs had a worker die" in stdout
  (tmp_path / "test_fine.py").write_text("def test_fine():\n  assert True\n")
  row, stdout = _stress(tmp_path / "test_fine.py", tmp_path / "fine.jsonl")
  assert (row["rc"], row["passed"], row["crashes"], row["fatal"]) == (0, 1, [], []), row
  assert "0 of 1 runs had a worker die" in stdout
