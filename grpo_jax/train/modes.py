"""What each ``--mode`` does with an open run (``grpo_jax.train.run.open_run``): train, profile,
presample and eval; ``grpo_jax.runs.modes.MODES`` is the launcher's table of them (with export
and compile).

Training: the band (``data.pass_rate_band``) → the strategy previews (two-stage) → evaluation
before → ``steps`` RL steps (``grpo_jax.train.step.rl_step``), each followed by its checkpoint,
the preemption check, evaluation and re-profiling when due → evaluation after → results.json.
"""

from __future__ import annotations

import json
import time

import jax
from etils import epath

from grpo_jax.config.experiment import Experiment
from grpo_jax.data import pass_rates
from grpo_jax.eval import benchmarks as bench_lib
from grpo_jax.eval.runner import EvalLoop, benchmark_sets, eval_policy
from grpo_jax.rollout.one_stage import OneStageRollout
from grpo_jax.rundir import names
from grpo_jax.sampling import engine as engine_lib
from grpo_jax.sharding import distributed
from grpo_jax.train import console, plots, profile
from grpo_jax.train.preemption import Preempted, PreemptionWatch
from grpo_jax.train.run import Run, open_run, policy_params
from grpo_jax.train.state import TrainState
from grpo_jax.train.step import rl_step, rollouts


def progress_postfix(metrics: dict) -> dict:
  """The progress bar's numbers: reward, the share of groups with equal rewards (zero
  advantage, no gradient) and its complement, the informative share."""
  zero = metrics.get("adv/zero_std_frac", float("nan"))
  return {
    "reward": f"{metrics['reward/mean']:.3f}",
    "zero_std": f"{zero:.2f}",
    "informative": f"{1 - zero:.2f}",
  }


def evaluator(run: Run):
  """``evaluate(params, step) -> {benchmark: result}``, written to eval/<benchmark>_step<k>.json
  once (a resumed run reads existing files back instead of redoing them) and, with a metrics
  writer, logged (pass@k over steps)."""
  e, s = run.e, run.s
  B, G = e.sampling.prompts_per_step, e.sampling.group_size
  chunk = engine_lib.eval_chunk(B, G, e.eval.num_samples)  # what the engine is sized for
  rng = jax.random.fold_in(jax.random.PRNGKey(e.seed), 2**31 - 1)  # never a step key
  with_strategy = e.eval.with_strategy and s.rollout.name == "two_stage"
  kind = s.rollout if with_strategy else OneStageRollout(e, s.task)
  loop = EvalLoop.from_config(kind, e.eval, chunk, console.shows_progress(e.logging.progress))
  sets = benchmark_sets(s.task, e.eval, with_strategy)  # {result name: problems}

  def evaluate(params, step: int) -> dict:
    files = [bench_lib.result_path(run.workdir, n, step) for n in sets]
    if distributed.agree(all(p.exists() for p in files)):  # one decision for all processes
      out = {n: json.loads(p.read_text()) for n, p in zip(sets, files)}
    else:
      sc = e.sampling
      weights = s.to_sampler(params)  # the sampler layout: no weight gather at every token
      graphdef, slots = s.sampler_graphdef, sc.decode_slots
      policy = eval_policy(graphdef, weights, s.mesh, e.eval, sc.max_new_tokens, slots)
      # Multi-host: every process evaluates, process 0 writes.
      out_dir = run.workdir if distributed.is_primary() else None
      out = loop.evaluate_benchmarks(policy, sets, rng, out_dir, step)
    if run.writer is not None:
      run.writer.write_eval(step, out)
    return out

  return evaluate


def band(run: Run, profile_only: bool = False) -> epath.Path:
  """The difficulty profile and the learnable band (``grpo_jax.train.profile``): a fresh run
  (or ``--mode=profile``) profiles the current policy unless ``data.pass_rate_file`` names a
  profile; a resumed one reads the band's profile back. Returns the profile's path."""
  e, s, at = run.e, run.s, int(run.state.step)
  source = profile.band_source(e, run.workdir, at)
  if profile_only or (not source.exists() and not e.data.pass_rate_file):
    source = profile.profile_path(run.workdir, at)
    params = s.to_sampler(s.weights(run.state))
    rows = profile.Profiler(e, s.task, s.mesh, s.sampler_graphdef).run(params, source, at)
    run.log(pass_rates.level_table(rows, e.sampling.group_size, e.data.pass_rate_band or None))
  if not profile_only:
    run.record["data_band"] = profile.apply_band(e, s.task, source, log=run.log)
    run.write_json(names.CONFIG, run.record)
  return source


def after_step(run: Run, state: TrainState, step: int, evaluate) -> None:
  """What follows RL step ``step`` (1-based, done): its checkpoint when due or preempted
  (raising ``Preempted`` then), evaluation and re-profiling when due."""
  e, ckpt = run.e, run.ckpt
  preempted = run.watch.reached(step, ckpt)  # the same answer on every process
  if ckpt.due(step, last=step == e.steps) or preempted:
    # Off-policy: the batch drawn for step + 1 first, saved for a resume; a rollout that
    # failed leaves no checkpoint of step (the last one resumes, its batch kept).
    with run.watch.rollout_failure(ckpt, run.log, preempted):
      run.rollouts.save(step, keep_from=ckpt.latest_step())
    ckpt.save(step, state)
  if preempted:
    run.log(f"preempted: saving the checkpoint of step {step} and stopping")
    raise Preempted(step)  # open_run's exit waits for the save
  if e.eval.every_steps and step % e.eval.every_steps == 0 and step < e.steps:
    evaluate(run.s.weights(state), step)  # the final step is evaluated after the loop
  k = e.data.reprofile_every
  if k and step % k == 0 and step < e.steps:  # the band follows the policy
    run.rollouts.wait()  # off-policy: the next batch is drawn from the band it started with
    profiler = profile.Profiler(e, run.s.task, run.s.mesh, run.s.sampler_graphdef)
    params = run.s.to_sampler(run.s.weights(state))
    moved = profile.reprofile(profiler, params, run.workdir, step, run.log)
    run.write_json(f"{names.PROFILE}/{names.BAND_AT.format(step=step)}", moved)


def train_run(run: Run) -> dict:
  """``launch.py --mode=train`` on an open run: the RL loop from the run's state; returns
  results.json's dict."""
  e, s = run.e, run.s
  if e.data.pass_rate_band:
    band(run)
  s.rollout.prepare(run.policy, run.workdir, int(run.state.step), log=run.log)  # previews
  evaluate = evaluator(run)
  results = {"num_eval_problems": len(s.task.eval_problems(e.eval.num_problems))}
  if e.eval.before:
    results["before"] = next(iter(evaluate(s.weights(run.state), 0).values()))
  state, first = run.state, int(run.state.step)
  steps = console.progress_bar(
    range(first, e.steps), e.logging.progress, desc="rl", initial=first, total=e.steps
  )
  run.watch = PreemptionWatch()  # SIGTERM: checkpoint this step and stop
  run.rollouts = rollouts(run)
  try:
    for step in steps:
      state, metrics = rl_step(run, state, step)
      steps.set_postfix(progress_postfix(metrics))
      after_step(run, state, step + 1, evaluate)
  finally:
    run.watch.close()
    # Pending saves hold earlier, finite steps: finish them even when a step fails, before
    # waiting (at most rollout.join_timeout_s) for a rollout still drawing.
    run.ckpt.wait()
    run.rollouts.close()
    s.rollout.finish(run.workdir)  # strategy_previews.json (two-stage)
  if e.eval.after:
    results["after"] = next(iter(evaluate(s.weights(state), e.steps).values()))
  results["wall_time_s"] = time.time() - run.t_start
  run.write_json(names.RESULTS, results)
  if e.logging.plot and distributed.is_primary():
    plots.reward_curve(run.workdir)
  return results


def train(e: Experiment, workdir, log=print, allow_config_change: bool = False) -> dict:
  """Runs (or resumes) experiment ``e`` in ``workdir``; returns results.json's dict."""
  with open_run(e, workdir, "train", allow_config_change, log) as run:
    return train_run(run)


def profile_run(e: Experiment, workdir, log=print, allow_config_change: bool = False) -> epath.Path:
  """``launch.py --mode=profile``: the difficulty profile of the latest (or initial,
  warm-started) policy; returns its path."""
  with open_run(e, workdir, "profile", allow_config_change, log) as run:
    return band(run, profile_only=True)


def presample_run(e: Experiment, workdir, log=print, allow_config_change: bool = False):
  """``launch.py --mode=presample``: the initial (warm-started) policy checkpointed and the
  strategy previews drawn (METHODS §5); a later run resumes from there. Returns where the
  previews went (None for a one-stage rollout)."""
  with open_run(e, workdir, "presample", allow_config_change, log) as run:
    if e.data.pass_rate_band:
      band(run)
    return run.s.rollout.prepare(run.policy, run.workdir, int(run.state.step), log=run.log)


def evaluate_run(e: Experiment, workdir, step: int | None = None, log=print) -> dict:
  """``launch.py --mode=eval``: evaluates a run directory's checkpoint (the latest, or ``step``)
  or, with no checkpoint there, the policy as built (``model.hf_path`` or a fresh init)."""
  with open_run(e, workdir, "eval", log=log) as run:
    params, step = policy_params(run, step)
    results = evaluator(run)(params, step)
    if distributed.is_primary():
      run.log(bench_lib.summary_table(bench_lib.read_results(run.workdir)))
    return results
