"""experiments/benchmarks/decode_waste.py at toy size: the 2-layer cut of SmolLM2-135M-Instruct on
its chat prompts, plain sampler against continuous batching, and the simulated long-tailed
lengths."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.e2e import xla_env

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_bench_decode_waste_counts_steps_as_the_schedule_model(tmp_path, smollm2_2layer_dir):
  out = tmp_path / "waste.json"
  args = ["--hf_dir", str(smollm2_2layer_dir), "--prompts", "2", "--group", "4"]
  args += ["--new_tokens", "8", "--slots", "2,4", "--reps", "1"]
  args += ["--sim_rows", "64", "--sim_slot_fracs", "0.5", "--sim_blocks", "2"]
  args += ["--sim_budget", "64", "--sim_median", "16", "--sim_draws", "2", "--json", str(out)]
  # One device: the slots are one block.
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": xla_env.flags()}
  proc = subprocess.run(
    [sys.executable, "-m", "experiments.benchmarks.decode_waste", *args],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  report = json.loads(out.read_text())
  real = report["real"]
  assert [r["slots"] for r in real] == [8, 2, 4]  # plain (all 8 rows), then S = 2 and 4
  for r in real:
    assert r["rows"] == 8 and 1 <= r["len_max"] <= 8
    assert r["decode_steps"] == r["schedule_steps"]  # the jitted loop ran the modelled schedule
    assert 0.0 <= r["waste"] < 1.0 and r["useful_tok_s"] > 0
  plain = real[0]
  assert plain["decode_steps"] == plain["len_max"] - 1
  # Fewer slots than rows: the rows are decoded one after another, so more steps.
  assert real[1]["decode_steps"] >= plain["decode_steps"]
  sim = report["simulated"]
  assert [r["slots"] for r in sim] == [64, 32]
  assert sim[0]["slot_steps_vs_plain"] == 1.0
  assert sim[1]["waste"] < sim[0]["waste"]  # long-tailed lengths: refilling pays
  assert sim[1]["slot_steps_vs_plain"] < 1.0
