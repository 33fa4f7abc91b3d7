"""The benchmark scripts run end to end at toy sizes and report what docs/performance.md reads.

Each script runs in a subprocess on the "tiny" checkpoint (written by transformers into a
temporary ``GRPO_BENCH_DIR``) — the ``--model`` paths on SmolLM2-135M-Instruct cut to 2 layers
(``real_model.truncated_dir(2)``) — with its JSON output checked: no recompilation after the first
RL step, every table present, the sampler's tokens counted. No time is
asserted; TRL is replaced by a stand-in trainer that only calls its step callbacks
(``STAND_IN_TRL``). Tunix (``--peer tunix``) runs as installed, where the ``tunix`` extra is.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.e2e import xla_env

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


# A ``trl`` package with the two names peers/trl.py uses: its trainer runs ``max_steps`` steps
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


def run_bench(module: str, args: list[str], tmp_path, stand_in_trl=False, optimize=False) -> dict:
  """The JSON of ``python -m experiments.benchmarks.<module>`` run with ``args``, with the suite's
  compilation cache: the scripts' compile counter (``common.CompileCounter``) counts a program
  read back from it as one compilation too (jax fires its backend-compile event around the cache
  lookup). ``optimize``: with XLA's optimisation passes (``xla_env.flags``). A script leaves none
  of its scratch directories in its temporary directory."""
  out, tmp = tmp_path / "out.json", tmp_path / "tmp"
  tmp.mkdir()
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "GRPO_BENCH_DIR": str(tmp_path / "ckpt")}
  env["TMPDIR"] = str(tmp)  # the scripts' scratch directories, removed when they end
  if stand_in_trl:
    (tmp_path / "trl").mkdir()
    (tmp_path / "trl" / "__init__.py").write_text(STAND_IN_TRL)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
  # Without the tests' 8 simulated devices: the scripts run as typed on one.
  env["XLA_FLAGS"] = xla_env.flags(optimize=optimize)
  proc = subprocess.run(
    [sys.executable, "-m", f"experiments.benchmarks.{module}", *args, "--json", str(out)],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  # torch's compile cache (torchinductor_$USER, made when transformers imports torch) stays.
  left = [p.name for p in tmp.iterdir() if not p.name.startswith("torchinductor_")]
  assert not left, left
  return json.loads(out.read_text())


def test_bench_step_reports_breakdown_bound_and_no_recompiles(tmp_path):
  res = run_bench(
    "step",
    ["--sizes", "tiny", "--prompts", "2", "--group", "4", "--new_tokens", "8", "--steps", "3",
     "--trl_steps", "2", "--trl_micro_batch_sizes", "0", "--micro_batch_size", "4", "--bound"],
    tmp_path,
    stand_in_trl=True,
  )  # fmt: skip
  (row,) = res["step"]
  # Our first (compiling) step, one after each of the 2 TRL steps: 3 steps in all.
  assert row["compiles_by_step"][0] > 0 and row["compiles_by_step"][1:] == [0, 0]
  for key in ("step_s", "sampling_s", "update_s", "logprobs_s", "checkpoint_s"):
    assert row[key] > 0, key
  assert 0 < row["update_mfu_pct"] < 100
  (trl_run,) = row["trl_runs"]
  assert row["ratio_vs_trl"] == pytest.approx(trl_run["trl_step_s"] / row["step_s"])
  assert row["ratio_bound_vs_trl"] == pytest.approx(trl_run["trl_step_s"] / row["step_bound_s"])
  # The bound of the same step: 8 rows, 8 new tokens, the update in chunks of 4 rows (one group
  # each, its prompt run once).
  assert (row["rows"], row["micro"], row["devices"], row["rows_per_prompt"]) == (8, 4, 1, 4)
  assert row["rows_per_prefill"] == 4
  assert row["step_bound_s"] == pytest.approx(row["sampling_bound_s"] + row["update_gemms_s"])
  assert row["step_pct_of_bound"] == pytest.approx(100 * row["step_bound_s"] / row["step_s"])


def test_bench_step_interleaves_with_trl_on_two_devices(tmp_path):
  """Our steps interleaved with a stand-in TRL's (two settings of two steps each), with one
  device per core (8 rows, chunks of 2: 4 parts per device, the gradient reduced once)."""
  res = run_bench(
    "step",
    ["--sizes", "tiny", "--prompts", "2", "--group", "4", "--new_tokens", "8", "--steps", "2",
     "--trl_steps", "2", "--trl_micro_batch_sizes", "0,4", "--micro_batch_size", "2",
     "--cpu_devices", "2"],
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


def test_bench_sampler_counts_every_token(tmp_path):
  res = run_bench(
    "sampler",
    ["--sizes", "tiny", "--batches", "4", "--new_tokens", "16", "--reps", "1",
     "--growth_sizes", "tiny", "--growth_batch", "2", "--growth_max", "128"],
    tmp_path,
  )  # fmt: skip
  (row,) = res["compare"]
  # With no EOS the library's sampler decodes every row to T: 4 × 16 tokens, as generate does.
  assert row["ours_tokens"] == row["hf_tokens"] == 4 * 16
  assert row["ours_tok_s"] > 0 and row["hf_tok_s"] > 0
  (grow,) = res["growth"]
  assert grow["T"] == 128 and grow["seconds"] > 0 and grow["hf_seconds"] > 0


def test_bench_decode_bound_bounds(tmp_path):
  res = run_bench(
    "decode_bound",
    ["--sizes", "tiny", "--batch", "8", "--cpu_devices", "2", "--step_rows", "8",
     "--step_new_tokens", "8", "--micro_batch_size", "4", "--step_group", "4"],
    tmp_path,
  )  # fmt: skip
  (row,) = res["bounds"]
  # Adding the KV read and the prefill can only lower the GEMMs-only bound.
  assert 0 < row["sampler_tok_s_bound"] < row["gemm_chain_tok_s_bound"]
  (step,) = res["step_bounds"]
  # Chunks of 4 rows over 2 devices: 2 rows of a group of 4 per device and chunk share a prompt.
  assert (step["rows"], step["micro"], step["devices"], step["rows_per_prompt"]) == (8, 4, 2, 2)
  assert step["rows_per_prefill"] == 4  # each device's 4 rows: one group, one prefill
  assert step["sampling_bound_s"] > 0 and step["update_gemms_s"] > 0


def test_bench_logps_paths_agree(tmp_path):
  res = run_bench(
    "logps",
    ["--vocab", "500", "--hidden", "64", "--rows", "2", "--length", "8", "--vocab_chunk", "128",
     "--reps", "1"],
    tmp_path,
  )  # fmt: skip
  row = res["logps"]
  # The same loss and gradients from both paths (a padded last vocabulary chunk included).
  assert row["chunked_max_abs_diff"] < 1e-4


def test_bench_update_width_cuts_to_the_longest_completion(tmp_path):
  """The tiny checkpoint with its EOS embedding scaled by −40 (tied, so EOS's logit dominates and
  completions end after a token or two): the batch cut to its bucket width, the update at both
  widths and on packed rows of two widths with the same loss and gradient, one compilation
  each; then the same after one
  warm-start step (which moves the model off its short completions)."""
  from safetensors.numpy import load_file, save_file

  env = {**os.environ, "GRPO_BENCH_DIR": str(tmp_path / "ckpt")}
  write = "from experiments.benchmarks import common; common.checkpoint('tiny')"
  subprocess.run([sys.executable, "-c", write], cwd=ROOT, env=env, check=True)
  model = tmp_path / "short"
  shutil.copytree(tmp_path / "ckpt" / "tiny", model)
  weights = load_file(model / "model.safetensors")
  weights["model.embed_tokens.weight"][1] *= -40.0  # t1 = EOS
  save_file(weights, model / "model.safetensors", metadata={"format": "pt"})
  res = run_bench(
    "update_width",
    ["--model", str(model), "--prompts", "2", "--group", "4", "--new_tokens", "16",
     "--buckets", "4", "--micro_batch_size", "4", "--reps", "2", "--warmstart_steps", "0,1",
     "--pack_widths", "0,256"],
    tmp_path,
  )  # fmt: skip
  rows = res["update_width"]
  assert [r["warmstart_steps"] for r in rows] == [0, 1]
  for row in rows:
    # Widths (2, 4, 8, 16): the smallest that holds the longest completion.
    assert row["longest"] == row["len_max"] <= row["width"] <= row["full_width"] == row["T"] == 16
    assert row["width"] == min(w for w in (2, 4, 8, 16) if w >= row["longest"])
    assert len(row["ratio_pairs"]) == 2
    np.testing.assert_allclose(row["loss_cut"], row["loss_full"], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(row["grad_norm_cut"], row["grad_norm_full"], rtol=1e-4, atol=1e-7)
    for side in ("pack0", "pack256"):  # the packed rows' update: the same loss and gradient
      np.testing.assert_allclose(row[f"{side}_loss"], row["loss_full"], rtol=1e-5, atol=1e-7)
      np.testing.assert_allclose(row[f"{side}_grad_norm"], row["grad_norm_full"], rtol=1e-4)
      assert row[f"{side}_s"] > 0 and 0 < row[f"{side}_fill"] <= 1
    assert row["pack256_width"] == 256 and row["pack256_rows"] <= row["pack0_rows"] <= 8
  first = rows[0]
  assert first["width"] < 16
  assert first["compiles_full"] >= 1 and first["compiles_cut"] >= 1  # one program, two widths


def test_bench_accelerator_toy_reports_every_section(tmp_path):
  """The accelerator script at toy shapes on the CPU: ceilings, decode rows against their
  roofline and transformers (forced onto the CPU), the update's MFU, padded against packed,
  the RL loop on-policy against overlap, the goals."""
  res = run_bench(
    "accelerator",
    ["--toy", "--hf", "cpu", "--models", "toy-a", "--batches", "2,4", "--reps", "1"],
    tmp_path,
  )
  dev = res["device"]
  assert dev["copy_gb_s"] == max(dev["copy_gb_s_single"], dev["copy_gb_s_loop"]) > 0
  assert dev["matmul_tflops"] > 0
  assert [(r["model"], r["B"]) for r in res["decode"]] == [("toy-a", 2), ("toy-a", 4)]
  for row in res["decode"]:
    assert "error" not in row, row
    assert row["seconds"] > 0 and row["roofline_s"] > 0 and row["hf_tok_s"] > 0
    # Caches of P + 16 slots (one bucket): the 15 decode steps attend over 20 slots each
    # against the 4 + t (t = 1 … 15) written: 300 / 180.
    assert row["bucket_kv_ratio"] == pytest.approx(300 / 180)
  assert {r["hf_dtype"] for r in res["generate"]} == {"bfloat16"}
  (up,) = res["update"]
  assert "error" not in up, up
  # 2 prompts × 4 rows of 8 + 24 tokens: each prompt run once (the library's group_run).
  assert (up["rows"], up["L"], up["rows_per_prompt"]) == (8, 32, 4)
  assert up["model_tflop"] > 0 and up["model_tflops_s"] > 0
  assert [g["goal"] for g in res["goals"]] == ["update MFU toy-a ≥ 40%"]  # no B = 256 row
  (pack,) = res["pack"]
  assert "error" not in pack, pack
  # Completions of 3 … 24 tokens after 8-token prompts, one of them 24: the padded rows hold
  # between (8 + 3) / 32 and all but 21 / 256 real tokens; packed, fewer rows hold them.
  assert (8 + 3) / 32 < pack["padded_fill"] <= 1 - 21 / 256
  assert pack["packed_fill"] > pack["padded_fill"] and pack["packed_rows"] < 8
  # The RL loop at the toy shape, on-policy then one step off-policy: staleness 0 then 1, and
  # on-policy the step waits for the whole rollout.
  on, off = res["overlap"]
  assert [(r["model"], r["off_policy_steps"]) for r in (on, off)] == [("toy-a", 0), ("toy-a", 1)]
  assert (on["rollout/staleness"], off["rollout/staleness"]) == (0, 1)
  assert on["time/rollout_wait_s"] == on["time/rollout_s"] > 0
  assert all(r[k] > 0 for r in (on, off) for k in ("time/step_s", "time/update_s"))


def test_bench_accelerator_skips_what_the_budget_cannot_hold(tmp_path):
  res = run_bench(
    "accelerator",
    ["--toy", "--hf", "off", "--models", "toy-a", "--batches", "2,4", "--budget_s", "0.5"],
    tmp_path,
  )
  assert res["decode"] == res["update"] == res["pack"] == res["overlap"] == []
  skipped = [s["what"] for s in res["skipped"]]
  want = ["generate", "decode toy-a B=2", "update toy-a", "pack toy-a", "overlap toy-a"]
  want += ["decode toy-a B=4"]
  assert skipped == want
  assert all(s["reason"].startswith("time") for s in res["skipped"][1:])


@pytest.fixture(scope="module")
def two_layer_dir():
  """SmolLM2-135M-Instruct cut to 2 layers: its tokenizer, chat template and shapes."""
  from tests.support import real_model  # noqa: PLC0415

  return str(real_model.truncated_dir(2))


def test_bench_sampler_real_model_on_chat_prompts(tmp_path, two_layer_dir):
  """``--model DIR``: the arithmetic task's chat prompts (80 left-padded slots), every row to T,
  both sides; the bound row beside it."""
  res = run_bench(
    "sampler",
    ["--model", two_layer_dir, "--batches", "2", "--new_tokens", "3,4", "--reps", "1",
     "--growth_sizes", "", "--bound"],
    tmp_path,
  )  # fmt: skip
  rows = res["compare"]
  assert [(r["B"], r["P"], r["T"]) for r in rows] == [(2, 80, 3), (2, 80, 4)]
  for row in rows:
    assert row["ours_tokens"] == row["hf_tokens"] == 2 * row["T"]
    assert row["ratio"] == pytest.approx(row["ours_tok_s"] / row["hf_tok_s"])
    assert 0 < row["bound_tok_s"] < float("inf")
    assert row["ours_pct_of_bound"] == pytest.approx(100 * row["ours_tok_s"] / row["bound_tok_s"])
  assert res["machine"]["read_gb_s"] > 0


def test_bench_step_real_model_with_kl(tmp_path, two_layer_dir):
  """``--model DIR --kl_coef 0.04``: our step on the chat prompts with a reference model, one
  (stand-in) TRL step after it, and no recompilation."""
  res = run_bench(
    "step",
    ["--model", two_layer_dir, "--prompts", "2", "--group", "2", "--new_tokens", "4",
     "--steps", "2", "--trl_steps", "1", "--trl_micro_batch_sizes", "0",
     "--micro_batch_size", "2", "--kl_coef", "0.04"],
    tmp_path,
    stand_in_trl=True,
  )  # fmt: skip
  (row,) = res["step"]
  assert row["compiles_by_step"][0] > 0 and row["compiles_by_step"][1:] == [0]
  assert row["kl_coef"] == 0.04 and row["P"] == 80
  for key in ("step_s", "sampling_s", "update_s", "trl_step_s"):
    assert row[key] > 0, key
  assert 0 < row["ratio_vs_trl"] < float("inf") and np.isfinite(row["kl_last"])
  assert row["ratio_vs_trl"] == pytest.approx(row["trl_step_s"] / row["step_s"])


def test_bench_step_beside_tunix_shipped_and_patched(tmp_path, two_layer_dir):
  """``--peer tunix``: Tunix's GRPOLearner as shipped and patched, each of its steps followed by
  one of ours. The parity check separates the two (RoPE θ), and shipped Tunix's masks drop the
  two ``<|im_end|>`` (its pad id) of every chat prompt, the patched none."""
  pytest.importorskip("tunix")
  res = run_bench(
    "step",
    ["--model", two_layer_dir, "--peer", "tunix", "--kl_coefs", "0.04", "--prompts", "2",
     "--group", "2", "--new_tokens", "4", "--micro_batch_size", "2", "--tunix_steps", "2"],
    tmp_path,
  )  # fmt: skip
  (row,) = res["step"]
  assert row["kl_coef"] == 0.04 and row["P"] == 80 and row["tunix_micro_rows"] == 2
  assert row["compiles_by_step"][1:] == [0] * 4  # one of ours after each of 2 × 2 Tunix steps
  for v in ("shipped", "patched"):
    (run,) = [r for r in row["tunix_runs"] if r["variant"] == v]
    assert len(run["steps"]) == len(run["ours_after"]) == 2
    assert row[f"tunix_{v}_prompt_ids_match"] is True
    for key in ("step_s", "rollout_s", "update_s", "sampling_s", "ref_logps_s"):
      assert row[f"tunix_{v}_{key}"] > 0, (v, key)
    assert row[f"ratio_vs_tunix_{v}"] == pytest.approx(row[f"tunix_{v}_step_s"] / row["step_s"])
  assert row["tunix_patched_logits_max_abs_diff"] < 1e-3
  assert row["tunix_shipped_logits_max_abs_diff"] > 0.1
  assert row["tunix_shipped_masked_prompt_tokens"] == 2 * 2 * 2  # prompts × G × <|im_end|>
  assert row["tunix_patched_masked_prompt_tokens"] == 0
  assert row["tunix_patched_masked_completion_tokens"] == 0  # its pad id is no token
  assert any(d.startswith("micro-batches") for d in row["differences"])


def test_bench_overlap_runs_both_modes_on_the_real_model_cut(tmp_path, smollm2_2layer_dir):
  small = ["sampling.prompts_per_step=2", "sampling.group_size=4", "sampling.max_new_tokens=8"]
  args = ["--model", str(smollm2_2layer_dir), "--devices", "2", "--steps", "3", "--overrides"]
  over = args + small + ["loss.micro_batch_size=0", "data.train_limit=64"]
  out = run_bench("overlap", over, tmp_path, optimize=True)
  on, off = out["rows"]
  assert (on["rollout.off_policy_steps"], off["rollout.off_policy_steps"]) == (0, 1)
  assert on["rollout/staleness"] == 0 and off["rollout/staleness"] == 1  # the steady steps
  assert on["time/rollout_wait_s"] == on["time/rollout_s"]  # on-policy the step waits for all
  assert all(r[k] > 0 for r in (on, off) for k in ("time/step_s", "time/update_s"))
  assert out["machine"]["devices"] == 2
