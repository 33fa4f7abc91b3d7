"""How fast can a decode step of the benchmark models be on this machine? Two measured bounds.

A decode step of B rows must (1) run the model's matmuls at M = B rows — every projection, the
MLP and the unembedding — and (2) read every weight and every cached key and value once. This
script measures both in isolation, in the same process, next to the machine's matmul ceiling:

* ``gemm_chain``: a ``fori_loop`` of decode steps that do only the model's GEMMs (same shapes,
  one distinct weight per layer as in the real model, a residual add between them so each
  depends on the last; no attention, no norms, no sampling). Its tokens/s is an upper bound
  for any sampler built on XLA:CPU's GEMMs: the real step does strictly more.
* ``read_gb_s``: the machine's streaming read bandwidth (a jitted sum over 256 MiB), and the
  bytes a step must read (weights + the KV cache at the mean context of a 32 + 128 run), which
  give a second, independent lower bound on the step time.
* ``sampler_tok_s_bound``: B / (GEMM chain + reading the KV cache at that bandwidth + the
  prefill's FLOPs at the ceiling, spread over the T steps): what a whole sampling run of
  ``bench_sampler.py`` could reach if attention cost only its cache read and nothing else
  (norms, RoPE, softmax, the draw) cost anything.

* ``--gemms``: standalone rates of single GEMMs (M x K x N, operands hot in cache), by default
  the shapes of the tiny model's update (64 rows x 96 tokens = 6,144 positions, width 128).
* ``--attention_slots``: the decode attention alone (the library's ``attend_cached``: q·kᵀ,
  softmax, p·v, one distinct cache per layer) over S slots, per step of all layers, and the
  rate at which it reads its keys and values; its rows split over the library's mesh, so that
  ``--cpu_devices 2`` runs each core's half on that core (the other measurements run on one
  device whatever the count).

  python experiments/bench_decode_bound.py                    # tiny + small, B 64, ~1 min
  python experiments/bench_decode_bound.py --sizes small --batch 32

``docs/performance.md`` compares these bounds with the measured sampler and ``generate``.
"""

from __future__ import annotations

import argparse
import json

import bench_common as bc
import jax
import jax.numpy as jnp

from grpo_jax import sharding as shard_lib
from grpo_jax.models.layers import attend_cached


def layer_shapes(name: str) -> list[tuple[int, int]]:
  """(in, out) of the GEMMs of one decoder layer at decode time: q, k, v, o, gate+up, down."""
  s = bc.SIZES[name]
  D, F, H, Hk = s["hidden"], s["mlp"], s["heads"], s["kv_heads"]
  Dh = D // H
  return [(D, H * Dh), (D, Hk * Dh), (D, Hk * Dh), (H * Dh, D), (D, 2 * F), (F, D)]


def gemm_chain_step_s(name: str, batch: int, steps: int = 32, reps: int = 5) -> float:
  """Seconds per decode step of the model's GEMMs alone (distinct weights per layer)."""
  s = bc.SIZES[name]
  key = jax.random.key(0)
  normal = lambda i, shape: 0.02 * jax.random.normal(jax.random.fold_in(key, i), shape)
  shapes = layer_shapes(name)
  weights = [[normal(16 * l + i, shp) for i, shp in enumerate(shapes)] for l in range(s["layers"])]
  unembed = normal(9999, (s["hidden"], s["vocab"]))
  D, F = s["hidden"], s["mlp"]

  def step(x_BxD, ws):
    for wq, wk, wv, wo, wgu, wd in ws:
      q, k, v = x_BxD @ wq, x_BxD @ wk, x_BxD @ wv
      # k and v feed the carry (a negligible sum), so XLA cannot drop their GEMMs.
      x_BxD = x_BxD + q[:, :D] @ wo + (jnp.sum(k) + jnp.sum(v)) * 1e-30
      h = x_BxD @ wgu
      x_BxD = x_BxD + (h[:, :F] * h[:, F:]) @ wd
    return x_BxD, x_BxD @ unembed

  @jax.jit
  def loop(x_BxD, ws):
    def body(_, carry):
      x_BxD, acc_B = carry
      x_BxD, logits_BxV = step(x_BxD, ws)
      return x_BxD * 0.5, acc_B + logits_BxV[:, 0]

    return jax.lax.fori_loop(0, steps, body, (x_BxD, jnp.zeros((batch,))))

  x = jax.random.normal(key, (batch, D))
  run = lambda: jax.block_until_ready(loop(x, weights))
  run()
  return bc.best_of(run, reps) / steps


def attention_step(name: str, batch: int, slots: int, steps: int = 50, reps: int = 5) -> dict:
  """Seconds per decode step of every layer's cached attention over ``slots`` slots, alone."""
  s = bc.SIZES[name]
  H, Hk, Dh = s["heads"], s["kv_heads"], s["hidden"] // s["heads"]
  key = jax.random.key(0)
  normal = lambda i, shape: jax.random.normal(jax.random.fold_in(key, i), shape)
  rows = shard_lib.batch_sharding(bc.mesh())  # the sampler's layout: rows over the devices
  kv = [
    (normal(2 * l, (batch, Hk, Dh, slots)), normal(2 * l + 1, (batch, Hk, slots, Dh)))
    for l in range(s["layers"])
  ]
  kv = jax.device_put(kv, rows)
  mask_Bx1xS = jax.device_put(jnp.ones((batch, 1, slots), bool), rows)

  @jax.jit
  def loop(q_Bx1xHxDh, kv):
    def body(_, q):
      for k, v in kv:  # each layer's output feeds the next query, as in the model
        q = q + attend_cached(q, k, v, mask_Bx1xS, Dh**-0.5)
      return q

    return jax.lax.fori_loop(0, steps, body, q_Bx1xHxDh)

  q = jax.device_put(normal(999, (batch, 1, H, Dh)), rows)
  run = lambda: jax.block_until_ready(loop(q, kv))
  run()
  t = bc.best_of(run, reps) / steps
  kv_mb = 4 * s["layers"] * 2 * batch * Hk * Dh * slots / 1e6
  row = {"model": name, "B": batch, "slots": slots, "devices": jax.device_count()}
  row.update(ms_per_step=1e3 * t, kv_mb=kv_mb)
  return {**row, "read_gb_s": kv_mb / 1e3 / t}


def read_bandwidth_gb_s(mib: int = 256, reps: int = 5) -> float:
  x = jnp.ones((mib * 2**20 // 4 // 1024, 1024), jnp.float32)
  f = jax.jit(lambda x: jnp.sum(x, axis=0))
  f(x).block_until_ready()
  return mib * 2**20 / bc.best_of(lambda: f(x).block_until_ready(), reps) / 1e9


def gemm_rate(M: int, K: int, N: int, reps: int = 20) -> dict:
  a = jax.random.normal(jax.random.key(0), (M, K))
  b = jax.random.normal(jax.random.key(1), (K, N))
  f = jax.jit(lambda a, b: a @ b)
  f(a, b).block_until_ready()
  t = bc.best_of(lambda: f(a, b).block_until_ready(), reps)
  return {"gemm": f"{M}x{K}x{N}", "ms": 1e3 * t, "gflops": 2 * M * K * N / t / 1e9}


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
  ap.add_argument("--gemms", default="6144x128x384,6144x384x128,6144x128x128,128x6144x384")
  ap.add_argument("--attention_slots", default="", help="e.g. 96,160,544,1056; '' skips")
  ap.add_argument(
    "--cpu_devices", type=int, default=0, help="CPU devices for --attention_slots (0 = one)"
  )
  ap.add_argument("--json", default="")
  args = ap.parse_args()

  bc.set_cpu_devices(args.cpu_devices)
  info = bc.machine()
  info["ceiling"] = bc.matmul_ceiling()
  info["read_gb_s"] = read_bandwidth_gb_s()
  print(json.dumps(info), flush=True)
  B, rows = args.batch, []
  context = args.prompt_len + args.new_tokens / 2  # mean number of slots a step attends over
  for name in filter(None, args.sizes.split(",")):
    t = gemm_chain_step_s(name, B)
    f = bc.flops_of(name)
    gemm_flops = B * (f.dense + f.unembed)
    mem = step_bytes(name, B, context)
    read_s = (mem["weights_mb"] + mem["kv_mb"]) / 1e3 / info["read_gb_s"]
    kv_read_s = mem["kv_mb"] / 1e3 / info["read_gb_s"]
    prefill_s = B * args.prompt_len * f.dense / 1e9 / info["ceiling"]["gflops"]
    rows.append({
      "model": name,
      "B": B,
      "gemm_chain_ms_per_step": 1e3 * t,
      "gemm_chain_gflops": gemm_flops / t / 1e9,
      "gemm_chain_tok_s_bound": B / t,
      **mem,
      "read_ms_per_step": 1e3 * read_s,
      "sampler_tok_s_bound": B / (t + kv_read_s + prefill_s / args.new_tokens),
    })  # fmt: skip
    print(json.dumps(rows[-1]), flush=True)
  print(f"\nceiling {info['ceiling']['gflops']:.1f} GFLOP/s, read {info['read_gb_s']:.1f} GB/s")
  if rows:
    print(bc.fmt_table(rows, list(rows[0])))
  gemms = [gemm_rate(*map(int, g.split("x"))) for g in filter(None, args.gemms.split(","))]
  if gemms:
    print()
    print(bc.fmt_table(gemms, ["gemm", "ms", "gflops"]))
  attention = [
    attention_step(name, B, int(S))
    for name in filter(None, args.sizes.split(","))
    for S in filter(None, args.attention_slots.split(","))
  ]
  if attention:
    print()
    print(bc.fmt_table(attention, list(attention[0])))
  if args.json:
    out = {"machine": info, "bounds": rows, "gemms": gemms, "attention": attention}
    with open(args.json, "w") as f:
      json.dump(out, f, indent=2)


if __name__ == "__main__":
  main()
