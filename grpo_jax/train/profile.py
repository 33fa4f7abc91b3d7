"""The difficulty profile (``launch.py --mode=profile``) and the pass-rate band it feeds.

The run (``grpo_jax.train.modes.band``) profiles the initial, warm-started policy of a fresh
run with ``data.pass_rate_band`` set (unless ``data.pass_rate_file`` names a profile), and
``--mode=profile`` profiles a workdir's latest checkpoint (warm-starting a fresh one first).
``Profiler.run`` samples ``profile.num_samples`` one-stage completions of each of the first
``profile.num_problems`` training problems (the pool, in row order) at the run's sampling
settings (T, top-k, top-p: the groups RL will see) and writes one line per problem to
``<workdir>/profile/pass_rates.jsonl`` (``grpo_jax.data.pass_rates``). It runs in fixed chunks
of B·G rows, one compiled sampler shape, through the evaluation loop (multi-host as
evaluation: each process samples its share, process 0 writes); chunk i draws with
``fold_in(rng, i)`` and is appended once graded, so a killed profile resumes at its first
missing chunk and ends with the same file.

``apply_band`` restricts the training stream to the band of the newest profile at or before
a step: the first one (``data.pass_rate_file`` or the workdir's), then with
``data.reprofile_every = k`` the profile the loop writes every k steps
(``profile/pass_rates_step<k>.jsonl``, the same pool under the current policy), so the band
follows the policy and a resumed run reads the same band back.
"""

from __future__ import annotations

import jax
import numpy as np
from etils import epath

from grpo_jax.config.experiment import Experiment
from grpo_jax.data import pass_rates
from grpo_jax.eval.runner import EvalLoop
from grpo_jax.rollout.one_stage import OneStageRollout
from grpo_jax.rundir import paths, write
from grpo_jax.sampling.policy import Policy, SampleSettings
from grpo_jax.sharding import distributed
from grpo_jax.train import console

_RNG_SALT = 2**31 - 2  # the profile's key: fold_in(seed key, salt, step); no step key uses it


def profile_path(workdir, step: int = 0) -> epath.Path:
  """``profile/pass_rates.jsonl`` (step 0), ``profile/pass_rates_step<k>.jsonl`` after
  (``grpo_jax.rundir.paths.profile``)."""
  return paths.profile(workdir, step)


def pool(cfg: Experiment, task) -> list[dict]:
  """The problems a profile covers: the first ``profile.num_problems`` of the training pool."""
  rows = getattr(task, "train_pool", None)
  if rows is None:
    raise ValueError(
      f"data.task = {cfg.data.task!r} has no fixed training pool to profile (use 'math')"
    )
  n = cfg.profile.num_problems
  return list(rows[:n] if n else rows)


class Profiler:
  """Samples and grades the pool in chunks; see the module docstring."""

  def __init__(self, cfg: Experiment, task, mesh, graphdef):
    self.cfg, self.task, self.mesh, self.graphdef = cfg, task, mesh, graphdef
    n = cfg.profile.num_samples
    rows = cfg.sampling.prompts_per_step * cfg.sampling.group_size
    self.chunk = max(1, rows // n)  # problems per sampler call: B·G rows when n divides it
    self.loop = EvalLoop(OneStageRollout(cfg, task), n, self.chunk, progress=False)
    self.settings = SampleSettings.from_config(cfg.sampling)

  def run(self, params, out: epath.Path, step: int = 0) -> list[dict]:
    """Profiles the pool with ``params`` into ``out`` (resuming a partial file); returns its
    rows in pool order."""
    problems = pool(self.cfg, self.task)
    done = {r["id"]: r for r in pass_rates.read(out)} if out.exists() else {}
    policy = Policy(self.graphdef, params, self.mesh, self.settings)
    key = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(self.cfg.seed), _RNG_SALT), step)
    starts = range(0, len(problems), self.chunk)
    bar = console.progress_bar(starts, self.cfg.logging.progress, desc="profile")
    if distributed.is_primary():
      out.parent.mkdir(parents=True, exist_ok=True)
      if done:  # drop a half-written last line before appending after it
        write.json_lines(out, done.values())
    for i, start in enumerate(bar):
      chunk = problems[start : start + self.chunk]
      if all(str(p["id"]) in done for p in chunk):
        continue
      graded = self.loop.sample_and_grade(policy, chunk, jax.random.fold_in(key, i), "profile")
      rows = [pass_rates.profile_row(p, c) for p, c in zip(chunk, graded["correct_PxN"])]
      if distributed.is_primary():
        write.append_json_lines(out, rows)
      done.update((r["id"], r) for r in rows)
    return [done[str(p["id"])] for p in problems]


def band_source(cfg: Experiment, workdir, step: int) -> epath.Path:
  """The profile the band reads at ``step``: the newest re-profile at or before it, else
  ``data.pass_rate_file`` (default: the workdir's ``profile/pass_rates.jsonl``)."""
  k = cfg.data.reprofile_every
  if k and step >= k:
    for s in range(step - step % k, 0, -k):
      if profile_path(workdir, s).exists():
        return profile_path(workdir, s)
  return epath.Path(cfg.data.pass_rate_file) if cfg.data.pass_rate_file else profile_path(workdir)


def apply_band(cfg: Experiment, task, source: epath.Path, log=print) -> dict:
  """Restricts ``task``'s training stream to the band of the profile at ``source``; returns
  ``{"source", "band", "counts"}`` (kept / dropped per level), which is also logged."""
  if not source.exists():
    raise FileNotFoundError(
      f"data.pass_rate_band needs a profile at {source}: run launch.py --mode=profile on this "
      "workdir first, or set data.pass_rate_file"
    )
  band = cfg.data.pass_rate_band
  rows = pass_rates.read(source)
  ids = pass_rates.band_ids(rows, band)
  if not ids:
    raise ValueError(f"no profiled problem of {source} has a pass rate in {band}")
  task.restrict_train(ids)
  counts = pass_rates.band_counts(rows, band)
  lines = [f"{lv}: kept {c['kept']}, dropped {c['dropped']}" for lv, c in counts.items()]
  log(f"pass-rate band {band} of {source}:\n  " + "\n  ".join(lines))
  return {"source": str(source), "band": list(band), "counts": counts}


def reprofile(profiler: Profiler, params, workdir, step: int, log=print) -> dict:
  """The loop's curriculum step: profiles the pool under ``params`` and moves the band."""
  out = profile_path(workdir, step)
  rows = profiler.run(params, out, step)
  p = np.array([r["pass_rate"] for r in rows])
  log(f"re-profile at step {step}: mean pass rate {p.mean():.3f}")
  return apply_band(profiler.cfg, profiler.task, out, log)


__all__ = ["Profiler", "apply_band", "band_source", "pool", "profile_path", "reprofile"]
