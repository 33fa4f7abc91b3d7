"""Two RL steps through the launcher with ``sampling.engine = "vllm"`` on SmolLM2-135M-Instruct
(cut to 2 decoder layers: its real tokenizer, embeddings and chat template): vLLM draws the
rollouts, the updated weights are pushed in memory before each step, the trainer recomputes the
log-probs and the correction (``auto`` → ``token_tis``) weighs the mismatch (the same runs on
our sampler, which log no push, are the real-model tier's). ``experiments/benchmarks/engine.py`` at
toy size."""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from grpo_jax.rundir import read
from tests.e2e import xla_env

if importlib.util.find_spec("vllm") is None:  # not imported: the launcher runs it
  pytest.skip("needs vLLM (the .[vllm] extra)", allow_module_level=True)
ROOT = pathlib.Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm_engine")]


def _launch(env, hf, workdir, *overrides):
  config = f"configs/smollm2_arithmetic.py:tiny=1,method=grpo,hf_path={hf}"
  cmd = [sys.executable, "experiments/launch.py", "--config", config, "--workdir", str(workdir)]
  cmd += ["--config.logging.progress=false", "--config.logging.plot=false", *overrides]
  # The cut model answers nothing (every reward 0): the entropy bonus at a full learning rate
  # from step 1 moves the weights, so step 2 samples from a pushed, changed model.
  cmd += [f"--config.{k}" for k in ("loss.entropy_coef=0.01", "optimizer.warmup_steps=0")]
  cmd += ["--config.optimizer.learning_rate=1e-3"]
  proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
  assert proc.returncode == 0, proc.stderr[-4000:]
  return read.metrics(workdir), proc.stdout + proc.stderr


def test_two_rl_steps_on_vllm_through_the_launcher(smollm2_2layer_dir, launcher_env, tmp_path):
  # One core each (see the unit tests); XLA's optimisation passes on: the update of the real
  # vocabulary is run-bound.
  env = dict(launcher_env(devices=1, optimize=True), OMP_NUM_THREADS="1")
  engine, evaluate = "--config.sampling.engine=vllm", "--config.eval.after=true"
  rows, out = _launch(env, smollm2_2layer_dir, tmp_path / "vllm", engine, evaluate)
  # One engine for the rollouts and the evaluation, its memory measured once at its start.
  assert out.count("vLLM engine: weights") == 1, out[-4000:]
  assert (tmp_path / "vllm" / "eval").is_dir()
  for key in ("weights", "kv", "rss"):
    assert {r[f"memory/engine_{key}_gib"] for r in rows} == {rows[0][f"memory/engine_{key}_gib"]}
  assert 0 < rows[0]["memory/engine_kv_gib"] < rows[0]["memory/engine_rss_gib"]
  config = read.config(tmp_path / "vllm")
  assert config["config"]["sampling"]["engine"] == "vllm"
  assert config["config"]["loss"]["rollout_correction"] == "token_tis"  # auto, external engine
  assert [r["step"] for r in rows] == [1, 2]
  for row in rows:
    assert row["time/weight_push_s"] > 0  # the built policy before step 1, step 1's after
    assert np.isfinite(row["loss/total"]) and row["grad/norm"] > 0
    # The trainer's log-probs of vLLM's tokens: same weights in float32, other kernels.
    assert 0 <= row["mismatch/kl"] < 1e-6, row["mismatch/kl"]
    assert 0.9 < row["mismatch/is_weight_mean"] < 1.1, row["mismatch/is_weight_mean"]


def test_bench_engine_compares_the_engines(smollm2_2layer_dir, tmp_path):
  """``experiments/benchmarks/engine.py`` at toy size: both engines timed on the same prompts, the
  push timed, greedy rows compared (the cut model in float32: every row equal)."""
  out = tmp_path / "out.json"
  args = ["--model", str(smollm2_2layer_dir), "--prompts", "2", "--group", "2"]
  args += ["--new_tokens", "4", "--reps", "1", "--pushes", "1", "--json", str(out)]
  env = dict(os.environ, JAX_PLATFORMS="cpu", OMP_NUM_THREADS="1", XLA_FLAGS=xla_env.flags())
  proc = subprocess.run(
    [sys.executable, "-m", "experiments.benchmarks.engine", *args],
    cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
  )  # fmt: skip
  assert proc.returncode == 0, proc.stderr[-3000:]
  res = json.loads(out.read_text())
  assert res["work"] == {"model": str(smollm2_2layer_dir), "dtype": "float32", "B": 2, "G": 2,
                         "T": 4}  # fmt: skip
  for name in ("ours", "vllm"):
    assert 0 < res["tokens"][name] <= 2 * 2 * 4
    assert res["tokens_per_s"][name] == res["tokens"][name] / res["best_s"][name]
  assert res["push_s_median"] > 0
  assert res["greedy_rows_equal"] == res["greedy_rows"] == 2


def test_strategy_previews_on_vllm_through_the_launcher(smollm2_2layer_dir, launcher_env, tmp_path):
  """The two-stage rollout (online previews stopping on the delimiter, completions after them)
  with both stages drawn by vLLM: two steps, previews logged, the weights pushed before each."""
  env = dict(launcher_env(devices=1, optimize=True), OMP_NUM_THREADS="1")
  config = f"configs/smollm2_arithmetic.py:tiny=1,method=full,hf_path={smollm2_2layer_dir}"
  cmd = [sys.executable, "experiments/launch.py", "--config", config, "--workdir", str(tmp_path)]
  cmd += ["--config.logging.progress=false", "--config.logging.plot=false"]
  cmd += ["--config.sampling.engine=vllm"]
  proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
  assert proc.returncode == 0, proc.stderr[-4000:]
  rows = read.metrics(tmp_path)
  assert [r["step"] for r in rows] == [1, 2]
  for row in rows:
    assert row["time/weight_push_s"] > 0
    assert row["strategy/preview_len_mean"] > 0  # previews drawn and kept
    assert 0 <= row["mismatch/kl"] < 1e-6, row["mismatch/kl"]
  assert "vllm engine" in proc.stdout + proc.stderr


def test_lora_adapters_reach_vllm_merged(smollm2_2layer_dir, launcher_env, tmp_path):
  """LoRA (rank 4 on every projection): vLLM gets the base with the adapters merged in before
  each step, and the trainer's log-probs of its tokens (the unmerged adapters on the frozen
  base) agree with vLLM's as closely as without LoRA; step 1 trained the adapters (B ≠ 0), so
  step 2 samples from a changed, pushed model."""
  env = dict(launcher_env(devices=1, optimize=True), OMP_NUM_THREADS="1")
  lora = ("--config.sampling.engine=vllm", "--config.model.lora.rank=4")
  rows, out = _launch(env, smollm2_2layer_dir, tmp_path / "lora", *lora)
  assert [r["step"] for r in rows] == [1, 2]
  for row in rows:
    assert row["time/weight_push_s"] > 0 and row["grad/norm"] > 0
    assert 0 <= row["mismatch/kl"] < 1e-6, row["mismatch/kl"]
  assert (tmp_path / "lora" / "lora_base.json").exists()
