"""The real launcher with bf16 compute over float32 master weights (``model.dtype = bfloat16``):
a KL run trains, checkpoints (float32 parameters and moments, a bf16 reference), resumes from
its checkpoint and exports a float32 Hugging Face checkpoint that transformers loads."""

import json
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

from grpo_jax import models

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAUNCH = [sys.executable, str(ROOT / "experiments/launch.py")]
CONFIG = ["--config", str(ROOT / "configs/tiny_test.py")]
OVERRIDES = [
  "--config.model.dtype=bfloat16",
  "--config.loss.kl_coef=0.05",
  "--config.eval.before=false",
  "--config.eval.after=false",
]


def _run(args, env):
  proc = subprocess.run(LAUNCH + args, env=env, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def _state(workdir: pathlib.Path, step: int) -> dict:
  return ocp.StandardCheckpointer().restore(workdir / "checkpoints" / str(step) / "default")


def _floats(tree) -> set:
  return {np.dtype(x.dtype) for x in jax.tree.leaves(tree) if np.issubdtype(x.dtype, np.floating)}


@pytest.mark.slow
def test_bf16_run_checkpoints_resumes_and_exports(tmp_path, launcher_env):
  run = tmp_path / "run"
  _run(CONFIG + ["--workdir", str(run), "--config.steps=2", *OVERRIDES], launcher_env())
  state = _state(run, 2)
  assert _floats(state["params"]) == _floats(state["opt_state"]) == {np.dtype(np.float32)}
  for path, x in jax.tree_util.tree_flatten_with_path(state["ref_params"])[0]:
    assert np.dtype(x.dtype) == (jnp.bfloat16 if x.ndim >= 2 else np.float32), path
  lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
  for m in lines:
    assert all(np.isfinite(v) for v in m.values() if isinstance(v, float)), m
    # The bf16 sampler and the bf16 trainer score the same tokens within bf16 rounding.
    assert m["rollout/logp_gap_max"] < 0.05, m["rollout/logp_gap_max"]
  # The KL term ran against the bf16 reference on every step. Its size is not asserted: the tiny
  # random policy often scores reward 0 on both steps (all advantages 0), so it need not move;
  # the bf16 reference's KL values are checked in tests/train/test_bf16_parity.py.
  assert all("loss/kl" in m and m["loss/kl"] >= 0 for m in lines)

  resumed = _run(CONFIG + ["--workdir", str(run), "--config.steps=3", *OVERRIDES], launcher_env())
  assert "resumed from checkpoint at step 2" in resumed.stdout
  after = _state(run, 3)
  assert _floats(after["params"]) == {np.dtype(np.float32)}
  for a, b in zip(jax.tree.leaves(state["ref_params"]), jax.tree.leaves(after["ref_params"])):
    np.testing.assert_array_equal(a, b)  # restored as saved, still frozen

  out = tmp_path / "hf"
  args = ["--workdir", str(run), "--mode=export", "--out", str(out), "--config.steps=3"]
  _run(CONFIG + args + OVERRIDES, launcher_env())
  assert json.loads((out / "config.json").read_text())["dtype"] == "float32"  # the masters
  hf = models.load_hf(str(out), dtype="bfloat16", param_dtype="float32", tokenizer=False)
  assert _floats(hf.params) == {np.dtype(np.float32)}
  for a, b in zip(jax.tree.leaves(hf.params), jax.tree.leaves(after["params"])):
    np.testing.assert_array_equal(a, np.asarray(b))  # exported without rounding
