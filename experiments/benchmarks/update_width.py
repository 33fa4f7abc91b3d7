"""The length-aware update (``loss.length_buckets``) against the full-width one, on real batches.

SmolLM2-135M-Instruct (``tests/support/real_model.py``: all 30 layers, fp32), its tokenizer and
chat template, and the generated arithmetic prompts of ``configs/smollm2_arithmetic.py`` (one-stage
sampling; that config's update: micro-batches of 16 rows, vocabulary chunks of 16k, each group's
prompt once unless ``--share_prompt 0``; 64 prompt slots hold its chat prompts of 49–55 tokens). For
each policy of ``--warmstart_steps`` (the checkpoint as it is, then after the library's supervised
warm start on the worked solutions) the library's rollout samples ONE batch of B prompts × G
completions of at most T new tokens, ended by the model's own stop tokens; then the update runs on
that batch at the full width T (``loss.length_buckets`` = 0) and cut to its bucket width W
(``train.length_buckets.LengthAwareUpdate``), and on the cut batch's real tokens packed into rows of
each of ``--pack_widths`` slots (``loss.pack``, ``train.packing.Packer``), alternating, each from a
copy of the same state, ``--reps`` times. Reported: the best time of each (and each pair's ratio),
W, the longest and mean completion, the first call of each (its compilation) and the XLA
compilations, and the loss and gradient norm of each (equal up to float rounding). The rewards are
those of ``--reward``: by default 1 for completions of even length, since the instruct model boxes
almost no answer before a warm start (and a group of equal rewards has no gradient); the time of an
update does not depend on them.

  flock /tmp/grpo_heavy.lock python -m experiments.benchmarks.update_width     # real model, ~12 min
  python -m experiments.benchmarks.update_width --model tiny --prompts 2 --group 4 --new_tokens 8 \
    --warmstart_steps 0
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

from experiments.benchmarks import common as bc
from grpo_jax import sharding as shard_lib
from grpo_jax.config import files as config_file
from grpo_jax.rollout.one_stage import Policy, SampleSettings
from grpo_jax.train.length_buckets import LengthAwareUpdate, longest_completion
from grpo_jax.train.packing import Packer
from grpo_jax.train.run import setup
from grpo_jax.train.state import init_state
from grpo_jax.train.update import make_update_step
from grpo_jax.train.warmstart import warm_start

ROOT = pathlib.Path(__file__).resolve().parents[2]


def bench_config(args, path: str, warmstart_steps: int = 0):
  """``configs/smollm2_arithmetic.py`` on ``path``, one-stage, B × G prompts of P slots, T new
  tokens; ``length_buckets`` as given (the full-width side runs the same programs with 0);
  ``warmstart_steps`` supervised steps (one validation check, at the end, on 2 problems)."""
  overrides = [
    f"warmstart.max_steps={warmstart_steps}",
    f"warmstart.check_every={max(warmstart_steps, 1)}",
    "warmstart.check_problems=2",
    "strategy.enabled=False",
    "advantage.baseline=group",
    "hadw.enabled=False",
    f"sampling.prompts_per_step={args.prompts}",
    f"sampling.group_size={args.group}",
    f"sampling.max_new_tokens={args.new_tokens}",
    f"data.max_prompt_tokens={args.prompt_len}",
    f"loss.length_buckets={args.buckets}",
    f"loss.micro_batch_size={args.micro_batch_size}",
    f"loss.kl_coef={args.kl_coef}",
    f"loss.share_prompt={bool(args.share_prompt)}",
    "optimizer.warmup_steps=0",
    "logging.progress=False",
  ]
  spec = f"{ROOT / 'configs/smollm2_arithmetic.py'}:hf_path={path},warmstart=0"
  return config_file.load(spec, overrides)


def timed(update, state, batch) -> tuple[float, dict]:
  """(seconds, host metrics) of one update from a copy of ``state`` (the update
  donates its input; the copy is made before the clock starts)."""
  state = jax.block_until_ready(jax.tree.map(jnp.copy, state))
  t0 = time.perf_counter()
  new_state, metrics = update(state, batch)
  jax.block_until_ready((new_state, metrics))
  seconds = time.perf_counter() - t0
  return seconds, {k: float(np.asarray(v)) for k, v in jax.device_get(metrics).items()}


def measure(args, cfg, s, step, state, counter) -> dict:
  """One real batch sampled from ``state``'s policy, then the update on it at full width and
  cut, alternating (one compiling pair first, then ``args.reps`` timed pairs)."""
  policy = Policy(s.graphdef, state.params, s.mesh, SampleSettings.from_config(cfg.sampling))
  problems = s.task.train_problems(0, args.prompts)
  t0 = time.perf_counter()
  batch = s.rollout(policy, problems, jax.random.key(args.seed))
  sample_s = time.perf_counter() - t0
  lengths_N = batch.completion_mask_NxT.sum(1)
  task_reward_mean = float(batch.rewards_N.mean())
  if args.reward == "parity":  # a reward with signal, so the two updates' gradients are not 0
    rewards_N = (lengths_N % 2 == 0).astype(np.float32)
    batch = batch.replace(rewards_N=rewards_N, accuracy_N=rewards_N)

  sides = {
    "full": LengthAwareUpdate(lambda T: step, s.mesh, 0),
    "cut": LengthAwareUpdate(lambda T: step, s.mesh, args.buckets),
  }
  devices = shard_lib.batch_size_multiple(s.mesh)
  for width in pack_widths(args):  # padding-free: the cut batch's real tokens packed (loss.pack)
    loss = dataclasses.replace(cfg.loss, pack=True, pack_width=width)
    packer = Packer(loss, cfg.sampling.group_size, devices)
    sides[f"pack{width}"] = LengthAwareUpdate(lambda T: step, s.mesh, args.buckets, pack=packer)
  jax.block_until_ready(jax.tree.map(jnp.copy, state))  # compiles the copies before counting
  times = {name: [] for name in sides}
  first, compiles, out = {}, {}, {}
  for rep in range(args.reps + 1):
    for name, update in sides.items():
      before = counter.count
      seconds, metrics = timed(update, state, batch)
      if rep == 0:
        first[name], compiles[name], out[name] = seconds, counter.count - before, metrics
      else:
        times[name].append(seconds)
        assert counter.count == before, f"{name} recompiled"
      print(json.dumps({"side": name, "rep": rep, "seconds": seconds}), flush=True)

  m_full, m_cut = out["full"], out["cut"]
  best = {name: min(ts) for name, ts in times.items()}
  pairs = [f / c for f, c in zip(times["full"], times["cut"])]
  packed = {}
  for width in pack_widths(args):
    name, m = f"pack{width}", out[f"pack{width}"]
    packed.update(
      {
        f"{name}_s": best[name],
        f"{name}_vs_full": best["full"] / best[name],
        f"{name}_vs_cut": best["cut"] / best[name],
        f"{name}_rows": int(m["pack/rows"]),
        f"{name}_width": int(m["pack/width"]),
        f"{name}_fill": m["pack/fill"],
        f"{name}_first_s": first[name],
        f"{name}_loss": m["loss/total"],
        f"{name}_grad_norm": m["grad/norm"],
      }
    )
  return {
    "B": args.prompts,
    "G": args.group,
    "P": s.rollout.prompt_len,
    "T": batch.completion_mask_NxT.shape[1],
    "buckets": args.buckets,
    "width": int(m_cut["update/width"]),
    "full_width": int(m_full["update/width"]),
    "longest": longest_completion(batch.completion_mask_NxT),
    "len_mean": float(lengths_N.mean()),
    "len_max": int(lengths_N.max()),
    "truncated_frac": float(batch.truncated_N.mean()),
    "reward": args.reward,
    "task_reward_mean": task_reward_mean,
    "sample_s": sample_s,
    "full_s": best["full"],
    "cut_s": best["cut"],
    "ratio": best["full"] / best["cut"],
    "ratio_pairs": pairs,
    "ratio_paired_median": float(np.median(pairs)),
    "full_first_s": first["full"],
    "cut_first_s": first["cut"],
    "compiles_full": compiles["full"],
    "compiles_cut": compiles["cut"],
    "loss_full": m_full["loss/total"],
    "loss_cut": m_cut["loss/total"],
    "grad_norm_full": m_full["grad/norm"],
    "grad_norm_cut": m_cut["grad/norm"],
    "padded_fill": out["cut"].get("pack/padded_fill", _fill(batch, int(m_cut["update/width"]))),
    **packed,
  }


def _fill(batch, width: int) -> float:
  """Real tokens / slots of the batch cut to ``width`` response slots."""
  mask_NxL = batch.input_mask_NxL
  P = mask_NxL.shape[1] - batch.completion_mask_NxT.shape[1]
  return float(mask_NxL[:, : P + width].sum() / (mask_NxL.shape[0] * (P + width)))


def pack_widths(args) -> list[int]:
  """``--pack_widths`` as ints (0 = the cut batch's row width)."""
  return [int(w) for w in args.pack_widths.split(",") if w.strip()]


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--model", default="real", help="real | tiny | small | a HF directory")
  ap.add_argument("--prompts", type=int, default=8)
  ap.add_argument("--group", type=int, default=8)
  ap.add_argument("--prompt_len", type=int, default=64, help="data.max_prompt_tokens (slots)")
  ap.add_argument("--new_tokens", type=int, default=64)
  ap.add_argument("--buckets", type=int, default=4, help="loss.length_buckets of the cut side")
  ap.add_argument("--micro_batch_size", type=int, default=16)
  ap.add_argument(
    "--pack_widths",
    default="0,256",
    help="packed sides (loss.pack) by loss.pack_width, comma-separated; 0 = the cut row width; "
    "'' = none",
  )
  ap.add_argument("--kl_coef", type=float, default=0.0)
  ap.add_argument(
    "--share_prompt", type=int, default=1, help="loss.share_prompt (1, the config's, or 0)"
  )
  ap.add_argument("--reps", type=int, default=3, help="timed pairs (after one compiling pair)")
  ap.add_argument("--seed", type=int, default=0, help="the sampling key")
  ap.add_argument(
    "--reward",
    choices=("parity", "task"),
    default="parity",
    help="parity: 1 for completions of even length (the instruct model boxes no answer before "
    "a warm start, so the task's rewards are all 0 and so is the gradient); task: the verifier's",
  )
  ap.add_argument(
    "--warmstart_steps",
    default="0,10",
    help="policies to measure, by warm-start steps from the checkpoint (0 = as it is; the "
    "warm-started one answers briefly, the instruct model often runs to T)",
  )
  ap.add_argument("--json", default="")
  args = ap.parse_args()

  counter = bc.CompileCounter()
  info = bc.machine()
  print(json.dumps(info), flush=True)
  path = bc.model_dir(args.model)
  cfg = bench_config(args, path)
  s = setup(cfg, log=lambda *a: None)
  T = int(cfg.sampling.max_new_tokens)
  # One jitted update (the sampled T as its normaliser width), compiled once per width run.
  step = make_update_step(
    s.graphdef, s.optimizer, cfg, s.mesh, s.state_shardings, s.rollout.prompt_len, T
  )
  if cfg.mesh.constrain_activations:
    step = shard_lib.under_mesh(step, s.mesh)
  rows = []
  for warm in [int(w) for w in args.warmstart_steps.split(",")]:
    params = s.params
    if warm:  # the library's warm start on the worked solutions (configs/smollm2_arithmetic.py)
      t0 = time.perf_counter()
      ws_cfg = bench_config(args, path, warm)
      params, _ = warm_start(
        s.graphdef, shard_lib.replicate(params, s.mesh), s.task, ws_cfg, s.mesh, log=print
      )
      print(json.dumps({"warmstart_steps": warm, "seconds": time.perf_counter() - t0}), flush=True)
    shardings = s.state_shardings
    init = lambda p: init_state(p, s.optimizer, cfg)
    state = shard_lib.init_sharded(init, params, shardings.params, shardings)
    row = measure(args, cfg, s, step, state, counter)
    rows.append({"model": args.model, "warmstart_steps": warm, **row})
    print(json.dumps(rows[-1]), flush=True)
  cols = ["model", "warmstart_steps", "B", "G", "P", "T", "len_mean", "longest", "width"]
  packed = [f"pack{w}_{k}" for w in pack_widths(args) for k in ("rows", "s", "vs_full", "vs_cut")]
  print(bc.fmt_table(rows, cols + ["full_s", "cut_s", "ratio", "ratio_paired_median", *packed]))
  if args.json:
    with open(args.json, "w") as f:
      json.dump({"machine": info, "update_width": rows}, f, indent=2, default=str)


if __name__ == "__main__":
  main()
