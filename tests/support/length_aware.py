"""The update tests' length-aware set-up (``tests/train/test_update_width.py``,
``tests/train/test_packing.py``): a tiny model under SGD, its jitted update per setting, and the
synthetic batch with short completions; and the tiny config's training loop in this process."""

import functools
import pathlib

import jax
import numpy as np
import optax

from grpo_jax import sharding as shard_lib
from grpo_jax.config import files as config_file
from grpo_jax.rundir import read
from grpo_jax.train import modes
from grpo_jax.train.length_buckets import LengthAwareUpdate
from grpo_jax.train.state import init_state
from grpo_jax.train.update import make_update_step

ROOT = pathlib.Path(__file__).resolve().parents[2]
LONGEST = 5  # completion slots used of the tiny config's T = 12: bucket width 6 of (2, 3, 6, 12)


def short_batch(synthetic_batch, cfg, task, longest=LONGEST):
  """The tests' synthetic batch with every completion cut to at most ``longest`` tokens; the
  slots after a row's completion hold random tokens (the update must never read them)."""
  batch = synthetic_batch(cfg, task)
  T = batch.completion_mask_NxT.shape[1]
  mask_NxT = batch.completion_mask_NxT * (np.arange(T) < longest)[None]
  mask_NxT[0, longest - 1] = 1  # one row reaches ``longest`` exactly
  P = batch.tokens_NxL.shape[1] - T
  tokens_NxL = batch.tokens_NxL.copy()
  junk_NxT = np.random.default_rng(1).integers(0, len(task.tokenizer), mask_NxT.shape)
  tokens_NxL[:, P:] = np.where(mask_NxT > 0, tokens_NxL[:, P:], junk_NxT)
  input_mask_NxL = np.concatenate([batch.input_mask_NxL[:, :P], mask_NxT], axis=1)
  return batch.replace(
    tokens_NxL=tokens_NxL,
    input_mask_NxL=input_mask_NxL,
    completion_mask_NxT=mask_NxT,
    lengths_N=mask_NxT.sum(1),
  )


@functools.cache
def _model(overrides, num_devices):
  """(cfg, mesh, task, graphdef, state, shardings, optimizer), SGD at rate 0.5 (cached)."""
  from grpo_jax import data, models
  from tests.support.update_setup import load

  cfg = load(overrides)
  mesh = shard_lib.make_mesh(cfg.mesh, jax.devices()[:num_devices])
  task = data.build_task(cfg)
  model_cfg = models.ModelConfig.from_config(cfg.model, vocab_size=len(task.tokenizer))
  graphdef, params = models.init_params(model_cfg, cfg.seed)
  optimizer = optax.sgd(0.5)
  state = init_state(params, optimizer, cfg)
  if (
    state.ref_params is not None
  ):  # a reference away from the policy: KL and its gradient are not 0
    state = state.replace(ref_params=models.init_params(model_cfg, cfg.seed + 1)[1])
  shardings = jax.tree.map(lambda _: shard_lib.replicated(mesh), state)
  return cfg, mesh, task, graphdef, jax.device_put(state, shardings), shardings, optimizer


@functools.cache
def _step(overrides, num_devices, completion_len):
  """The jitted update of these settings (cached: tests with the same settings share its
  compiled widths)."""
  cfg, mesh, task, graphdef, _, shardings, optimizer = _model(overrides, num_devices)
  return make_update_step(
    graphdef, optimizer, cfg, mesh, shardings, task.prompt_len, completion_len
  )


def length_aware(overrides, buckets, num_devices=1, completion_len="sampled", log=None, pack=None):
  """(cfg, task, state, a LengthAwareUpdate with ``buckets`` and ``pack``).
  ``completion_len=None`` builds the jitted update without the sampled T (the normaliser then
  counts the cut width)."""
  cfg, mesh, task, _, state, *_ = _model(tuple(overrides), num_devices)

  def make_step(T):
    width = T if completion_len == "sampled" else completion_len
    return _step(tuple(overrides), num_devices, width)

  return cfg, task, state, LengthAwareUpdate(make_step, mesh, buckets, log, pack)


def run(update, state, batch, fresh):
  new_state, metrics = update(fresh(state), batch)
  return jax.device_get(new_state.params), {k: float(v) for k, v in to_host(metrics).items()}


def to_host(metrics):
  return {k: np.asarray(v) for k, v in jax.device_get(metrics).items()}


# Mixed rewards from the untrained tiny model (countdown's would all be 0: no gradient, no update).
# With a file ``fail_after`` holding n, the call after n more calls raises (and removes it).
PARITY = """
import pathlib
FAIL_AFTER = pathlib.Path(__file__).parent / "fail_after"

def parity(prompts, completions, **columns):
  if FAIL_AFTER.exists():
    left = int(FAIL_AFTER.read_text())
    if left == 0:
      FAIL_AFTER.unlink()
      raise ConnectionError("the grader went away")
    FAIL_AFTER.write_text(str(left - 1))
  return [len(c) % 2 for c in completions]
"""


def tiny_loop(tmp_path, name, *overrides):
  """The metrics of ``configs/tiny_test.py`` trained for 4 steps (+ overrides) in this process,
  rewarded by completion-length parity (``PARITY``) in ``tmp_path / name``."""
  (tmp_path / "parity.py").write_text(PARITY)
  cfg = config_file.load(
    str(ROOT / "configs/tiny_test.py"),
    [
      "steps=4",
      "eval.before=false",
      "eval.after=false",
      "logging.plot=false",
      "logging.tensorboard=false",
      "optimizer.warmup_steps=0",
      "optimizer.learning_rate=3e-3",
      f"reward.functions=('{tmp_path}/parity.py:parity',)",
      *overrides,
    ],
  )
  modes.train(cfg, tmp_path / name, log=lambda *_: None)
  return read.metrics(tmp_path / name)
