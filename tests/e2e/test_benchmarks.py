"""The benchmark scripts run end to end at toy sizes and report what docs/performance.md reads.

Each script runs in a subprocess on the "tiny" checkpoint (written by transformers into a
temporary ``GRPO_BENCH_DIR``), with its JSON output checked: no recompilation after the first
RL step, every update variant and table present, the sampler's tokens counted. No time is
asserted; TRL is replaced by a stand-in trainer that only calls its step callbacks
(``STAND_IN_TRL``).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


# A ``trl`` package with the two names bench_step.py uses: its trainer runs ``max_steps`` steps
# that each grade one completion and sleep, between the callbacks' step begin and end.
STAND_IN_TRL = """
import time

class GRPOConfig:
  def __init__(self, max_steps, **kwargs):
    self.max_steps = max_steps

class GRPOTrainer:
  def __init__(self, model, reward_funcs, args, train_dataset, processing_class, callbacks):
    self.args, self.reward, self.callbacks = args, reward_funcs, callbacks

  def train(self):
    for _ in range(self.args.max_steps):
      for c in self.callbacks:
        c.on_step_begin(self.args, None, None)
      assert self.reward(["t2 t3"]) == [0.5]
      time.sleep(0.01)
      for c in self.callbacks:
        c.on_step_end(self.args, None, None)
"""


def run_bench(script: str, args: list[str], tmp_path, stand_in_trl: bool = False) -> dict:
  out = tmp_path / "out.json"
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "GRPO_BENCH_DIR": str(tmp_path / "ckpt")}
  if stand_in_trl:
    (tmp_path / "trl").mkdir()
    (tmp_path / "trl" / "__init__.py").write_text(STAND_IN_TRL)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
  # Without the tests' 8 simulated devices: the scripts run as typed on one.
  flags = env.get("XLA_FLAGS", "").split()
  env["XLA_FLAGS"] = " ".join(f for f in flags if "force_host_platform_device_count" not in f)
  proc = subprocess.run(
    [sys.executable, str(ROOT / "experiments" / script), *args, "--json", str(out)],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(out.read_text())


def test_bench_step_reports_breakdown_and_no_recompiles(tmp_path):
  res = run_bench(
    "bench_step.py",
    ["--sizes", "tiny", "--prompts", "2", "--group", "4", "--new_tokens", "8", "--steps", "3",
     "--trl_steps", "1", "--trl_micro_batch_sizes", "0", "--interleave", "0",
     "--micro_batch_size", "4", "--growth_sizes", "", "--ab_share", "tiny",
     "--ab_prefill", "tiny", "--ab_reps", "1", "--bound"],
    tmp_path,
    stand_in_trl=True,
  )  # fmt: skip
  (row,) = res["step"]
  assert row["compiles_by_step"][0] > 0 and row["compiles_by_step"][1:] == [0, 0]
  for key in ("step_s", "sampling_s", "update_s", "logprobs_s", "checkpoint_s"):
    assert row[key] > 0, key
  assert 0 < row["update_mfu_pct"] < 100
  # Not interleaved (--interleave 0): our 3 steps, then the stand-in TRL's one, unpaired.
  (trl_run,) = row["trl_runs"]
  assert "ours_after" not in trl_run and "ratio_pairs" not in row
  assert row["ratio_vs_trl"] == pytest.approx(trl_run["trl_step_s"] / row["step_s"])
  assert row["ratio_bound_vs_trl"] == pytest.approx(trl_run["trl_step_s"] / row["step_bound_s"])
  # The bound of the same step: 8 rows, 8 new tokens, the update in chunks of 4 rows (one group
  # each, its prompt run once).
  assert (row["rows"], row["micro"], row["devices"], row["rows_per_prompt"]) == (8, 4, 1, 4)
  assert row["rows_per_prefill"] == 4
  assert row["step_bound_s"] == pytest.approx(row["sampling_bound_s"] + row["update_gemms_s"])
  assert row["step_pct_of_bound"] == pytest.approx(100 * row["step_bound_s"] / row["step_s"])
  ab, prefill = res["ab"]
  assert ab["speedup"] == pytest.approx(ab["per_row_update_s"] / ab["shared_update_s"])
  assert prefill["speedup"] == pytest.approx(
    prefill["per_row_sampling_s"] / prefill["shared_sampling_s"]
  )
  # One prefill per group draws the same tokens up to float rounding of the first logits.
  assert prefill["first_logp_max_diff"] < 1e-4 and prefill["same_rows_frac"] > 0.5
  # MFU counts each variant's own work: 2 prompts × 32 + 8 × 8 positions against 8 × 40.
  work = (
    ab["shared_mfu_pct"] * ab["shared_update_s"] / (ab["per_row_mfu_pct"] * ab["per_row_update_s"])
  )
  assert 0.3 < work < 0.6


def test_bench_step_reduce_once_flag_and_ab_on_two_devices(tmp_path):
  """The step with the gradient all-reduced per micro-batch (``--reduce_once 0``), the A/B of
  both placements and that of RoPE's two formulations, with one device per core (8 rows,
  chunks of 2: 4 parts per device); our steps interleaved with a stand-in TRL's (two settings
  of two steps each)."""
  res = run_bench(
    "bench_step.py",
    ["--sizes", "tiny", "--prompts", "2", "--group", "4", "--new_tokens", "8", "--steps", "2",
     "--trl_steps", "2", "--trl_micro_batch_sizes", "0,4", "--micro_batch_size", "2",
     "--growth_sizes", "", "--cpu_devices", "2", "--reduce_once", "0", "--ab_reduce", "tiny",
     "--ab_rope", "tiny", "--ab_reps", "1"],
    tmp_path,
    stand_in_trl=True,
  )  # fmt: skip
  assert res["machine"]["devices"] == 2
  (row,) = res["step"]
  # Interleaved: our first (compiling) step, then one after each of the 2 × 2 TRL steps.
  assert row["compiles_by_step"][0] > 0 and row["compiles_by_step"][1:] == [0, 0, 0, 0]
  runs = row["trl_runs"]
  assert [(r["trl_micro"], len(r["trl_steps"]), len(r["ours_after"])) for r in runs] == [
    (0, 2, 2),
    (4, 2, 2),
  ]
  assert row["step_s"] == min(t for r in runs for t in r["ours_after"])
  assert row["ratio_vs_trl"] == pytest.approx(min(r["trl_step_s"] for r in runs) / row["step_s"])
  # Each run's first pair is left out: one pair per run.
  assert row["ratio_pairs"] == pytest.approx([r["trl_steps"][1] / r["ours_after"][1] for r in runs])
  assert row["ratio_paired_median"] == pytest.approx(sum(row["ratio_pairs"]) / 2)
  ab, rope = res["ab"]
  assert ab["speedup"] == pytest.approx(ab["per_part_update_s"] / ab["once_update_s"])
  assert ab["per_part_mfu_pct"] > 0 and ab["once_mfu_pct"] > 0
  assert rope["speedup"] == pytest.approx(rope["sliced_update_s"] / rope["reversed_update_s"])
  # Both formulations do the same work.
  assert rope["sliced_mfu_pct"] * rope["sliced_update_s"] == pytest.approx(
    rope["reversed_mfu_pct"] * rope["reversed_update_s"]
  )


def test_bench_sampler_counts_every_token(tmp_path):
  res = run_bench(
    "bench_sampler.py",
    ["--sizes", "tiny", "--batches", "4", "--new_tokens", "16", "--reps", "1",
     "--growth_sizes", "tiny", "--growth_batch", "2", "--growth_max", "128"],
    tmp_path,
  )  # fmt: skip
  (row,) = res["compare"]
  assert (row["B"], row["T"]) == (4, 16)
  assert row["ratio"] == pytest.approx(row["ours_tok_s"] / row["hf_tok_s"])
  (grow,) = res["growth"]
  assert grow["T"] == 128 and grow["step_cost_vs_T128"] == grow["hf_step_cost_vs_T128"] == 1.0
  assert grow["hf_ms_per_step"] == pytest.approx(1e3 * grow["hf_seconds"] / 128)


def test_bench_decode_bound_bounds_and_gemms(tmp_path):
  res = run_bench(
    "bench_decode_bound.py",
    ["--sizes", "tiny", "--batch", "8", "--gemms", "64x32x16", "--attention_slots", "32",
     "--cpu_devices", "2", "--step_rows", "8", "--step_new_tokens", "8", "--micro_batch_size",
     "4", "--step_group", "4"],
    tmp_path,
  )  # fmt: skip
  (row,) = res["bounds"]
  # Adding the KV read and the prefill can only lower the GEMMs-only bound.
  assert 0 < row["sampler_tok_s_bound"] < row["gemm_chain_tok_s_bound"]
  (step,) = res["step_bounds"]
  # Chunks of 4 rows over 2 devices: 2 rows of a group of 4 per device and chunk share a prompt.
  assert (step["rows"], step["micro"], step["devices"], step["rows_per_prompt"]) == (8, 4, 2, 2)
  assert step["rows_per_prefill"] == 4  # each device's 4 rows: one group, one prefill
  assert step["step_bound_s"] == pytest.approx(step["sampling_bound_s"] + step["update_gemms_s"])
  # 3 × ((8 / 2 prompts × 32 + 8 rows × 8) positions × dense + 8 × 8 unembedded) at the rate.
  dense = 4 * 2 * (128 * 128 * 2 + 128 * 64 * 2 + 3 * 128 * 384)
  f = 3 * ((4 * 32 + 8 * 8) * dense + 64 * 2 * 128 * 1024)
  assert step["update_gemms_gflops"] == pytest.approx(f / step["update_gemms_s"] / 1e9)
  (gemm,) = res["gemms"]
  assert gemm["gemm"] == "64x32x16" and gemm["gflops"] > 0
  (att,) = res["attention"]
  assert (att["slots"], att["devices"]) == (32, 2)
  # 4 layers × K and V × 8 rows × 2 KV heads × 32 dims × 32 slots × 4 bytes.
  assert att["kv_mb"] == pytest.approx(4 * 2 * 8 * 2 * 32 * 32 * 4 / 1e6)


def test_bench_logps_variants_agree(tmp_path):
  res = run_bench(
    "bench_logps.py",
    ["--vocab", "500", "--hidden", "64", "--rows", "2", "--length", "8", "--vocab_chunk", "128",
     "--reps", "1"],
    tmp_path,
  )  # fmt: skip
  row = res["logps"]
  # The same loss and gradients from all three paths (a padded last vocabulary chunk included).
  assert row["token_logps_max_abs_diff"] < 1e-4 and row["chunked_max_abs_diff"] < 1e-4
  assert row["token_logps_speedup"] == pytest.approx(row["materialised_ms"] / row["token_logps_ms"])
  assert row["chunked_speedup"] == pytest.approx(row["materialised_ms"] / row["chunked_ms"])
