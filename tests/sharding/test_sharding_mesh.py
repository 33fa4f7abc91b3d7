"""Changing the mesh changes where numbers live, not the numbers: two full RL steps (rollout,
grading, update) of configs/tiny_test.py on 1×8×1, 2×2×2 and 1×1×8 (data×fsdp×tensor) meshes of
8 simulated devices agree with one device (losses and parameters within 1e-5 relative)."""

import json
import pathlib

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from grpo_jax import data
from grpo_jax import sharding as shard_lib
from grpo_jax.config import files as config_file
from grpo_jax.train import modes

ROOT = pathlib.Path(__file__).resolve().parents[2]
OVERRIDES = [
  "eval.before=false",
  "eval.after=false",
  "logging.tensorboard=false",
  "logging.plot=false",
  "checkpoint.every=2",
  "loss.kl_coef=0.05",
  "optimizer.warmup_steps=0",
  "optimizer.learning_rate=1e-3",
]
MAKE_MESH = shard_lib.make_mesh


def _length_parity_rewards(self, problems, completions):
  """A reward with signal for an untrained model (which never solves Countdown): 1 for
  completions of even length. Deterministic in the sampled tokens, like the real grader."""
  return np.asarray([float(len(c) % 2 == 0) for c in completions], np.float32), {}


def _run(workdir, mesh, monkeypatch, num_devices=8):
  monkeypatch.setattr(data.CountdownTask, "rewards", _length_parity_rewards)
  n_data, fsdp, tensor = mesh
  cfg = config_file.load(
    str(ROOT / "configs/tiny_test.py"),
    OVERRIDES + [f"mesh.data={n_data}", f"mesh.fsdp={fsdp}", f"mesh.tensor={tensor}"],
  )
  monkeypatch.setattr(
    shard_lib, "make_mesh", lambda mesh_cfg: MAKE_MESH(mesh_cfg, jax.devices()[:num_devices])
  )
  modes.train(cfg, workdir, log=lambda *_: None)
  losses = [
    json.loads(x)["loss/total"] for x in (workdir / "metrics.jsonl").read_text().splitlines()
  ]
  state = ocp.StandardCheckpointer().restore(workdir / "checkpoints" / "2" / "default")
  return losses, state


def _rel(a, b):
  a = np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in jax.tree.leaves(a)])
  b = np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in jax.tree.leaves(b)])
  return float(np.linalg.norm(a - b) / np.linalg.norm(a))


@pytest.mark.slow
def test_meshes_agree_with_one_device(tmp_path, monkeypatch):
  ref_losses, ref_state = _run(tmp_path / "one", (1, 1, 1), monkeypatch, num_devices=1)
  assert len(ref_losses) == 2
  for mesh in ((1, 8, 1), (2, 2, 2), (1, 1, 8)):
    losses, state = _run(tmp_path / "x".join(map(str, mesh)), mesh, monkeypatch)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-7, err_msg=str(mesh))
    for key in ("params", "opt_state", "ref_params"):
      assert _rel(ref_state[key], state[key]) < 1e-5, (mesh, key)
    # The step moved the parameters: the comparison is not between two initial states.
    assert _rel(ref_state["params"], state["ref_params"]) > 1e-4
  rewards = [
    json.loads(x)["reward/mean"]
    for x in (tmp_path / "one" / "metrics.jsonl").read_text().splitlines()
  ]
  assert all(0.0 < r < 1.0 for r in rewards), rewards  # every step had signal
