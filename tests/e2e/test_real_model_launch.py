"""The papers' path on a real checkpoint: two RL steps of every mode through the launcher on
SmolLM2-135M-Instruct (its BPE tokenizer and chat template, the math task), a warm start and a
held-out evaluation, then the exported policy in transformers.

The checkpoint is cut to its first 2 of 30 decoder layers (fixture ``smollm2_2layer_dir``): the
pipeline sees the real tokenizer, embeddings and chat template at a fifteenth of the compile
time; the full 30-layer model is checked against transformers in
``tests/models/test_real_model_parity.py``. One subprocess (``tests/e2e/real_model_modes.py``, one
CPU device) runs the modes one after another, so the modes that sample the same shapes share
the sampler's compilation, and a second runs the online two-stage mode on two simulated devices
(a sharded mesh); each test below reads one run directory. The programs are compiled with XLA's
optimisation passes: the 49k-entry vocabulary makes them run-bound, not compile-bound.
"""

import fcntl
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest

from grpo_jax.rundir import read
from tests.e2e import xla_env
from tests.e2e.real_model_modes import MODES
from tests.support import metrics_doc

ROOT = pathlib.Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.xdist_group("smollm2_tier")
TWO_STAGE = ("presampled", "shuffle", "online")


@pytest.fixture(scope="module")
def runs(tmp_path_factory, smollm2_2layer_dir):
  """The seven modes and the export, run once per suite run: under pytest-xdist the tests may be
  split between workers, and the second waits for the first's run (a file lock) and reads it."""
  base = tmp_path_factory.getbasetemp()
  base = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
  root, hf = base / "real_modes", smollm2_2layer_dir
  with open(base / ".real_modes.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not (root / ".done").exists():
      shutil.rmtree(root, ignore_errors=True)
      root.mkdir()
      script = [sys.executable, str(ROOT / "tests/e2e/real_model_modes.py"), str(root), str(hf)]
      for devices, part in ((1, []), (2, ["sharded"])):
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        env["XLA_FLAGS"] = xla_env.flags(devices=devices, optimize=True)
        proc = subprocess.run(script + part, env=env, capture_output=True, text=True, timeout=3600)
        assert proc.returncode == 0, proc.stderr[-4000:]
      (root / ".done").touch()
  return root, hf


def _lines(path: pathlib.Path) -> list[dict]:
  return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(MODES))
def test_two_rl_steps(runs, mode):
  workdir = runs[0] / mode
  metrics = read.metrics(workdir)
  assert [m["step"] for m in metrics] == [1, 2]
  assert all(math.isfinite(v) for m in metrics for v in m.values()), metrics
  # Our sampler reads the trainer's parameters: no push, and ``auto`` resolves to no correction
  # (``tests/e2e/test_vllm_launch.py`` runs the same config on vLLM).
  assert all("time/weight_push_s" not in m for m in metrics)
  assert read.config(workdir)["config"]["loss"]["rollout_correction"] == "none"
  if mode == "dapo" and all(m["dapo/kept_groups"] == 0 for m in metrics):
    # The 2-layer cut never ends a completion: every group has the same overlong penalty,
    # dynamic sampling keeps none after its last round, and the update sees no tokens (nor
    # samples to log).
    assert all(m["dapo/rounds"] == 2 and m["dapo/overlong_penalty_mean"] < 0.0 for m in metrics)
    return
  for m in metrics:
    # The sampler's and the trainer's log-probs of the same tokens (METHODS §4 statement 16).
    assert 0.0 < m["rollout/logp_gap_mean"] < 1e-4
    assert m["response/len_mean"] > 1.0  # the chat prompt: the model answers, not just ends
    # Accuracy in [0, 1]; DAPO's overlong penalty (up to −1) shapes the reward below it.
    assert (-1.0 if mode == "dapo" else 0.0) <= m["reward/mean"] <= 1.0
  samples = read.samples(workdir)
  assert {s["step"] for s in samples} == {1, 2}
  assert all(s["completion"].strip() and s["prompt"] for s in samples)
  assert all(s["reward"] in (0.0, 1.0) or mode == "dapo" for s in samples)
  if mode in TWO_STAGE:
    for m in metrics:
      assert m["strategy/subgroups_per_prompt"] >= 1.0
      assert 0.0 <= m["strategy/preview_stopped_frac"] <= 1.0
  if mode == "presampled":
    stored = (workdir / "presample" / "meta.json").read_text()
    assert json.loads(stored)["delimiter"] == "\n"
  if mode == "hadw" or mode == "online":
    assert all(0.0 <= m["hadw/batch_acc"] <= 1.0 for m in metrics)
  if mode == "dapo":
    assert all(m["dapo/rounds"] >= 1 for m in metrics)


@pytest.mark.slow
def test_profile_and_band(runs):
  """The band run profiled its initial policy (8 problems x 2 samples, pool order), trained on
  the problems in its band, and --mode=profile resumed a cut profile to the same file."""
  workdir = runs[0] / "band"
  rows = _lines(workdir / "profile" / "pass_rates.jsonl")
  assert len(rows) == 8 and len({r["id"] for r in rows}) == 8
  for r in rows:
    assert r["n"] == 2 and r["pass_rate"] == r["correct"] / 2 and r["level"] in range(1, 6)
  band = read.config(workdir)["data_band"]
  kept = sum(0.0 <= r["pass_rate"] <= 0.5 for r in rows)
  assert band["band"] == [0.0, 0.5] and band["counts"]["all"]["kept"] == kept
  assert band["counts"]["all"]["kept"] + band["counts"]["all"]["dropped"] == 8
  metrics = read.metrics(workdir)
  assert metrics[0]["data/band_problems"] == kept
  # The curriculum: the pool re-profiled under the step-1 policy, and the band moved to it.
  step1 = _lines(workdir / "profile" / "pass_rates_step1.jsonl")
  assert [r["id"] for r in step1] == [r["id"] for r in rows]
  moved = json.loads((workdir / "profile" / "band_step1.json").read_text())
  assert moved["source"].endswith("pass_rates_step1.jsonl")
  kept1 = sum(r["pass_rate"] <= 0.5 for r in step1)
  assert moved["counts"]["all"]["kept"] == kept1 == metrics[1]["data/band_problems"]
  kept_ids = {r["id"] for r in rows + step1 if r["pass_rate"] <= 0.5}  # either step's band
  assert {s["problem_id"] for s in read.samples(workdir)} <= kept_ids
  # The profile of the last checkpoint (step 2), resumed from its first chunk.
  path = workdir / "profile" / "pass_rates_step2.jsonl"
  assert path.read_text() == path.with_suffix(".uninterrupted").read_text()
  assert len(_lines(path)) == 8


@pytest.mark.slow
def test_warm_start_and_evaluation(runs):
  """The GRPO run warm-started on the worked solutions (chat turns, real tokens) and was
  evaluated on the held-out arithmetic after RL."""
  workdir = runs[0] / "grpo"
  history = read.warmstart(workdir)
  assert [h["step"] for h in history] == [1, 2]
  for h in history:
    # Cross-entropy over the solutions' tokens: 0 would mean an empty loss mask. (The 2-layer
    # cut predicts badly, ~15 nats per token, so no bound below ln 49152 holds here.)
    assert math.isfinite(h["loss"]) and h["loss"] > 0.0, h
    assert 0.0 <= h["pass@1"] <= 1.0
  result = json.loads((workdir / "eval" / "arithmetic_eval_step2.json").read_text())
  after = json.loads((workdir / "results.json").read_text())["after"]
  assert after["pass@1"] == result["pass@1"] and 0.0 <= after["pass@1"] <= after["pass@2"] <= 1.0
  problems = (workdir / "eval" / "arithmetic_eval_step2_problems.jsonl").read_text().splitlines()
  assert len(problems) == 4  # every held-out problem sampled and graded


@pytest.mark.slow
def test_exported_policy_generates_the_same_greedy_tokens(runs):
  """The GRPO run's last checkpoint, exported, in transformers: same greedy tokens as ours."""
  import torch
  from transformers import AutoModelForCausalLM, AutoTokenizer

  from grpo_jax import models
  from grpo_jax.sampling import Decode, sample

  out = runs[0] / "export"
  assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == 2
  assert (out / "chat_template.jinja").exists() or "chat_template" in json.loads(
    (out / "tokenizer_config.json").read_text()
  )
  tokenizer = AutoTokenizer.from_pretrained(str(out))
  text = tokenizer.apply_chat_template(
    [{"role": "user", "content": "Calculate 4 + 9."}], tokenize=False, add_generation_prompt=True
  )
  ids = tokenizer(text, add_special_tokens=False)["input_ids"]
  hf = AutoModelForCausalLM.from_pretrained(str(out), torch_dtype=torch.float32)
  ref = hf.generate(
    torch.tensor([ids]),
    max_new_tokens=16,
    do_sample=False,
    eos_token_id=None,
    pad_token_id=tokenizer.pad_token_id,
  )[0, len(ids) :].tolist()
  ours = models.load_hf(str(out), tokenizer=False)
  got = sample(
    ours.graphdef,
    ours.params,
    np.array([ids], np.int32),
    np.ones((1, len(ids)), np.int32),
    jax.random.PRNGKey(0),
    Decode(max_new_tokens=16, eos_id=-1, pad_id=0, temperature=0.0),
  )
  got = np.asarray(got.tokens_NxT)[0].tolist()
  # Same logits on transformers' greedy sequence, and the same first 8 greedy tokens.
  seq = torch.tensor([ids + ref])
  with torch.no_grad():
    theirs = hf(seq).logits[0, len(ids) - 1 : -1].numpy()
  mine = np.asarray(ours(seq.numpy()))[0, len(ids) - 1 : -1]
  assert np.abs(mine - theirs).max() <= 1e-3
  assert got[:8] == ref[:8]


@pytest.mark.slow
def test_custom_task(runs):
  """docs/custom_task.md's example through the launcher: its rows, its two reward functions
  (recomputed here on the sampled completions) logged beside the total, and held-out rows that
  were never trained on, evaluated before and after RL."""
  import importlib.util

  workdir = runs[0] / "custom"
  example = ROOT / "examples/custom_task"
  spec = importlib.util.spec_from_file_location("example_rewards", example / "rewards.py")
  rewards = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(rewards)
  rows = {r["id"]: r for r in _lines(example / "reviews.jsonl")}

  metrics = read.metrics(workdir)
  assert [m["step"] for m in metrics] == [1, 2]
  for m in metrics:
    assert m["reward/label/scored_frac"] == m["reward/brevity/scored_frac"] == 1.0
    total = m["reward/label/mean"] + m["reward/brevity/mean"]  # weights 1 and 1
    assert m["reward/mean"] == pytest.approx(total, abs=1e-6)
    assert -0.5 <= m["reward/brevity/min"] <= m["reward/brevity/max"] <= 0.0
    assert m["data/skipped_rows"] == 0.0 and m["reward/unscored_frac"] == 0.0
  samples = read.samples(workdir)
  assert samples
  for s in samples:
    row = rows[s["problem_id"]]
    assert s["prompt"] == row["prompt"]
    c = [s["completion"]]
    expected = rewards.label([], c, [row["label"]])[0] + rewards.brevity([], c)[0]
    assert s["reward"] == pytest.approx(expected, abs=1e-6)
  trained = {s["prompt"] for s in samples}
  for step in (0, 2):
    result = json.loads((workdir / f"eval/heldout_step{step}.json").read_text())
    assert result["num_problems"] == 16 and 0.0 <= result["pass@1"] <= result["pass@2"] <= 1.0
    held = {r["prompt"] for r in _lines(workdir / f"eval/heldout_step{step}_problems.jsonl")}
    assert len(held) == 16 and not held & trained


@pytest.mark.slow
def test_every_logged_key_is_documented(runs):
  """Every key any mode logged (GRPO, DAPO, GSPO, HA-DW, two-stage, band, own task) is in
  docs/metrics.md, and each mode logs the throughput, time and memory keys."""
  keys, rates = set(), []
  for mode in [*MODES, "custom"]:
    metrics = read.metrics(runs[0] / mode)
    keys |= {k for m in metrics for k in m}
    for m in metrics:
      # 0 only where DAPO kept no group (the update sees padding rows alone).
      rates.append(m["perf/rollout_tokens_per_s"])
      assert m["memory/host_peak_gib"] > 0 and m["perf/update_tokens_per_s"] >= 0
      assert m["time/step_s"] >= m["time/rollout_s"] >= m["time/reward_s"] >= 0
  assert min(rates) >= 0 and sum(r > 0 for r in rates) >= 2 * len(MODES)
  assert metrics_doc.undocumented(keys) == []
  assert "loss/kl" not in keys  # no mode has a reference model
