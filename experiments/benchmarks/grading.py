"""Grading throughput of the math reward against the sampler's, on real-model completions.

Samples ``--completions`` completions with the library's rollout sampler (``sampling.generate``)
from a Hugging Face checkpoint (default SmolLM2-135M-Instruct, as ``tests/support/real_model.py``
builds it) on the generated arithmetic set with the checkpoint's chat template, ``--group_size``
samples per prompt, then grades them with ``rewards.math.score_batch`` at each worker count in
``--workers`` (0 = sized from the host: ``rewards.math.host_num_workers``). Three workloads,
each over the same completions and golds:

  as_sampled   the completions as the model wrote them (the real path on this set: an
               unboxed answer scores 0 without a verifier call)
  closed_form  each completion ends in ``\\boxed{x+0}``, x its own last integer: the worker
               pool's exact closed-form route against the integer gold
  sympy        gold ``\\sqrt{g^2}`` and answer ``\\boxed{\\sqrt{x^2}}``: math-verify's parse and
               comparison in the pool for every distinct wrong answer

Reports completions sampled per second (the compiling first call excluded) and completions
graded per second per workload and worker count (best of ``--reps``; pool start-up excluded and
reported). Grading runs between sampling and the update, so it stays off the step's critical
path only while graded/s ≫ sampled/s.

  python -m experiments.benchmarks.grading              # 1,000 completions, ~4 min on 2 cores
  python -m experiments.benchmarks.grading --workers 1,2,4 --json /tmp/grading.json
  python -m experiments.benchmarks.grading --keep /tmp/completions.jsonl  # sample, regrade later

``--keep PATH`` writes the sampled completions (with their golds and the sampling rate) to PATH,
or, when PATH exists, grades those instead of sampling again: pool scaling measured on a quiet
machine from completions sampled earlier.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import time

import jax
import numpy as np

from grpo_jax import models
from grpo_jax import sharding as shard_lib
from grpo_jax.config import base_config, finalize
from grpo_jax.data import build_task
from grpo_jax.models import smollm2
from grpo_jax.rewards import math as rm
from grpo_jax.sampling import Policy, SampleSettings, generate

DEFAULT_HF = smollm2.cache_dir() / smollm2.HF_NAME
LAST_INT = re.compile(r"-?\d+")


def math_config(hf_dir: str, max_new_tokens: int, max_prompt_tokens: int):
  cfg = base_config()
  cfg.model.hf_path = hf_dir
  cfg.data.task, cfg.data.train_set, cfg.data.eval_sets = "math", "arithmetic", ()
  cfg.data.template, cfg.data.chat_template = "boxed", "auto"
  cfg.data.max_prompt_tokens = max_prompt_tokens
  cfg.sampling.max_new_tokens = max_new_tokens
  cfg.mesh.data = 1
  return finalize(cfg)


def sample_completions(cfg, task, count: int, group_size: int, rows_per_call: int, seed: int):
  """(completions, golds, seconds per call after the first, rows per call, compile s)."""
  graphdef, params = models.build_policy(cfg)
  mesh = shard_lib.make_mesh(cfg.mesh, jax.devices()[:1])
  settings = SampleSettings(cfg.sampling.max_new_tokens, temperature=1.0)
  policy = Policy(graphdef, shard_lib.replicate(params, mesh), mesh, settings)
  prompts_per_call = rows_per_call // group_size
  completions, golds, times = [], [], []
  call = 0
  while len(completions) < count:
    rows = task.train_problems(call * prompts_per_call, prompts_per_call)
    rows = [row for row in rows for _ in range(group_size)]
    prompts_NxP, mask_NxP = task.encode_prompts(rows)
    t0 = time.perf_counter()
    out = generate(policy, task, prompts_NxP, mask_NxP, jax.random.key(seed + call), group_size)
    times.append(time.perf_counter() - t0)
    completions += list(out.completions)
    golds += [row["answer"] for row in rows]
    call += 1
  steady = times[1:] or times
  return completions[:count], golds[:count], float(np.median(steady)), times[0]


def workloads(completions: list[str], golds: list) -> dict[str, tuple[list[str], list]]:
  def last_int(text):
    found = LAST_INT.findall(text)
    return int(found[-1]) if found else 0

  ints = [last_int(c) for c in completions]
  return {
    "as_sampled": (completions, golds),
    "closed_form": ([f"{c}\n\\boxed{{{x}+0}}" for c, x in zip(completions, ints)], golds),
    "sympy": (
      [f"{c}\n\\boxed{{\\sqrt{{{x * x}}}}}" for c, x in zip(completions, ints)],
      [f"\\sqrt{{{int(g) ** 2}}}" for g in golds],
    ),
  }


def grade(completions, golds, workers: int, reps: int, timeout_s: float) -> dict:
  rm.shutdown()
  t0 = time.perf_counter()
  pool = rm.get_pool(workers)
  pool.check([("1", "1")] * pool.num_workers)  # start every worker before timing
  startup_s = time.perf_counter() - t0
  best, counts, rewards_N = float("inf"), {}, None
  for _ in range(reps):
    t0 = time.perf_counter()
    rewards_N, counts = rm.score_batch(completions, golds, timeout_s, num_workers=workers)
    best = min(best, time.perf_counter() - t0)
  return {
    "workers": pool.num_workers,
    "seconds": best,
    "graded_per_s": len(completions) / best,
    "startup_s": startup_s,
    "verifier_calls": counts["reward/verifier_calls"],
    "timeouts": counts["reward/timeouts"],
    "accuracy": float(np.mean(rewards_N)),
  }


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--hf_dir", default=str(DEFAULT_HF))
  p.add_argument("--completions", type=int, default=1000)
  p.add_argument("--group_size", type=int, default=8)
  p.add_argument("--rows_per_call", type=int, default=64)
  p.add_argument("--max_new_tokens", type=int, default=64)
  p.add_argument("--max_prompt_tokens", type=int, default=80)
  p.add_argument("--workers", default="1,2,0", help="comma-separated; 0 = from the host")
  p.add_argument("--reps", type=int, default=2)
  p.add_argument("--timeout_s", type=float, default=5.0)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--keep", default="", help="JSONL of sampled completions: written or reused")
  p.add_argument("--json", default="")
  args = p.parse_args(argv)
  if not pathlib.Path(args.hf_dir).is_dir():
    raise SystemExit(
      f"no checkpoint at {args.hf_dir}: build it with "
      "`python -m grpo_jax.models.smollm2 --hf`, or pass --hf_dir"
    )
  if args.rows_per_call % args.group_size:
    raise SystemExit("--rows_per_call must be a multiple of --group_size")
  keep = pathlib.Path(args.keep) if args.keep else None
  if keep is not None and keep.exists():
    rows = [json.loads(line) for line in keep.read_text().splitlines()]
    completions, golds = [r["completion"] for r in rows], [r["gold"] for r in rows]
    sampled_per_s, compile_s = rows[0]["sampled_per_s"], rows[0]["first_call_s"]
  else:
    cfg = math_config(args.hf_dir, args.max_new_tokens, args.max_prompt_tokens)
    completions, golds, call_s, compile_s = sample_completions(
      cfg, build_task(cfg), args.completions, args.group_size, args.rows_per_call, args.seed
    )
    sampled_per_s = args.rows_per_call / call_s
    if keep is not None:
      rates = {"sampled_per_s": sampled_per_s, "first_call_s": compile_s}
      keep.write_text(
        "".join(
          json.dumps({"completion": c, "gold": g, **rates}) + "\n"
          for c, g in zip(completions, golds)
        )
      )
  print(
    f"sampled {len(completions)} completions (T {args.max_new_tokens}, {args.rows_per_call} rows "
    f"a call): {sampled_per_s:.1f} completions/s after a first call of {compile_s:.1f} s; "
    f"host cores {rm.host_num_workers(0)} (pool size for workers=0)"
  )
  results = []
  print("\n| workload | workers | verifier calls | graded / s | × sampled / s | start-up s |")
  print("|---|---|---|---|---|---|")
  for name, (texts, gold_list) in workloads(completions, golds).items():
    for workers in [int(w) for w in args.workers.split(",") if w]:
      r = grade(texts, gold_list, workers, args.reps, args.timeout_s)
      r.update(workload=name, ratio=r["graded_per_s"] / sampled_per_s)
      results.append(r)
      print(
        f"| {name} | {r['workers']} | {r['verifier_calls']} | {r['graded_per_s']:.0f} | "
        f"{r['ratio']:.1f} | {r['startup_s']:.2f} |"
      )
  rm.shutdown()
  report = {
    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    "cores": os.cpu_count(),
    "load_avg_1m": os.getloadavg()[0],
    "hf_dir": args.hf_dir,
    "completions": len(completions),
    "max_new_tokens": args.max_new_tokens,
    "sampled_per_s": sampled_per_s,
    "first_call_s": compile_s,
    "mean_completion_chars": float(np.mean([len(c) for c in completions])),
    "grading": results,
  }
  if args.json:
    pathlib.Path(args.json).write_text(json.dumps(report, indent=1))
  return report


if __name__ == "__main__":
  main()
