"""End to end through the launcher with strategy sampling on (8 simulated devices): presample
mode, then training that resumes from it and reads the stored previews."""

import pathlib
import subprocess
import sys

import datasets
import pytest

from grpo_jax.rundir import read

ROOT = pathlib.Path(__file__).resolve().parents[2]
FLAGS = [
  "--config.strategy.enabled=true",
  "--config.strategy.num_previews=3",
  "--config.advantage.baseline=subgroup_offset",
  "--config.advantage.offset_coef=-0.5",
  "--config.eval.with_strategy=true",
  "--config.logging.plot=false",
]


def _launch(env, workdir, *extra):
  cmd = [
    sys.executable,
    str(ROOT / "experiments/launch.py"),
    "--config",
    str(ROOT / "configs/tiny_test.py"),
    "--workdir",
    str(workdir),
    *FLAGS,
    *extra,
  ]
  proc = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc.stdout + proc.stderr


@pytest.mark.slow
def test_presample_then_train(tmp_path, launcher_env):
  out = _launch(launcher_env, tmp_path, "--mode=presample")
  assert "presampled previews" in out and not (tmp_path / "metrics.jsonl").exists()
  stored = datasets.load_from_disk(str(tmp_path / "presample/data"))
  assert len(stored) == 2 * 8 and all(len(r) == 3 for r in stored["preview_ids"])

  out = _launch(launcher_env, tmp_path)
  assert "resumed from checkpoint at step 0" in out and "| after RL |" in out
  lines = read.metrics(tmp_path)
  assert [x["step"] for x in lines] == [1, 2]
  for m in lines:  # G = 4 over K = 3 previews: subgroups of 2, 1, 1
    assert m["strategy/subgroup_size_min"] == 1 and m["strategy/subgroup_size_max"] == 2
    assert m["strategy/alloc_remainder"] == 1 and 1 <= m["strategy/distinct_previews"] <= 3
    assert "adv/offset_abs_mean" in m and "strategy/subgroup_reward_spread" in m
  table = read.strategy_previews(tmp_path)
  assert sum(r["rollouts"] for r in table) == 2 * 8 * 4
  results = read.results(tmp_path)
  assert results["after"]["sampling"]["strategy"]["num_previews"] == 3
