"""Waste in the decode loop, and what continuous batching (``sampling.decode_slots``) buys.

Two parts in one run; each prints a Markdown table, ``--json PATH`` writes every number.

  real       SmolLM2-135M-Instruct on its chat prompts of the arithmetic task
             (``configs/smollm2_arithmetic.py``, one-stage sampling, τ = 1): B × G rows at
             each T of ``--new_tokens``. The plain sampler's lengths give its decode waste
             (``waste.decode_waste``); then the plain sampler and continuous batching with
             each S of ``--slots`` run the same prompts with the same key, timed after a
             compiling call (best of ``--reps``): decode steps, waste, wall seconds, useful
             tokens/s (Σ lengths / wall) and rows equal to the plain sampler's.
  simulated  the long-tailed lengths of reasoning RL at a 4,096-token budget (``--sim_*``: a
             log-normal, capped at the budget, plus a share of rows that run to the cap), N
             rows in blocks of ``--sim_blocks`` (the devices' row blocks): the waste of both
             samplers from the lengths alone (``waste.plain_steps`` / ``continuous_steps``,
             the samplers' schedules, checked against the jitted loops by
             tests/sampling/test_continuous.py), over ``--sim_draws`` draws.

  JAX_PLATFORMS=cpu python -m experiments.benchmarks.decode_waste                    # ~10 min
  JAX_PLATFORMS=cpu python -m experiments.benchmarks.decode_waste --new_tokens 64 --slots 16
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

import jax
import numpy as np

from experiments.benchmarks import common as bc
from grpo_jax import data, models
from grpo_jax import sharding as shard_lib
from grpo_jax.config import files as config_file
from grpo_jax.sampling import Policy, SampleSettings, generate, waste

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_HF = pathlib.Path(os.path.expanduser("~/.cache/grpo_jax/smollm2-135m-instruct-hf"))


def real_setup(hf_dir: str, prompts: int, group: int):
  """(cfg, task, graphdef, params, mesh) of the arithmetic config on ``hf_dir``, one-stage."""
  cfg = config_file.load(
    f"{ROOT}/configs/smollm2_arithmetic.py:hf_path={hf_dir},warmstart=0",
    [
      "strategy.enabled=false",
      "advantage.baseline=group",
      "hadw.enabled=false",
      f"sampling.prompts_per_step={prompts}",
      f"sampling.group_size={group}",
    ],
  )
  task = data.build_task(cfg)
  graphdef, params = models.build_policy(cfg, len(task.tokenizer))
  mesh = shard_lib.make_mesh(cfg.mesh, jax.devices())
  return cfg, task, graphdef, shard_lib.replicate(params, mesh), mesh


def run_real(args) -> list[dict]:
  cfg, task, graphdef, params, mesh = real_setup(args.hf_dir, args.prompts, args.group)
  G = args.group
  problems = task.train_problems(0, args.prompts)
  prompts_BxP, mask_BxP = task.encode_prompts(problems)
  prompts_NxP, mask_NxP = np.repeat(prompts_BxP, G, 0), np.repeat(mask_BxP, G, 0)
  N, rows = len(prompts_NxP), []
  for T in args.new_tokens:
    plain = None
    for S in [0, *args.slots]:
      settings = SampleSettings(T, 1.0, 0, 1.0, S)
      policy = Policy(graphdef, params, mesh, settings)
      call = lambda p=policy: generate(p, task, prompts_NxP, mask_NxP, jax.random.key(0), G)
      t0 = time.perf_counter()
      out = call()  # compiles
      compile_s = time.perf_counter() - t0
      wall = bc.best_of(call, args.reps)
      lengths = out.mask_NxT.sum(1)
      plain = out if S == 0 else plain
      same = np.all(out.tokens_NxT == plain.tokens_NxT, axis=1)
      blocks = shard_lib.batch_size_multiple(mesh)
      model_steps = waste.continuous_steps(lengths, S, blocks) if S else waste.plain_steps(lengths)
      rows.append(
        {
          "T": T,
          "rows": N,
          "slots": S or N,
          "len_mean": float(lengths.mean()),
          "len_median": float(np.median(lengths)),
          "len_p90": float(np.percentile(lengths, 90)),
          "len_max": int(lengths.max()),
          "truncated_frac": float(out.truncated_N.mean()),
          "decode_steps": out.decode_steps,
          "schedule_steps": model_steps,  # the host schedule model's count: the same
          "waste": out.decode_waste,
          "compile_s": compile_s,
          "wall_s": wall,
          "useful_tok_s": float(lengths.sum() / wall),
          "rows_equal": int(same.sum()),
        }
      )
      print(json.dumps(rows[-1]), flush=True)
  return rows


def sim_lengths(rng, n: int, args) -> np.ndarray:
  """Log-normal lengths (median ``--sim_median``, log-σ ``--sim_sigma``) capped at the budget,
  and a share ``--sim_capped`` of rows at the budget (responses that never end)."""
  lengths = np.exp(rng.normal(np.log(args.sim_median), args.sim_sigma, n))
  lengths = np.minimum(np.maximum(np.round(lengths), 1), args.sim_budget).astype(np.int64)
  return np.where(rng.random(n) < args.sim_capped, args.sim_budget, lengths)


def run_simulated(args) -> list[dict]:
  rows = []
  for N in args.sim_rows:
    rng = np.random.default_rng(0)
    draws = [sim_lengths(rng, N, args) for _ in range(args.sim_draws)]
    plain = [waste.decode_waste(d, waste.plain_steps(d)) for d in draws]
    base = {"rows": N, "budget": args.sim_budget, "len_mean": float(np.mean(draws))}
    base["truncated_frac"] = float(np.mean([np.mean(d == args.sim_budget) for d in draws]))
    rows.append({**base, "slots": N, "waste": float(np.mean(plain))})
    rows[-1]["steps"] = float(np.mean([waste.plain_steps(d) for d in draws]))
    for frac in args.sim_slot_fracs:
      S = max(args.sim_blocks, int(N * frac) // args.sim_blocks * args.sim_blocks)
      steps = [waste.continuous_steps(d, S, args.sim_blocks) for d in draws]
      cont = [waste.decode_waste(d, st, S) for d, st in zip(draws, steps)]
      rows.append({**base, "slots": S, "waste": float(np.mean(cont))})
      rows[-1]["steps"] = float(np.mean(steps))
    for r in rows[-1 - len(args.sim_slot_fracs) :]:
      r["slot_steps_vs_plain"] = (
        r["slots"] * r["steps"] / (N * rows[-1 - len(args.sim_slot_fracs)]["steps"])
      )
      print(json.dumps(r), flush=True)
  return rows


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("--hf_dir", default=str(DEFAULT_HF))
  p.add_argument("--prompts", type=int, default=8)
  p.add_argument("--group", type=int, default=8)
  p.add_argument(
    "--new_tokens", type=lambda s: [int(x) for x in s.split(",") if x], default=[64, 256]
  )
  p.add_argument("--slots", type=lambda s: [int(x) for x in s.split(",") if x], default=[16])
  p.add_argument("--reps", type=int, default=2)
  p.add_argument("--skip_real", action="store_true")
  p.add_argument(
    "--sim_rows", type=lambda s: [int(x) for x in s.split(",") if x], default=[512, 8192]
  )
  p.add_argument(
    "--sim_slot_fracs", type=lambda s: [float(x) for x in s.split(",") if x], default=[0.5, 0.25]
  )
  p.add_argument("--sim_blocks", type=int, default=8)
  p.add_argument("--sim_budget", type=int, default=4096)
  p.add_argument("--sim_median", type=float, default=1200.0)
  p.add_argument("--sim_sigma", type=float, default=0.7)
  p.add_argument("--sim_capped", type=float, default=0.05)
  p.add_argument("--sim_draws", type=int, default=20)
  p.add_argument("--json", default="")
  args = p.parse_args(argv)
  result = {"machine": bc.machine(), "args": vars(args)}
  if not args.skip_real:
    result["real"] = run_real(args)
  result["simulated"] = run_simulated(args)
  if args.json:
    pathlib.Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
  sys.exit(main())
