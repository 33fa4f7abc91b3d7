"""rollout.off_policy_steps = 1 when something fails: the rollout thread's wait is bounded and
comes after the pending checkpoints are saved; a rollout that fails at a checkpoint step leaves
no checkpoint without its batch; SIGTERM during a rollout exits 75 (also when the rollout then
fails); each interrupted run resumes to the uninterrupted run's metrics."""

import pathlib
import threading
import time

import pytest

from grpo_jax.config import files as config_file
from grpo_jax.rewards.functions import RewardError
from grpo_jax.rundir import read
from grpo_jax.runs import launcher
from grpo_jax.train import modes
from grpo_jax.train import step as step_lib
from grpo_jax.train.overlap import Prefetcher, prefetch_path
from grpo_jax.train.preemption import EXIT_CODE

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY = str(ROOT / "configs/tiny_test.py")

# Rewards with signal for the untrained tiny model. A file ``plan`` holding "<n> <action>" acts
# at the n-th call of this load (call n grades batch n - 1; calls 2, 3, ... run on the rollout
# thread): raise, send this process SIGTERM, both, or block until a file ``release`` exists.
GRADER = """
import os, pathlib, signal, time
HERE = pathlib.Path(__file__).parent
PLAN = HERE / "plan"
CALLS = [0]

def parity(prompts, completions, **columns):
  CALLS[0] += 1
  if PLAN.exists() and CALLS[0] == int(PLAN.read_text().split()[0]):
    action = PLAN.read_text().split()[1]
    PLAN.unlink()
    if action.startswith("sigterm"):
      os.kill(os.getpid(), signal.SIGTERM)
    if action.endswith("raise"):
      raise ConnectionError("the grader went away")
    while action == "block" and not (HERE / "release").exists():
      time.sleep(0.05)
  return [len(c) % 2 for c in completions]
"""


def _overrides(tmp_path, *extra) -> list[str]:
  (tmp_path / "grader.py").write_text(GRADER)
  return [
    "steps=4",
    "eval.before=false",
    "eval.after=false",
    "logging.plot=false",
    "logging.tensorboard=false",
    "optimizer.warmup_steps=0",
    "optimizer.learning_rate=3e-3",
    "rollout.off_policy_steps=1",
    "checkpoint.every=1",
    f"reward.functions=('{tmp_path}/grader.py:parity',)",
    *extra,
  ]


def _train(tmp_path, name, plan=None, log=lambda *_: None, *extra):
  if plan:
    (tmp_path / "plan").write_text(plan)
  cfg = config_file.load(TINY, _overrides(tmp_path, *extra))
  modes.train(cfg, tmp_path / name, log=log)


def _launch(tmp_path, name, plan=None) -> int:
  """The launcher in this process (its SIGTERM handler is the main thread's)."""
  if plan:
    (tmp_path / "plan").write_text(plan)
  argv = ["--config", TINY, "--workdir", str(tmp_path / name)]
  return launcher.main(argv + [f"--config.{o}" for o in _overrides(tmp_path)])


def _checkpoints(workdir) -> list[int]:
  return sorted(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())


def _same_run(a_dir, b_dir) -> None:
  drop = ("time/", "perf/", "memory/")
  a, b = read.metrics(a_dir), read.metrics(b_dir)
  assert [m["step"] for m in a] == [m["step"] for m in b] == [1, 2, 3, 4]
  for x, y in zip(a, b):
    assert {k: v for k, v in x.items() if not k.startswith(drop)} == {
      k: v for k, v in y.items() if not k.startswith(drop)
    }


def _let_rollouts_end(tmp_path) -> None:
  (tmp_path / "release").write_text("")
  for thread in threading.enumerate():
    if thread.name == "rollout":
      thread.join(60)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
  """The uninterrupted run's directory (4 steps, a checkpoint after each)."""
  tmp_path = tmp_path_factory.mktemp("whole")
  _train(tmp_path, "whole")
  return tmp_path / "whole"


def test_close_waits_a_bounded_time_for_a_rollout_that_does_not_end(tmp_path):
  release, logged = threading.Event(), []

  def draw(cursor, key, params):
    release.wait()
    return {"rows": cursor}, 1

  prefetch = Prefetcher(draw, lambda p: p, 1, tmp_path, join_timeout_s=0.2, log=logged.append)
  prefetch.start(1, 0, "k1", "θ0")
  t0 = time.perf_counter()
  prefetch.close()
  assert time.perf_counter() - t0 < 2.0
  assert len(logged) == 1 and "step 1's batch has not ended after 0.2 s" in logged[0]
  (thread,) = [t for t in threading.enumerate() if t.name == "rollout"]
  assert thread.daemon  # the process may exit while it runs
  release.set()
  thread.join(5)


def test_a_failed_rollout_writes_no_batch_and_the_last_checkpoints_batch_stays(tmp_path):
  def draw(cursor, key, params):
    if key == "bad":
      raise ConnectionError("the grader went away")
    return {"rows": cursor}, 3

  logged = []
  prefetch = Prefetcher(draw, lambda p: p, 1, tmp_path, log=logged.append)
  prefetch.start(2, 6, "k2", "θ1")
  prefetch.save(2, keep_from=0)
  prefetch.start(4, 12, "bad", "θ3")
  with pytest.raises(ConnectionError, match="went away"):
    prefetch.save(4, keep_from=2)
  assert prefetch_path(tmp_path, 2).exists() and not prefetch_path(tmp_path, 4).exists()
  prefetch.close()
  assert logged == []  # the error was the caller's, not logged again
  prefetch.start(4, 12, "k4", "θ3")
  prefetch.save(4, keep_from=2)  # the checkpoint of step 2 is still the latest
  assert prefetch_path(tmp_path, 2).exists() and prefetch_path(tmp_path, 4).exists()
  prefetch.start(6, 18, "k6", "θ5")
  prefetch.save(6, keep_from=4)
  assert not prefetch_path(tmp_path, 2).exists() and prefetch_path(tmp_path, 4).exists()
  prefetch.close()


@pytest.mark.xdist_group("overlap_errors")
def test_an_update_error_saves_the_checkpoints_then_waits_a_bounded_time(tmp_path, monkeypatch):
  """Update 3 fails while the rollout of batch 3 never ends: the checkpoint of step 2 is on
  disk before the loop waits for it, the wait ends after rollout.join_timeout_s, and the
  update's error is the run's."""
  real_check = step_lib.check_finite

  def fail_at_step_3(step, metrics):
    if step == 3:
      raise FloatingPointError("non-finite values at step 3")
    real_check(step, metrics)

  monkeypatch.setattr(step_lib, "check_finite", fail_at_step_3)
  workdir, seen = tmp_path / "run", []

  def log(message):
    if "has not ended" in message:
      seen.append((message, _checkpoints(workdir)))

  t0 = time.perf_counter()
  try:
    with pytest.raises(FloatingPointError, match="step 3"):
      _train(tmp_path, "run", "4 block", log, "rollout.join_timeout_s=1")
  finally:
    _let_rollouts_end(tmp_path)
  assert time.perf_counter() - t0 < 120
  ((message, saved),) = seen
  assert "step 3's batch has not ended after 1 s" in message
  assert saved[-1] == 2  # finalised (checkpoint.keep drops the oldest)


@pytest.mark.xdist_group("overlap_errors")
def test_a_rollout_failing_at_a_checkpoint_step_leaves_no_checkpoint_of_it(tmp_path, whole):
  """Batch 2 (drawn during update 1) fails to grade: the run stops with the grader's error and
  no checkpoint of step 2; step 1's, with its batch, resumes to the uninterrupted run."""
  with pytest.raises(RewardError, match="the grader went away"):
    _train(tmp_path, "split", "3 raise")
  split = tmp_path / "split"
  assert _checkpoints(split) == [0, 1]
  assert prefetch_path(split, 1).exists() and not prefetch_path(split, 2).exists()
  _train(tmp_path, "split")
  _same_run(whole, split)


@pytest.mark.xdist_group("overlap_errors")
@pytest.mark.parametrize("action", ["sigterm", "sigterm_raise"])
def test_sigterm_during_a_rollout_exits_75_and_resumes_to_the_same_run(tmp_path, whole, action):
  """SIGTERM while batch 1 is drawn (during update 0): status 75 with a checkpoint that holds
  what a resume needs; also when the grader then fails (killed with the process, say), where
  the run stops at its last checkpoint instead of with the grader's error."""
  if threading.current_thread() is not threading.main_thread():
    pytest.skip("the SIGTERM handler is set from the main thread only")
  assert _launch(tmp_path, "split", f"2 {action}") == EXIT_CODE
  split = tmp_path / "split"
  stopped = _checkpoints(split)[-1]
  assert stopped < 4
  if stopped > 0:
    assert prefetch_path(split, stopped).exists()
  assert _launch(tmp_path, "split") == 0
  _same_run(whole, split)
