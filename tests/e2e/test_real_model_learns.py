"""RL makes the real 30-layer SmolLM2-135M-Instruct learn: the training reward rises.

``configs/smollm2_arithmetic.py`` shrunk to 8 GRPO steps of B 4 × G 8 on levels 1-2 of the
arithmetic set (sums and differences), which the warm-started model half-solves (profiled pass
rate 0.72 and 0.23). No held-out evaluation or profile: the test reads the training reward of
``metrics.jsonl``, the last 3 steps against the first 3, and the share of informative groups.
"""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_rl_raises_the_training_reward_of_the_real_model(smollm2_hf_dir, launcher_env, tmp_path):
  workdir = tmp_path / "learns"
  config = f"configs/smollm2_arithmetic.py:hf_path={smollm2_hf_dir},steps=8"
  overrides = [
    "--config.sampling.prompts_per_step=4",
    "--config.sampling.max_new_tokens=32",
    "--config.data.level_weights=(0.3, 0.7, 0.0, 0.0, 0.0)",
    "--config.data.pass_rate_band=()",
    "--config.warmstart.check_problems=2",
    "--config.eval.before=false",
    "--config.eval.after=false",
    "--config.checkpoint.every=8",
    "--config.logging.progress=false",
    "--config.logging.plot=false",
  ]
  cmd = [sys.executable, "experiments/launch.py", "--config", config, "--workdir", str(workdir)]
  proc = subprocess.run(
    cmd + overrides,
    cwd=ROOT,
    env=launcher_env(devices=1),
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  metrics = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
  reward = np.array([m["reward/mean"] for m in metrics])
  assert len(reward) == 8
  informative = 1.0 - np.mean([m["adv/zero_std_frac"] for m in metrics])
  assert informative >= 0.5, (informative, reward)
  assert reward[-3:].mean() > reward[:3].mean() + 0.1, reward
