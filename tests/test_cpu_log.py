"""``--cpu-log`` (``cpu_log.py``): a test's CPU time lands on it, its own or its children's."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import cpu_log

BURN = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
TESTS = f"""
import subprocess, sys

def test_in_process():
{textwrap.indent(BURN, "  ")}
def test_in_a_child():
  subprocess.run([sys.executable, "-c", {BURN!r}], check=True)

def test_idle():
  pass
"""


def test_each_test_s_cpu_time_is_its_own_or_its_children_s(tmp_path):
  (tmp_path / "test_burn.py").write_text(TESTS)
  log = tmp_path / "cpu.jsonl"
  log.write_text('{"test": "an earlier run::test", "cpu_s": 9, "children_cpu_s": 9}\n')
  env = dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).parent))
  cmd = [sys.executable, "-m", "pytest", "-q", "-p", "cpu_log", f"--cpu-log={log}", "test_burn.py"]
  cmd += ["-p", "no:xdist", "-p", "no:cacheprovider"]
  proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0, proc.stdout + proc.stderr
  rows = {r["test"].split("::")[1]: r for r in map(json.loads, log.read_text().splitlines())}
  assert set(rows) == {"test_in_process", "test_in_a_child", "test_idle"}  # the old run is gone
  own, child, idle = rows["test_in_process"], rows["test_in_a_child"], rows["test_idle"]
  assert own["cpu_s"] >= 0.25 and own["children_cpu_s"] == 0
  assert child["children_cpu_s"] >= 0.25 and child["cpu_s"] < 0.25
  assert idle["cpu_s"] + idle["children_cpu_s"] < 0.1 and idle["wall_s"] < 1
  assert all(r["maps"] > 0 for r in rows.values()) == os.path.exists("/proc/self/maps")
  assert f"CPU time per test file ({log})" in proc.stdout
  assert "3 tests:" in proc.stdout and "test_burn.py" in proc.stdout


def test_per_file_sums_and_orders_by_cpu():
  rows = [
    {"test": "a.py::x", "cpu_s": 1.0, "children_cpu_s": 0.5},
    {"test": "b.py::y", "cpu_s": 0.1, "children_cpu_s": 3.0},
    {"test": "a.py::z[1]", "cpu_s": 2.0, "children_cpu_s": 0.0},
  ]
  assert cpu_log.per_file(rows) == [("a.py", 2, 3.0, 0.5), ("b.py", 1, 0.1, 3.0)]
