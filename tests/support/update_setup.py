"""The update tests' set-up: the tiny model, a state, and a synthetic RolloutBatch (no sampling,
so each test compiles only the update). ``tests/plugin.py`` hands these functions out as session
fixtures of the same names (``load_cfg`` is :func:`load`, ``update_setup`` :func:`setup`); the
compiled updates are cached per process."""

import functools
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax

from grpo_jax import data, models
from grpo_jax import sharding as shard_lib
from grpo_jax.config import files as config_file
from grpo_jax.rollout.batch import RolloutBatch
from grpo_jax.train.optimizer import make_optimizer
from grpo_jax.train.state import init_state
from grpo_jax.train.update import make_update_step

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load(overrides=()):
  """configs/tiny_test.py + overrides, warmup off (the first step has the full rate)."""
  return config_file.load(
    str(ROOT / "configs/tiny_test.py"), ["optimizer.warmup_steps=0", *overrides]
  )


@functools.cache
def setup(overrides=(), num_devices=1, sgd=False):
  """(cfg, mesh, task, graphdef, state, update) for configs/tiny_test.py + overrides (cached:
  ``run_update`` copies the state, so one compiled update serves every test with these
  settings). ``sgd``: plain SGD at rate 1, so θ0 − θ1 is the gradient; else the config's AdamW."""
  cfg = load(tuple(overrides))
  mesh = shard_lib.make_mesh(cfg.mesh, jax.devices()[:num_devices])
  task = data.build_task(cfg)
  model_cfg = models.ModelConfig.from_config(cfg.model, vocab_size=len(task.tokenizer))
  graphdef, params = models.init_params(model_cfg, cfg.seed)
  optimizer = optax.sgd(1.0) if sgd else make_optimizer(cfg.optimizer)
  state = init_state(params, optimizer, cfg)
  shardings = jax.tree.map(lambda _: shard_lib.replicated(mesh), state)
  state = jax.device_put(state, shardings)
  spec = models.lora.LoraSpec.from_config(cfg.model.lora)  # LoRA: the update runs the adapted
  model = graphdef if spec is None else models.lora.adapt(graphdef, params, spec)
  update = make_update_step(model, optimizer, cfg, mesh, shardings, task.prompt_len)
  return cfg, mesh, task, graphdef, state, update


def synthetic_batch(cfg=None, task=None, seed=0):
  """A RolloutBatch of B·G rows of random tokens with unequal completion lengths and mixed
  rewards per group."""
  cfg = load() if cfg is None else cfg
  task = data.build_task(cfg) if task is None else task
  rng = np.random.default_rng(seed)
  B, G = cfg.sampling.prompts_per_step, cfg.sampling.group_size
  N, P, T = B * G, task.prompt_len, cfg.sampling.max_new_tokens
  V = len(task.tokenizer)
  lengths_N = rng.integers(1, T + 1, N)
  mask_NxT = (np.arange(T)[None] < lengths_N[:, None]).astype(np.int32)
  completion_NxT = np.where(mask_NxT > 0, rng.integers(0, V, (N, T)), task.pad_id)
  tokens_NxL = np.concatenate([rng.integers(0, V, (N, P)), completion_NxT], axis=1)
  rewards_N = rng.integers(0, 2, N).astype(np.float32)
  rewards_N[::G], rewards_N[1::G] = 0.0, 1.0  # every group has signal
  group_ids_N = np.repeat(np.arange(B, dtype=np.int32), G)
  return RolloutBatch(
    tokens_NxL=tokens_NxL,
    input_mask_NxL=np.concatenate([np.ones((N, P), np.int32), mask_NxT], axis=1),
    completion_mask_NxT=mask_NxT,
    sample_logps_NxT=np.zeros((N, T), np.float32),
    rewards_N=rewards_N,
    group_ids_N=group_ids_N,
    subgroup_ids_N=group_ids_N.copy(),
    truncated_N=np.zeros(N, bool),
    lengths_N=lengths_N,
    # Every fifth row stays in its group's baseline but out of the loss (overlong filter).
    loss_mask_N=(np.arange(N) % 5 != 0).astype(np.int32),
  )


def rollout_batch(num_rows=None, P=1, T=1, **fields):
  """A RolloutBatch of the given fields; the others (rows from ``group_ids_N`` unless
  ``num_rows``) default to one prompt per row, no text: tokens 0, masks 1, log-probs, rewards
  and lengths 0, not truncated, subgroups = groups."""
  N = len(fields["group_ids_N"]) if num_rows is None else num_rows
  L = fields["tokens_NxL"].shape[1] if "tokens_NxL" in fields else P + T
  T = fields["completion_mask_NxT"].shape[1] if "completion_mask_NxT" in fields else T
  group_ids_N = fields.get("group_ids_N", np.arange(N))
  defaults = {
    "tokens_NxL": np.zeros((N, L), np.int32),
    "input_mask_NxL": np.ones((N, L), np.int32),
    "completion_mask_NxT": np.ones((N, T), np.int32),
    "sample_logps_NxT": np.zeros((N, T), np.float32),
    "rewards_N": np.zeros(N, np.float32),
    "group_ids_N": group_ids_N,
    "subgroup_ids_N": np.asarray(group_ids_N).copy(),
    "truncated_N": np.zeros(N, bool),
    "lengths_N": np.zeros(N, np.int32),
  }
  return RolloutBatch(**{**defaults, **fields})


def fresh(state):
  """A copy of the state (the update donates its input)."""
  return jax.tree.map(jnp.copy, state)


def run_update(update, state, batch, mesh):
  """(new state on the host, metrics as floats) of one update from a copy of ``state``."""
  new_state, metrics = update(fresh(state), batch.to_device(mesh))
  host = jax.device_get(metrics)
  return jax.device_get(new_state), {k: float(np.asarray(v)) for k, v in host.items()}


def completion_logps(graphdef, params, batch, cfg, task):
  """log π of the batch's completion tokens under ``params`` (host float64)."""
  out = models.token_logps(
    graphdef,
    params,
    jnp.asarray(batch.tokens_NxL),
    jnp.asarray(batch.input_mask_NxL),
    cfg.sampling.temperature,
  )
  return np.asarray(out, np.float64)[:, task.prompt_len :]


def rel_diff(tree_a, tree_b):
  """||a − b|| / ||a|| over all leaves (float64)."""
  a = np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in jax.tree.leaves(tree_a)])
  b = np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in jax.tree.leaves(tree_b)])
  return float(np.linalg.norm(a - b) / np.linalg.norm(a))


def sgd_grad(overrides, batch, num_devices=1):
  """(gradient θ0 − θ1 of one SGD-rate-1 update, metrics)."""
  _, mesh, _, _, state, update = setup(tuple(overrides), num_devices, sgd=True)
  new_state, metrics = run_update(update, state, batch, mesh)
  grads = jax.tree.map(lambda a, b: a - b, jax.device_get(state.params), new_state.params)
  return grads, metrics
