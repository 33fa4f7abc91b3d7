"""Runs a test selection again and again in fresh pytest-xdist workers and counts the workers that
die, by signal: the reproducer for a worker crash (``pyproject.toml``'s rerun guard).

  python tests/e2e/stress_compile.py --select tests/train/test_update_width.py --runs 10

Each run is ``python -m pytest -q -n WORKERS --reruns 0`` with the suite's compilation cache off
(``GRPO_SUITE_XLA_CACHE=0``), so every program is compiled again. ``--address_space_gib`` caps
each worker's virtual memory (``RLIMIT_AS``), to see how a compile fails short of memory;
``--preload torch`` imports torch into every worker before the tests, as the suite's parity
tests do. Writes one JSON line per run to ``--out`` (the return code, passed and failed counts,
the crashed tests and the fatal-error lines of the workers).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import resource
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRASH = re.compile(r"(node down|crashed while running|worker '\w+' crashed)")
FATAL = re.compile(r"^Fatal Python error: .*$", re.M)
COUNTS = re.compile(r"(\d+) (passed|failed|error)")


def parse(output: str) -> dict:
  """The summary of one pytest run's output."""
  counts = {kind: int(n) for n, kind in COUNTS.findall(output)}
  return {
    "passed": counts.get("passed", 0),
    "failed": counts.get("failed", 0) + counts.get("error", 0),
    "crashes": [line.strip() for line in output.splitlines() if CRASH.search(line)],
    "fatal": FATAL.findall(output),
  }


def one_run(args) -> dict:
  env = dict(os.environ, GRPO_SUITE_XLA_CACHE="0", PYTHONFAULTHANDLER="1")
  env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
  cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--reruns", "0"]
  cmd += ["-n", str(args.workers), *args.select]
  if args.preload:
    cmd += ["-p", "stress_preload"]
    env["STRESS_PRELOAD"] = args.preload
    env["PYTHONPATH"] += os.pathsep + str(pathlib.Path(__file__).parent)

  def limit():
    if args.address_space_gib:
      size = int(args.address_space_gib * 2**30)
      resource.setrlimit(resource.RLIMIT_AS, (size, size))

  t0 = time.perf_counter()
  proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, preexec_fn=limit)
  result = parse(proc.stdout + proc.stderr)
  return {"rc": proc.returncode, "seconds": round(time.perf_counter() - t0, 1), **result}


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--select", nargs="+", default=["tests/train/test_update_width.py"])
  p.add_argument("--runs", type=int, default=10)
  p.add_argument("--workers", type=int, default=2)
  p.add_argument("--address_space_gib", type=float, default=0.0, help="RLIMIT_AS; 0 = none")
  p.add_argument("--preload", default="", help="a module every worker imports first (torch)")
  p.add_argument("--out", type=pathlib.Path, default=pathlib.Path("stress_compile.jsonl"))
  args = p.parse_args(argv)
  crashed = 0
  with args.out.open("a") as f:
    for i in range(args.runs):
      row = {"run": i, **vars(args), "out": str(args.out), **one_run(args)}
      crashed += bool(row["crashes"] or row["fatal"])
      f.write(json.dumps(row) + "\n")
      f.flush()
      print(
        f"run {i}: rc {row['rc']} passed {row['passed']} failed {row['failed']} "
        f"crashes {len(row['crashes'])} {row['fatal']} ({row['seconds']} s)",
        flush=True,
      )
  print(f"{crashed} of {args.runs} runs had a worker die")
  return 0


if __name__ == "__main__":
  sys.exit(main())
