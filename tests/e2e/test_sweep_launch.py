"""The sweep through the real launcher: run directories, skip / resume on a re-run, aggregation,
pod commands and the dry run."""

import csv
import json
import os
import pathlib
import shlex
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAUNCH = [sys.executable, str(ROOT / "experiments/launch.py")]


def _run(args, timeout=900):
  env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=os.environ["XLA_FLAGS"])
  proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
  return proc.stdout


@pytest.mark.slow
@pytest.mark.xdist_group("tiny_sweep")
def test_sweep_runs_skips_and_resumes_through_the_launcher(tiny_sweep, tmp_path):
  root, out = tiny_sweep  # the launcher's --sweep on configs/tiny_sweep.py (tests/plugin.py)
  names = [
    "seed=0,advantage.offset_coef=0.0,hadw.enabled=false",
    "seed=0,advantage.offset_coef=-0.5,hadw.enabled=true",
    "seed=1,advantage.offset_coef=0.0,hadw.enabled=false",
    "seed=1,advantage.offset_coef=-0.5,hadw.enabled=true",
  ]
  for name in names:
    run = root / name
    assert f"done  {name}" in out
    assert (run / "results.json").exists() and (run / "log.txt").exists()
    cfg = json.loads((run / "config.json").read_text())["config"]
    assert cfg["seed"] == int(name[5]) and cfg["hadw"]["enabled"] == ("true" in name)
    steps = [json.loads(ln)["step"] for ln in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
  hadw = [json.loads(ln) for ln in (root / names[1] / "metrics.jsonl").read_text().splitlines()]
  assert all(r["hadw/phi_mean"] > 0 for r in hadw)
  # Interrupted after its last checkpoint: results and the final evaluation are missing.
  (root / names[2] / "results.json").unlink()
  shutil.rmtree(root / names[2] / "eval")
  out = _run(LAUNCH + ["--config", "configs/tiny_sweep.py", "--sweep", "--workdir", str(root)])
  assert out.count("skipped") == 3 and f"done  {names[2]}" in out
  assert "resumed from checkpoint at step 3" in (root / names[2] / "log.txt").read_text()
  assert (root / names[2] / "results.json").exists()
  # One table from the four run directories.
  _run(
    [
      sys.executable,
      "experiments/aggregate.py",
      str(root),
      "--out",
      str(tmp_path / "agg"),
      "--metrics",
      "after/pass@1",
    ]
  )
  rows = list(csv.DictReader((tmp_path / "agg.csv").open()))
  assert [r["name"] for r in rows] == names and all(r["status"] == "done" for r in rows)
  seeds = list(csv.DictReader((tmp_path / "agg_seeds.csv").open()))
  assert sorted(r["n"] for r in seeds) == ["2", "2"]


def test_pod_commands_and_dry_run_through_the_launcher(tmp_path):
  out = _run(
    LAUNCH
    + [
      "--config",
      "configs/paper_hadw_qwen3_8b.py",
      "--pod",
      "--tpu_name",
      "v5p-64",
      "--workdir",
      str(tmp_path),
    ]
  )
  blocks = [ln for ln in out.splitlines() if ln.startswith("# run ")]
  lines = [ln for ln in out.splitlines() if ln.startswith("gcloud ")]
  assert len(blocks) == 6 and len(lines) == 6
  words = shlex.split(lines[0])
  assert words[5:8] == ["v5p-64", "--zone=$ZONE", "--worker=all"]
  inner = shlex.split(words[8][len("--command=") :])
  assert inner[:3] == ["cd", "grpo_jax", "&&"] and inner[-1] == "--distributed_auto"
  assert inner[5:7] == ["--config", "configs/paper_hadw_qwen3_8b.py:algo=grpo,hadw=0"]
  out = _run(
    LAUNCH + ["--config", "configs/paper_hadw_qwen3_4b.py", "--dry_run", "--target=v5p-64"]
  )
  assert "mesh (data, fsdp, tensor) = (2, 8, 4), 64 devices" in out
  assert "fits in 90% of 95.0 GiB: True" in out and "peak" in out
