"""The RL loop, top to bottom: mesh → data → model → shardings → restore / warm start → evaluate
before → loop (rollout → rewards → update → log → checkpoint) → evaluate after → results.

Re-running on the same workdir resumes from the last checkpoint: the train state holds params,
optimizer, HA-DW anchor, step, base RNG and data cursor, and per-step keys are pure functions of
(base RNG, step), so an interrupted run ends with the same parameters as an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import json
import time

import jax
import numpy as np
from etils import epath

from grpo_jax import data, models, strategy
from grpo_jax import sharding as shard_lib
from grpo_jax.config import experiment, provenance, resume
from grpo_jax.config import files as config_file
from grpo_jax.data import pass_rates
from grpo_jax.eval import benchmarks as bench_lib
from grpo_jax.eval.runner import EvalLoop, benchmark_sets, eval_policy
from grpo_jax.rollout import dynamic_sampling, multihost
from grpo_jax.rollout.one_stage import OneStageRollout
from grpo_jax.rollout.overlap import Prefetcher
from grpo_jax.rollout.registry import build_rollout
from grpo_jax.rundir import names, paths, write
from grpo_jax.sampling import engine as engine_lib
from grpo_jax.sampling.policy import Policy, SampleSettings
from grpo_jax.sampling.weights import sampler_copy
from grpo_jax.sharding import distributed
from grpo_jax.train import autofit, console, fit, plots, profile, step_metrics
from grpo_jax.train.checkpoint import Checkpointer, abstract_like
from grpo_jax.train.length_buckets import LengthAwareUpdate
from grpo_jax.train.metrics import MetricsWriter, check_finite, to_host
from grpo_jax.train.optimizer import make_optimizer
from grpo_jax.train.packing import Packer, check_width
from grpo_jax.train.preemption import Preempted, PreemptionWatch
from grpo_jax.train.samples import step_samples
from grpo_jax.train.state import init_state, step_keys
from grpo_jax.train.update import check_shared_prompts, make_update_step
from grpo_jax.train.warmstart import warm_start


def write_json(path: epath.Path, obj) -> None:
  if not distributed.is_primary():  # multi-host: process 0 writes the run directory
    return
  write.json_file(path, obj)


@dataclasses.dataclass
class Setup:
  """What training and evaluation share: mesh, task, model, optimizer and shardings."""

  mesh: jax.sharding.Mesh
  task: object
  rollout: object  # the rollout kind (``grpo_jax.rollout.registry.ROLLOUTS``)
  graphdef: object
  params: dict
  optimizer: object
  state_shapes: dict
  state_shardings: dict
  sample_shardings: dict
  # params -> the sampler's copy: compute dtype, sampler layout (``sampling.weights``)
  to_sampler: object


def load_data(cfg, log=print) -> tuple:
  """``(task, rollout)``: the rows read and checked (a malformed row of the researcher's file
  raises ``DataError``), the rollout kind built on them, and ``loss.pack_width`` checked against
  the longest row it can give (``ConfigError``): before any model is built or file written."""
  task = data.build_task(cfg)
  rollout = build_rollout(cfg, task)  # one- or two-stage (METHODS §5) by name
  if cfg.loss.pack:
    check_width(cfg.loss.pack_width, rollout.prompt_len, fit.response_slots(cfg))
  log(rollout.describe())
  return task, rollout


def setup(cfg, log=print, loaded: tuple | None = None) -> Setup:
  """``loaded``: ``load_data``'s ``(task, rollout)`` when the caller has read the data."""
  cfg = experiment.build(cfg)
  # Mesh.
  mesh = shard_lib.make_mesh(cfg.mesh)
  B, G = cfg.sampling.prompts_per_step, cfg.sampling.group_size
  if (B * G) % shard_lib.batch_size_multiple(mesh):
    raise ValueError(
      f"B·G = {B * G} rows must divide over {shard_lib.batch_size_multiple(mesh)} "
      "data-parallel devices"
    )

  # Data.
  task, rollout = loaded or load_data(cfg, log)

  # Model.
  graphdef, params = models.build_policy(cfg, vocab_size=len(task.tokenizer))
  optimizer = make_optimizer(cfg.optimizer)

  # Shardings (logical-axis rules, grpo_jax.sharding.rules: FSDP × TP for the train state incl.
  # optimizer moments and reference model; tensor-only for the sampler; batch rows split).
  state_shapes = jax.eval_shape(lambda p: init_state(p, optimizer, cfg), params)
  state_shardings = shard_lib.state_shardings(state_shapes, mesh, shard_lib.rules_for(cfg.mesh))
  sample_shardings = shard_lib.state_shardings(
    state_shapes["params"], mesh, shard_lib.rules_for(cfg.mesh, "sample")
  )
  return Setup(
    mesh,
    task,
    rollout,
    graphdef,
    params,
    optimizer,
    state_shapes,
    state_shardings,
    sample_shardings,
    sampler_copy(cfg.model.dtype, sample_shardings),
  )


def fit_update(cfg, s: Setup, log=print):
  """(``cfg`` with its auto keys resolved, ``s`` with the graphdef of its remat, {T: the
  compiled update}): the update at the sampled width T compiled on the run's mesh and
  shardings, checked against the devices' memory (``grpo_jax.train.fit``, ``autofit``); raises
  ``fit.DoesNotFit`` naming its bytes."""
  cfg = experiment.build(cfg)
  P, T = s.rollout.prompt_len, fit.response_slots(cfg)
  graphdef = lambda e: autofit.with_remat(s.graphdef, s.params, e.model.remat)

  def build(e):
    return make_update_step(graphdef(e), s.optimizer, e, s.mesh, s.state_shardings, P, T)

  state = fit.abstract(s.state_shapes, s.state_shardings)
  lower_mesh = s.mesh if cfg.mesh.constrain_activations else None
  shapes = autofit.UpdateShapes(build, state, P, T, s.mesh, lower_mesh)
  # vLLM (the process's one engine) starts here: on a CPU host its memory leaves the budget.
  held = engine_lib.build_engine(cfg).host_bytes()
  e, fitted = autofit.fit_update(cfg, shapes, autofit.vocab_size(s.params), log, held)
  return e, dataclasses.replace(s, graphdef=graphdef(e)), {T: fitted}


def _evaluator(cfg, s: Setup, workdir: epath.Path):
  """``run_eval(params, step) -> {benchmark: result}``, written to eval/<benchmark>_step<k>.json
  once: a resumed run reads existing files back instead of redoing them."""
  B, G = cfg.sampling.prompts_per_step, cfg.sampling.group_size
  chunk = engine_lib.eval_chunk(B, G, cfg.eval.num_samples)  # what the engine is sized for
  rng = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 2**31 - 1)  # never a step key
  with_strategy = cfg.eval.with_strategy and s.rollout.name == "two_stage"
  kind = s.rollout if with_strategy else OneStageRollout(cfg, s.task)
  loop = EvalLoop.from_config(kind, cfg.eval, chunk, console.shows_progress(cfg.logging.progress))
  sets = benchmark_sets(s.task, cfg.eval, with_strategy)  # {result name: problems}

  def run_eval(params, step: int) -> dict:
    paths = [bench_lib.result_path(workdir, n, step) for n in sets]
    if distributed.agree(all(p.exists() for p in paths)):  # one decision for all processes
      return {n: json.loads(p.read_text()) for n, p in zip(sets, paths)}
    sc = cfg.sampling
    weights = s.to_sampler(params)  # the sampler layout: no weight gather at every token
    policy = eval_policy(s.graphdef, weights, s.mesh, cfg.eval, sc.max_new_tokens, sc.decode_slots)
    # Multi-host: every process evaluates, process 0 writes.
    out_dir = workdir if distributed.is_primary() else None
    return loop.evaluate_benchmarks(policy, sets, rng, out_dir, step)

  return run_eval


def policy_params(cfg, s: Setup, workdir: paths.PathLike, step: int | None, log=print):
  """``(params, step)``: a run directory's checkpoint (the latest, or ``step``) or, with no
  checkpoint there, the policy as built (``model.hf_path`` or a fresh init) at step 0."""
  workdir = epath.Path(workdir)
  ckpt = Checkpointer(workdir / names.CHECKPOINTS, cfg.checkpoint.every, cfg.checkpoint.keep)
  if ckpt.latest_step() is not None:
    step = ckpt.latest_step() if step is None else step
    params = ckpt.restore(abstract_like(s.state_shapes, s.state_shardings), step)["params"]
    log(f"policy: checkpoint step {step} of {workdir}")
  else:
    step = 0 if step is None else step
    params = shard_lib.place(s.params, s.state_shardings["params"])
    log(f"no checkpoint in {workdir}; the policy as built")
  ckpt.close()
  return params, step


def evaluate_run(cfg, workdir: paths.PathLike, step: int | None = None, log=print) -> dict:
  """``launch.py --mode=eval``: evaluates a run directory's checkpoint (the latest, or ``step``)
  or, with no checkpoint there, the policy as built (``model.hf_path`` or a fresh init).
  ``log`` prints on process 0 only."""
  cfg = experiment.build(cfg)
  workdir = epath.Path(workdir)
  log = console.primary_log(log)
  s = setup(cfg, log=log)
  params, step = policy_params(cfg, s, workdir, step, log)
  results = _evaluator(cfg, s, workdir)(params, step)
  if distributed.is_primary():
    log(bench_lib.summary_table(bench_lib.read_results(workdir)))
  return results


def progress_postfix(metrics: dict) -> dict:
  """The progress bar's numbers: reward, the share of groups with equal rewards (zero
  advantage, no gradient) and its complement, the informative share."""
  zero = metrics.get("adv/zero_std_frac", float("nan"))
  return {
    "reward": f"{metrics['reward/mean']:.3f}",
    "zero_std": f"{zero:.2f}",
    "informative": f"{1 - zero:.2f}",
  }


def train(
  cfg,
  workdir: paths.PathLike,
  log=print,
  presample_only: bool = False,
  allow_config_change: bool = False,
  profile_only: bool = False,
) -> dict:
  """Runs (or resumes) the experiment ``cfg`` in ``workdir``; returns ``results.json``'s dict.

  ``profile_only``: stop once the difficulty profile of the latest (or initial, warm-started)
  policy is written (``launch.py --mode=profile``; ``grpo_jax.train.profile``).
  ``presample_only``: stop once the initial (warm-started) policy has been checkpointed and the
  strategy previews drawn (``launch.py --mode=presample``); a later run resumes from there.
  A workdir with a checkpoint resumes only under the config it started with (up to the keys of
  ``grpo_jax.config.resume.RESUMABLE``) unless ``allow_config_change``, which records the change.
  ``log`` prints on process 0 only (every process runs the same loop and would repeat it).
  ``cfg``: the experiment, a loaded ConfigDict or its validated ``experiment.Experiment`` (built
  here once, and passed on).
  """
  cfg = experiment.build(cfg)
  if cfg.rollout.off_policy_steps and jax.process_count() > 1:
    raise ValueError(
      "config key rollout.off_policy_steps = 1 runs on one process: the rollout thread's "
      "collectives would interleave with the update's in a different order on each process"
    )
  workdir = epath.Path(workdir)
  log = console.primary_log(log)
  saved = resume.read(workdir)
  changes = resume.check(
    saved if resume.has_checkpoint(workdir) else None, cfg.to_dict(), workdir, allow_config_change
  )
  loaded = load_data(cfg, log)  # a bad row or pack width stops the run before any file
  workdir.mkdir(parents=True, exist_ok=True)
  if changes:
    log(
      f"resuming under a changed config (--allow_config_change):\n{resume.format_changes(changes)}"
    )
  record = resume.record(
    saved, cfg.to_dict(), config_file.content_hash(cfg), provenance.collect(), changes
  )
  if saved and "data_band" in saved:  # the band's counts stay when --mode=profile rewrites it
    record["data_band"] = saved["data_band"]
  write_json(workdir / names.CONFIG, record)
  t_start = time.time()
  s = setup(cfg, log=log, loaded=loaded)
  mesh, task, rollout, graphdef = s.mesh, s.task, s.rollout, s.graphdef
  params, optimizer, state_shardings = s.params, s.optimizer, s.state_shardings
  G = cfg.sampling.group_size
  ckpt = Checkpointer(workdir / names.CHECKPOINTS, cfg.checkpoint.every, cfg.checkpoint.keep)
  resume_step = ckpt.latest_step()

  # The update compiled at its widest batch: a run that does not fit stops here, before any
  # rollout or checkpoint; the auto keys resolve (grpo_jax.train.autofit). The loop runs this
  # executable at the sampled width. --mode=profile / presample run no update.
  fitted = {}
  if not (profile_only or presample_only):
    cfg, s, fitted = fit_update(cfg, s, log)
    graphdef = s.graphdef

  def make_step(completion_len: int):
    step_fn = make_update_step(
      graphdef, optimizer, cfg, mesh, state_shardings, rollout.prompt_len, completion_len
    )
    return shard_lib.under_mesh(step_fn, mesh) if cfg.mesh.constrain_activations else step_fn

  # The update on each batch cut to its longest completion (one compile per bucket width).
  packer = None
  if cfg.loss.pack:  # the forward passes over the real tokens packed into rows
    devices = shard_lib.batch_size_multiple(mesh)
    packer = Packer(cfg.loss, G, devices, jax.process_count())
  update_step = LengthAwareUpdate(make_step, mesh, cfg.loss.length_buckets, log, packer, fitted)

  # Restore, or warm start and begin.
  tracker = None
  if cfg.logging.wandb and distributed.is_primary():
    from grpo_jax.train.wandb_tracker import WandbTracker  # noqa: PLC0415 (optional)

    tracker = WandbTracker(cfg, workdir)
  metrics_writer = MetricsWriter(
    workdir,
    cfg.logging.tensorboard,
    enabled=distributed.is_primary(),
    resume_step=resume_step,
    tracker=tracker,
  )
  if resume_step is not None:
    state = ckpt.restore(abstract_like(s.state_shapes, state_shardings), resume_step)
    log(f"resumed from checkpoint at step {int(state['step'])}")
  else:
    if cfg.warmstart.enabled:
      params = shard_lib.replicate(params, mesh)
      params, history = warm_start(graphdef, params, task, cfg, mesh, log=log)
      write_json(workdir / names.WARMSTART, history)
    state = shard_lib.init_sharded(lambda p: init_state(p, optimizer, cfg), params, state_shardings)
    ckpt.save(0, state)
    ckpt.wait()
  # The difficulty profile and the learnable band (grpo_jax.train.profile): a fresh run (or
  # --mode=profile) profiles the initial, warm-started policy unless data.pass_rate_file names
  # a profile; a resumed one reads the band's profile back.
  if profile_only or cfg.data.pass_rate_band:
    at = int(state["step"])
    source = profile.band_source(cfg, workdir, at)
    if profile_only or (not source.exists() and not cfg.data.pass_rate_file):
      source = profile.profile_path(workdir, at)
      sample_params = s.to_sampler(state["params"])
      rows = profile.Profiler(cfg, task, mesh, graphdef).run(sample_params, source, at)
      log(pass_rates.level_table(rows, G, cfg.data.pass_rate_band or None))
    if profile_only:
      ckpt.close()
      metrics_writer.close()
      if tracker is not None:
        tracker.close()
      return {"profile": str(source)}
    record["data_band"] = profile.apply_band(cfg, task, source, log=log)
    write_json(workdir / names.CONFIG, record)
  policy = Policy(graphdef, state["params"], mesh, SampleSettings.from_config(cfg.sampling))
  presample = rollout.prepare(policy, workdir, int(state["step"]), log=log)  # the initial policy
  if presample_only:
    ckpt.close()
    metrics_writer.close()
    if tracker is not None:
      tracker.close()
    return {"presample": presample}

  run_eval = _evaluator(cfg, s, workdir)
  primary = lambda results: next(iter(results.values()))  # the first benchmark, for the table
  results = {"num_eval_problems": len(task.eval_problems(cfg.eval.num_problems))}

  def evaluate(params, step: int) -> dict:
    out = run_eval(params, step)
    metrics_writer.write_eval(step, out)  # pass@k over steps, to the tracker
    return out

  if cfg.eval.before:
    results["before"] = primary(evaluate(state["params"], 0))

  def draw(cursor: int, key, params):
    """One step's batch from data position ``cursor`` (DAPO shaping around the rollout,
    METHODS §4: dynamic sampling, overlong filter/penalty)."""
    sample_policy = policy.replace(params=s.to_sampler(params))
    rollout_fn = lambda problems, rng, p=sample_policy: rollout(p, problems, rng)
    return dynamic_sampling.sample_batch(
      # Multi-host: each process samples and grades only its own prompts' rows.
      *multihost.process_share(rollout_fn, task.train_problems, mesh, G, strategy.id_units(cfg)),
      cursor,
      key,
      cfg,
      row_multiple=shard_lib.batch_size_multiple(mesh),
      exchange=multihost.RowExchange(mesh),  # job-wide kept groups and metrics
    )

  # rollout.off_policy_steps = 1: the next step's batch is drawn, by a copy of the parameters
  # before this step's update, while the update runs (grpo_jax.rollout.overlap).
  copy_params = sampler_copy(cfg.model.dtype, s.sample_shardings, fresh=True)
  prefetch = Prefetcher(
    draw, copy_params, cfg.rollout.off_policy_steps, workdir, cfg.rollout.join_timeout_s, log
  )

  # Loop.
  first = int(state["step"])
  bar = console.progress_bar(
    range(first, cfg.steps), cfg.logging.progress, desc="rl", initial=first, total=cfg.steps
  )
  watch = PreemptionWatch()  # SIGTERM: checkpoint this step and stop (grpo_jax.train.preemption)

  def preempted_after(error: Exception) -> Preempted:
    """SIGTERM and a rollout that failed (its grader killed with the process, say): the run
    stops as preempted at its last checkpoint, which holds what a resume needs."""
    ckpt.wait()
    at = ckpt.latest_step()
    log(f"preempted; the rollout failed ({error!r}): the rerun resumes from step {at}")
    return Preempted(at)

  try:
    for step in bar:
      t0 = time.time()
      cursor = int(state["data_pos"])
      keys = step_keys(state["rng"], step)
      try:
        batch, consumed, rollout_m = prefetch.take(step, cursor, keys["sample"], state["params"])
      except Exception as e:
        if not watch.flag:
          raise
        raise preempted_after(e) from e
      if cfg.rollout.off_policy_steps and step + 1 < cfg.steps:  # by the params before update
        next_key = step_keys(state["rng"], step + 1)["sample"]
        prefetch.start(step + 1, cursor + consumed, next_key, state["params"])
      t1 = time.time()
      if cfg.loss.share_prompt:
        check_shared_prompts(batch, G, rollout.prompt_len)
      state, metrics = update_step(state, batch)
      state["data_pos"] = jax.device_put(np.int32(cursor + consumed), state_shardings["data_pos"])
      metrics = to_host(metrics)
      check_finite(step + 1, metrics)
      t2 = time.time()
      metrics.update(batch.metrics)  # response/*, strategy/* (two-stage), dapo/*, reward/<fn>/*
      metrics.update(task.load_metrics)  # data/*: rows dropped or skipped at load
      if cfg.data.pass_rate_band:
        metrics["data/band_problems"] = len(task.train_rows)
      metrics.update(rollout_m)  # time/rollout_s; overlap: its wait and rollout/staleness
      metrics.update({"time/update_s": t2 - t1, "time/step_s": t2 - t0})
      metrics.update(step_metrics.throughput(batch, rollout_m["time/rollout_s"], t2 - t1))
      metrics.update(step_metrics.peak_memory())
      metrics["optim/lr"] = step_metrics.learning_rate(cfg, step)
      metrics_writer.write(step + 1, step_metrics.active(metrics, cfg))
      metrics_writer.write_samples(
        step + 1, step_samples(batch, task, cfg.logging.samples_per_step)
      )
      bar.set_postfix(progress_postfix(metrics))
      preempted = watch.reached(step + 1, ckpt)  # the same answer on every process
      if ckpt.due(step + 1, last=step + 1 == cfg.steps) or preempted:
        # Off-policy: the batch drawn for step + 1 first, saved for a resume; a rollout that
        # failed leaves no checkpoint of step + 1 (the last one resumes, its batch kept).
        try:
          prefetch.save(step + 1, keep_from=ckpt.latest_step())
        except Exception as e:
          if not (preempted or watch.flag):  # SIGTERM may come while it waits for the batch
            raise
          raise preempted_after(e) from e
        ckpt.save(step + 1, state)
      if preempted:
        log(f"preempted: saving the checkpoint of step {step + 1} and stopping")
        raise Preempted(step + 1)  # the finally below waits for the save
      if cfg.eval.every_steps and (step + 1) % cfg.eval.every_steps == 0 and step + 1 < cfg.steps:
        evaluate(state["params"], step + 1)  # the final step is evaluated below
      k = cfg.data.reprofile_every
      if k and (step + 1) % k == 0 and step + 1 < cfg.steps:  # the band follows the policy
        prefetch.wait()  # off-policy: the next batch is drawn from the band it started with
        params_now = s.to_sampler(state["params"])
        profiler = profile.Profiler(cfg, task, mesh, graphdef)
        band = profile.reprofile(profiler, params_now, workdir, step + 1, log)
        write_json(workdir / names.PROFILE / names.BAND_AT.format(step=step + 1), band)
  finally:
    watch.close()
    # Pending saves hold earlier, finite steps: finish them even when a step fails, before
    # waiting (at most rollout.join_timeout_s) for a rollout still drawing.
    ckpt.close()
    prefetch.close()
    metrics_writer.close()
    rollout.finish(workdir)  # strategy_previews.json (two-stage)

  if cfg.eval.after:
    results["after"] = primary(evaluate(state["params"], cfg.steps))
  results["wall_time_s"] = time.time() - t_start
  write_json(workdir / names.RESULTS, results)
  if tracker is not None:
    tracker.close()
  if cfg.logging.plot and distributed.is_primary():
    plots.reward_curve(workdir)
  return results
