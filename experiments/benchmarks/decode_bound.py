"""What bounds a decode step and an RL step of the benchmark models on this machine.

A decode step of B rows must (1) run the model's matmuls at M = B rows — every projection, the
MLP and the unembedding — and (2) read every cached key and value once. This script measures
both in isolation, in the same process, next to the machine's matmul ceiling:

* ``gemm_chain``: a ``fori_loop`` of decode steps that do only the model's GEMMs (same shapes,
  one distinct weight per layer as in the real model, a residual add between them so each
  depends on the last; no attention, no norms, no sampling). Its tokens/s is an upper bound
  for any sampler built on XLA:CPU's GEMMs: the real step does strictly more.
* ``read_gb_s``: the machine's streaming read bandwidth (a jitted sum over 256 MiB), and the
  bytes a step must read (weights + the KV cache at the mean context of a 32 + 128 run).
* ``sampler_tok_s_bound``: B / (GEMM chain + reading the KV cache at that bandwidth + the
  prefill's FLOPs at the ceiling, spread over the T steps): what a sampling run of
  ``sampler.py`` could reach if attention cost only its cache read and nothing else
  (norms, RoPE, softmax, the draw) cost anything.
* ``update_gemms_s``: the update's GEMMs alone — ``jax.grad`` of every projection and of the
  completion positions' unembedding at the update's shapes, accumulated over chunks of
  ``--micro_batch_size`` rows with the library's ``train.microbatch.accumulate_grads``; no
  attention, norms, RoPE, SiLU or optimizer.
* ``step_bound_s`` (``rl_step_bound``): one RL step of ``step.py`` at best: T decode
  steps of the GEMM chain, each reading the KV cache once, the prefill at the ceiling, and the
  update's GEMMs; each group's prompt (``--step_group`` rows) runs once in the prefill and in
  the update, as the library does. ``step.py --bound`` measures it in the same run as
  TRL's step.

The GEMM chains split their rows over the library's mesh, so with ``--cpu_devices 2`` each
core runs its half, as the sampler and the update do with one device per core.

  python -m experiments.benchmarks.decode_bound                    # tiny + small, B 64, ~1 min
  python -m experiments.benchmarks.decode_bound --cpu_devices 2    # one device per core
"""

from __future__ import annotations

import argparse
import functools
import json

import jax
import jax.numpy as jnp

from experiments.benchmarks import common as bc
from grpo_jax import sharding as shard_lib
from grpo_jax.models.shared_prompt import group_run
from grpo_jax.train import microbatch


def layer_shapes(name: str) -> list[tuple[int, int]]:
  """(in, out) of the GEMMs of one decoder layer at decode time: q, k, v, o, gate+up, down."""
  s = bc.SIZES[name]
  D, F, H, Hk = s["hidden"], s["mlp"], s["heads"], s["kv_heads"]
  Dh = D // H
  return [(D, H * Dh), (D, Hk * Dh), (D, Hk * Dh), (H * Dh, D), (D, 2 * F), (F, D)]


def _weights(name: str, shapes: list[tuple[int, int]]) -> dict:
  """Random fp32 GEMM weights of every layer (``shapes`` each) and the unembedding, replicated
  over the library's mesh."""
  s = bc.SIZES[name]
  key = jax.random.key(0)
  normal = lambda i, shape: 0.02 * jax.random.normal(jax.random.fold_in(key, i), shape)
  ws = {
    "layers": [[normal(16 * l + i, x) for i, x in enumerate(shapes)] for l in range(s["layers"])],
    "unembed": normal(9999, (s["hidden"], s["vocab"])),
  }
  return jax.device_put(ws, shard_lib.replicated(bc.mesh()))


def _rows(x):
  """``x`` with its rows split over the library's mesh (the sampler's and update's layout)."""
  return jax.device_put(x, shard_lib.batch_sharding(bc.mesh()))


@functools.cache
def gemm_chain_step_s(name: str, batch: int, steps: int = 32, reps: int = 5) -> float:
  """Seconds per decode step of the model's GEMMs alone (distinct weights per layer); measured
  once per process and shape (the sampler's and the RL step's bounds share it)."""
  D, F = bc.SIZES[name]["hidden"], bc.SIZES[name]["mlp"]
  ws = _weights(name, layer_shapes(name))

  def step(x_BxD, ws):
    for wq, wk, wv, wo, wgu, wd in ws["layers"]:
      q, k, v = x_BxD @ wq, x_BxD @ wk, x_BxD @ wv
      # k and v feed the carry (a negligible per-row sum: no traffic between devices), so
      # XLA cannot drop their GEMMs.
      kv_Bx1 = jnp.sum(k, axis=1, keepdims=True) + jnp.sum(v, axis=1, keepdims=True)
      x_BxD = x_BxD + q[:, :D] @ wo + kv_Bx1 * 1e-30
      h = x_BxD @ wgu
      x_BxD = x_BxD + (h[:, :F] * h[:, F:]) @ wd
    return x_BxD, x_BxD @ ws["unembed"]

  @jax.jit
  def loop(x_BxD, ws):
    def body(_, carry):
      x_BxD, acc_B = carry
      x_BxD, logits_BxV = step(x_BxD, ws)
      return x_BxD * 0.5, acc_B + logits_BxV[:, 0]

    return jax.lax.fori_loop(0, steps, body, (x_BxD, jnp.zeros((batch,))))

  x = _rows(jax.random.normal(jax.random.key(0), (batch, D)))
  run = lambda: jax.block_until_ready(loop(x, ws))
  run()
  return bc.best_of(run, reps) / steps


def update_gemm_chain_s(
  name: str, rows: int, P: int, T: int, micro: int, share: int = 1, reps: int = 3
) -> float:
  """Seconds of one update's GEMMs alone: the gradient of every projection (q, k, v, o, gate,
  up, down: dx and dW) and of the completion positions' unembedding, over ``rows`` rows of
  P + T positions, accumulated over chunks of ``micro`` rows (0 = one pass) and reduced over
  the devices once, as the library's update does (``microbatch.reduce_once``); with ``share`` > 1
  the prompt's P positions once per ``share`` rows (``loss.share_prompt``)."""
  s = bc.SIZES[name]
  D, F, H, Hk = s["hidden"], s["mlp"], s["heads"], s["kv_heads"]
  Dh, L = D // H, P + T
  shapes = [(D, H * Dh), (D, Hk * Dh), (D, Hk * Dh), (H * Dh, D), (D, F), (D, F), (F, D)]
  ws = _weights(name, shapes)

  def loss_fn(ws, x_MxLxD):
    M = x_MxLxD.shape[0]
    # The positions the update runs: each run's prompt once, every row's completion.
    prompt_x = x_MxLxD[:, :P].reshape(M // share, share, P, D)[:, 0].reshape(-1, D)
    x = jnp.concatenate([prompt_x, x_MxLxD[:, P:].reshape(M * T, D)])
    for wq, wk, wv, wo, wg, wu, wd in ws["layers"]:
      kv = jnp.tile((x @ wk) * (x @ wv), (1, H // Hk))  # every product reaches the loss
      x = x + (x @ wq + kv) @ wo
      x = x + ((x @ wg) * (x @ wu)) @ wd
    logits = x[-M * T :] @ ws["unembed"]
    return jnp.mean(logits * logits), ({}, {})

  k = microbatch.num_parts(rows, micro, "micro")
  blocks = microbatch.row_blocks(rows, k, jax.device_count())
  mesh = bc.mesh()  # one all-reduce of the gradient per update, as the library's
  update = jax.jit(lambda ws, x: microbatch.accumulate_grads(loss_fn, ws, x, k, blocks, mesh)[1])
  x = _rows(jax.random.normal(jax.random.key(1), (rows, L, D)))
  run = lambda: jax.block_until_ready(update(ws, x))
  run()
  return bc.best_of(run, reps)


def sampling_bound(
  name: str,
  rows: int,
  P: int,
  T: int,
  read_gb_s: float,
  ceiling: float,
  prefill_share: int = 1,
  steps: int = 32,
  reps: int = 5,
) -> dict:
  """A sampling run of ``rows`` rows, P prompt and T new tokens, at best: T steps of the GEMM
  chain (timed over ``steps`` steps, best of ``reps``), each reading the KV cache at its mean
  context once, and the prefill at the ceiling (one per ``prefill_share`` rows, as the
  sampler's ``prompt_share``)."""
  t = gemm_chain_step_s(name, rows, steps, reps)
  f = bc.flops_of(name)
  mem = step_bytes(name, rows, P + T / 2)
  kv_read_s = mem["kv_mb"] / 1e3 / read_gb_s
  prefill_s = rows / prefill_share * P * f.dense / 1e9 / ceiling
  return {
    "gemm_chain_ms_per_step": 1e3 * t,
    "gemm_chain_gflops": rows * (f.dense + f.unembed) / t / 1e9,
    "gemm_chain_tok_s_bound": rows / t,
    **mem,
    "read_ms_per_step": 1e3 * (mem["weights_mb"] + mem["kv_mb"]) / 1e3 / read_gb_s,
    "sampling_bound_s": T * (t + kv_read_s) + prefill_s,
  }


def rl_step_bound(
  name: str,
  rows: int,
  P: int,
  T: int,
  micro: int,
  read_gb_s: float,
  ceiling: float,
  group: int = 1,
) -> dict:
  """One RL step of ``rows`` completions in groups of ``group`` at best: the sampling bound
  plus the update's GEMMs, each prompt run once per device-local run of its group in the
  prefill (as the sampler does) and in the update (as ``loss.share_prompt`` does: per run
  inside a chunk of ``micro`` rows)."""
  devices = jax.device_count()
  k = microbatch.num_parts(rows, micro, "micro")
  share = group_run(group, rows, k, microbatch.row_blocks(rows, k, devices))
  prefill_share = group_run(group, rows, 1, microbatch.row_blocks(rows, 1, devices))
  sampling = sampling_bound(name, rows, P, T, read_gb_s, ceiling, prefill_share)
  sampling_s = sampling["sampling_bound_s"]
  update_s = update_gemm_chain_s(name, rows, P, T, micro, share)
  # 3 × forward: projections at every position run, unembedding at the completion's
  update_gflop = 3 * bc.flops_of(name).forward(rows / share * P + rows * T, rows * T, 0) / 1e9
  return {
    "model": name,
    "rows": rows,
    "micro": micro,
    "rows_per_prompt": share,
    "rows_per_prefill": prefill_share,
    "devices": devices,
    "sampling_bound_s": sampling_s,
    "update_gemms_s": update_s,
    "update_gemms_gflops": update_gflop / update_s,
    "step_bound_s": sampling_s + update_s,
  }


def read_bandwidth_gb_s(mib: int = 256, reps: int = 5) -> float:
  x = jnp.ones((mib * 2**20 // 4 // 1024, 1024), jnp.float32)
  f = jax.jit(lambda x: jnp.sum(x, axis=0))
  f(x).block_until_ready()
  return mib * 2**20 / bc.best_of(lambda: f(x).block_until_ready(), reps) / 1e9


def step_bytes(name: str, batch: int, context: float) -> dict:
  """fp32 bytes a decode step reads: all weights, and K and V over ``context`` slots."""
  s = bc.SIZES[name]
  weights = s["layers"] * sum(i * o for i, o in layer_shapes(name)) + s["hidden"] * s["vocab"]
  kv = s["layers"] * 2 * batch * s["kv_heads"] * (s["hidden"] // s["heads"]) * context
  return {"weights_mb": 4 * weights / 1e6, "kv_mb": 4 * kv / 1e6}


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--sizes", default="tiny,small")
  ap.add_argument("--batch", type=int, default=64)
  ap.add_argument("--prompt_len", type=int, default=32)
  ap.add_argument("--new_tokens", type=int, default=128)
  ap.add_argument("--step_rows", type=int, default=64, help="RL step bound: rows; 0 skips")
  ap.add_argument("--step_new_tokens", type=int, default=64, help="RL step bound: new tokens")
  ap.add_argument("--micro_batch_size", type=int, default=8, help="RL step bound: update chunk")
  ap.add_argument(
    "--step_group",
    type=int,
    default=8,
    help="RL step bound: rows per prompt, each prompt run once per device-local run of its "
    "group in the prefill and the update (1 = once per row)",
  )
  ap.add_argument(
    "--cpu_devices",
    type=int,
    default=0,
    help="CPU devices the GEMM chains split their rows over (0 = one)",
  )
  ap.add_argument("--json", default="")
  args = ap.parse_args()

  bc.set_cpu_devices(args.cpu_devices)
  info = bc.machine()
  info["ceiling"] = bc.matmul_ceiling()
  info["read_gb_s"] = read_bandwidth_gb_s()
  print(json.dumps(info), flush=True)
  B, P, rows, steps = args.batch, args.prompt_len, [], []
  ceiling, read = info["ceiling"]["gflops"], info["read_gb_s"]
  for name in filter(None, args.sizes.split(",")):
    bound = sampling_bound(name, B, P, args.new_tokens, read, ceiling)
    tok_s = B * args.new_tokens / bound.pop("sampling_bound_s")
    rows.append({"model": name, "B": B, **bound, "sampler_tok_s_bound": tok_s})
    print(json.dumps(rows[-1]), flush=True)
    if args.step_rows:
      R, T, micro = args.step_rows, args.step_new_tokens, args.micro_batch_size
      steps.append(rl_step_bound(name, R, P, T, micro, read, ceiling, args.step_group))
      print(json.dumps(steps[-1]), flush=True)
  print(f"\nceiling {ceiling:.1f} GFLOP/s, read {read:.1f} GB/s")
  if rows:
    print(bc.fmt_table(rows, list(rows[0])))
  if steps:
    print()
    print(bc.fmt_table(steps, list(steps[0])))
  if args.json:
    out = {
      "machine": info,
      "bounds": rows,
      "step_bounds": steps,
    }
    with open(args.json, "w") as f:
      json.dump(out, f, indent=2)


if __name__ == "__main__":
  main()
