"""Progress bars and log lines come from process 0 only (``grpo_jax.train.console``): with
``distributed.is_primary`` forced false (as on every other process of a multi-host job) bars are
disabled and the loop's ``log`` is never called."""

import types

import jax
import numpy as np
import pytest

from grpo_jax.eval.runner import EvalLoop
from grpo_jax.sharding import distributed
from grpo_jax.train import console, modes
from grpo_jax.train import run as run_lib


@pytest.fixture(params=[True, False], ids=["process0", "other"])
def primary(request, monkeypatch):
  monkeypatch.setattr(distributed, "is_primary", lambda: request.param)
  return request.param


def test_progress_bar_only_on_process_0(primary):
  assert console.progress_bar(range(3), True).disable is not primary
  assert console.progress_bar(range(3), False).disable  # off by config everywhere


class _FakeRollout:
  """``eval_sample``: every sample correct, length 1 (no model)."""

  def eval_sample(self, policy, problems, n, rng):
    rows = len(problems) * n
    return types.SimpleNamespace(
      rewards_N=np.ones(rows),
      lengths_N=np.ones(rows, np.int32),
      truncated_N=np.zeros(rows, bool),
      completions_N=["x"] * rows,
    )


def test_eval_bar_only_on_process_0(primary, capsys):
  progress = console.shows_progress(True)  # what the train layer hands the eval loop
  eval_loop = EvalLoop(_FakeRollout(), num_samples=2, chunk_problems=2, progress=progress)
  policy = types.SimpleNamespace(mesh=None)  # no model; one process
  out = eval_loop.sample_and_grade(policy, list(range(5)), jax.random.PRNGKey(0), desc="evalbar")
  assert out["correct_PxN"].shape == (5, 2)
  assert ("evalbar" in capsys.readouterr().err) is primary


def test_primary_log_mutes_other_processes(primary):
  lines = []
  console.primary_log(lines.append)("a line")
  assert lines == (["a line"] if primary else [])


class _Stop(Exception):
  pass


def test_train_logs_only_on_process_0(primary, monkeypatch, load_cfg, tmp_path):
  """The log callable ``train`` hands to ``load_data``, ``setup`` (and the rest of the loop)
  is muted."""

  def fake_load_data(cfg, log):
    log("from load_data")
    return "task", "rollout"

  def fake_setup(cfg, log, loaded):
    assert loaded == ("task", "rollout")
    log("from setup")
    raise _Stop

  monkeypatch.setattr(run_lib, "load_data", fake_load_data)
  monkeypatch.setattr(run_lib, "setup", fake_setup)
  lines = []
  with pytest.raises(_Stop):
    modes.train(load_cfg(), tmp_path, log=lines.append)
  assert lines == (["from load_data", "from setup"] if primary else [])
