"""The RL loop, top to bottom: mesh → data → model → shardings → restore / warm start → evaluate
before → loop (rollout → rewards → update → log → checkpoint) → evaluate after → results.

Re-running on the same workdir resumes from the last checkpoint: the train state holds params,
optimizer, HA-DW anchor, step, base RNG and data cursor, and per-step keys are pure functions of
(base RNG, step), so an interrupted run ends with the same parameters as an uninterrupted one.
"""

from __future__ import annotations

import json
import pathlib
import time

import jax
import numpy as np
from tqdm.auto import tqdm

from grpo_jax import config_file, data, models
from grpo_jax import sharding as shard_lib
from grpo_jax.eval.runner import evaluate
from grpo_jax.train import plots
from grpo_jax.train.checkpoint import Checkpointer, abstract_like
from grpo_jax.train.metrics import MetricsWriter, check_finite, to_host
from grpo_jax.train.optimizer import make_optimizer
from grpo_jax.train.rollout import SampleSettings, rollout
from grpo_jax.train.state import init_state, step_keys
from grpo_jax.train.update import make_update_step
from grpo_jax.train.warmstart import warm_start


def build_task(cfg):
  if cfg.data.task != "countdown":
    raise ValueError(f"unknown data.task {cfg.data.task!r}; available: ['countdown']")
  return data.CountdownTask.from_config(cfg)


def write_json(path: pathlib.Path, obj) -> None:
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def _cached_eval(path: pathlib.Path, run_eval) -> dict:
  """Evaluations are written once; a resumed run reads them back instead of redoing them."""
  if path.exists():
    return json.loads(path.read_text())
  result = run_eval()
  write_json(path, result)
  return result


def train(cfg, workdir: str | pathlib.Path, log=print) -> dict:
  """Runs (or resumes) the experiment ``cfg`` in ``workdir``; returns ``results.json``'s dict."""
  workdir = pathlib.Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  write_json(workdir / "config.json", {"config": cfg.to_dict(),
                                       "hash": config_file.content_hash(cfg)})
  t_start = time.time()

  # Mesh.
  mesh = shard_lib.make_mesh(cfg.mesh)
  B, G = cfg.sampling.prompts_per_step, cfg.sampling.group_size
  if (B * G) % shard_lib.batch_size_multiple(mesh):
    raise ValueError(f"B·G = {B * G} rows must divide over {shard_lib.batch_size_multiple(mesh)} "
                     "data-parallel devices")

  # Data.
  task = build_task(cfg)
  eval_problems = task.eval_problems(cfg.eval.num_problems)

  # Model.
  model_cfg = models.ModelConfig.from_config(cfg.model, vocab_size=len(task.tokenizer))
  graphdef, params = models.init_params(model_cfg, cfg.seed)
  optimizer = make_optimizer(cfg.optimizer)

  # Shardings (data parallel: state replicated, batch rows split).
  state_shapes = jax.eval_shape(lambda p: init_state(p, optimizer, cfg), params)
  state_shardings = jax.tree.map(lambda _: shard_lib.replicated(mesh), state_shapes)
  update_step = make_update_step(graphdef, optimizer, cfg, mesh, state_shardings,
                                 prompt_len=task.prompt_len)

  # Restore, or warm start and begin.
  ckpt = Checkpointer(workdir / "checkpoints", cfg.checkpoint.every, cfg.checkpoint.keep)
  metrics_writer = MetricsWriter(workdir, cfg.logging.tensorboard)
  if ckpt.latest_step() is not None:
    state = ckpt.restore(abstract_like(state_shapes, state_shardings))
    log(f"resumed from checkpoint at step {int(state['step'])}")
    metrics_writer.truncate_after(int(state["step"]))
  else:
    params = shard_lib.replicate(params, mesh)
    if cfg.warmstart.enabled:
      params, history = warm_start(graphdef, params, task, cfg, mesh, log=log)
      write_json(workdir / "warmstart.json", history)
    state = jax.device_put(init_state(params, optimizer, cfg), state_shardings)
    ckpt.save(0, state)
    ckpt.wait()

  chunk = B * G // cfg.eval.num_samples if (B * G) % cfg.eval.num_samples == 0 else B
  eval_rng = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 2**31 - 1)  # never a step key

  def run_eval(desc):
    return evaluate(graphdef, state["params"], task, eval_problems, cfg.eval,
                    cfg.sampling.max_new_tokens, eval_rng, mesh, chunk,
                    progress=cfg.logging.progress, desc=desc)

  results = {"num_eval_problems": len(eval_problems)}
  if cfg.eval.before:
    results["before"] = _cached_eval(workdir / "eval" / "before.json",
                                     lambda: run_eval("eval before"))

  # Loop.
  settings = SampleSettings.from_config(cfg.sampling)
  first = int(state["step"])
  bar = tqdm(range(first, cfg.steps), desc="rl", initial=first, total=cfg.steps,
             disable=not cfg.logging.progress)
  try:
    for step in bar:
      t0 = time.time()
      cursor = int(state["data_pos"])
      problems = task.train_problems(cursor, B)
      keys = step_keys(state["rng"], step)
      batch, info = rollout(graphdef, state["params"], task, problems, G, keys["sample"], settings,
                            mesh)
      t1 = time.time()
      state, metrics = update_step(state, shard_lib.shard_batch(batch, mesh))
      state["data_pos"] = jax.device_put(np.int32(cursor + B), state_shardings["data_pos"])
      metrics = to_host(metrics)
      check_finite(step + 1, metrics)
      metrics.update({"response/truncated_frac": info["response/truncated_frac"],
                      "time/rollout_s": t1 - t0, "time/update_s": time.time() - t1})
      metrics_writer.write(step + 1, metrics)
      bar.set_postfix(reward=f"{metrics['reward/mean']:.3f}")
      if ckpt.due(step + 1, last=step + 1 == cfg.steps):
        ckpt.save(step + 1, state)
  finally:
    # Pending saves hold earlier, finite steps: finish them even when a step fails.
    ckpt.close()
    metrics_writer.close()

  if cfg.eval.after:
    results["after"] = _cached_eval(workdir / "eval" / f"after_step{cfg.steps}.json",
                                    lambda: run_eval("eval after"))
  results["wall_time_s"] = time.time() - t_start
  write_json(workdir / "results.json", results)
  if cfg.logging.plot:
    plots.reward_curve(workdir)
  return results
