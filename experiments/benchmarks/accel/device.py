"""Shared pieces of ``accelerator.py`` and its two parts (``accel/update.py``,
``accel/generate.py``): the model shapes, the time budget, the device's measured ceilings and
the memory check."""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp

from experiments.benchmarks import common as bc
from grpo_jax import models

MIXED = {"dtype": "bfloat16", "param_dtype": "float32"}
TOY_MODEL = dict(vocab_size=512, num_heads=4, num_kv_heads=2, head_dim=16, rope_theta=1e6)
MODELS = {
  "qwen3-0.6b": dataclasses.replace(models.PRESETS["qwen3-0.6b"], **MIXED),
  "qwen3-1.7b": dataclasses.replace(models.PRESETS["qwen3-1.7b"], **MIXED),
  "toy-a": models.ModelConfig(hidden_dim=64, num_layers=2, mlp_dim=128, **TOY_MODEL, **MIXED),
  "toy-b": models.ModelConfig(hidden_dim=96, num_layers=3, mlp_dim=192, **TOY_MODEL, **MIXED),
}


class Budget:
  """Wall-clock seconds from the start; ``allows`` records what it turns down and why."""

  def __init__(self, seconds: float):
    self.seconds, self.t0, self.skipped = seconds, time.perf_counter(), []

  def left(self) -> float:
    return self.seconds - (time.perf_counter() - self.t0)

  def allows(self, what: str, estimate_s: float) -> bool:
    if estimate_s <= self.left():
      return True
    self.skip(what, f"time: needs ~{estimate_s:.0f} s, {max(self.left(), 0):.0f} s of budget left")
    return False

  def skip(self, what: str, reason: str) -> None:
    self.skipped.append({"what": what, "reason": reason})
    print(f"skipped {what}: {reason}", flush=True)


def error_text(e: BaseException) -> str:
  return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"


# ------------------------------------------------------------------ device ceilings


def timed(fn, reps: int) -> float:
  fn()  # compile and warm up
  return bc.best_of(fn, reps)


def copy_gb_s(mib: int, loops: int = 10, reps: int = 3) -> dict:
  """Copy bandwidth: y ← y + 1 over n bf16 elements reads and writes 2·n bytes per pass; the
  better of one jitted pass and a ``fori_loop`` of ``loops`` passes (launch cost amortised)."""
  n = mib * 2**20 // 2
  x = jnp.ones((n,), jnp.bfloat16)
  one = jax.jit(lambda y: y + 1)
  many = jax.jit(lambda y: jax.lax.fori_loop(0, loops, lambda i, z: z + 1, y))
  t_one = timed(lambda: one(x).block_until_ready(), reps)
  t_many = timed(lambda: many(x).block_until_ready(), reps)
  moved = 2 * n * 2
  return {
    "copy_mib": mib,
    "copy_gb_s_single": moved / t_one / 1e9,
    "copy_gb_s_loop": loops * moved / t_many / 1e9,
    "copy_gb_s": max(moved / t_one, loops * moved / t_many) / 1e9,
  }


def matmul_tflops(sizes, chain: int = 8, reps: int = 3) -> dict:
  """bf16 matmul rate: ``chain`` dependent n×n products (float32 sums rounded to bf16, b scaled
  by n^-1/2 so values stay O(1)), 2n³ FLOPs each; the best size."""
  out = {}
  for n in sizes:
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.bfloat16)
    b = (jax.random.normal(jax.random.key(1), (n, n)) * n**-0.5).astype(jnp.bfloat16)
    step = lambda i, c, b=b: jnp.dot(c, b, preferred_element_type=jnp.float32).astype(c.dtype)
    f = jax.jit(lambda a, step=step: jax.lax.fori_loop(0, chain, step, a))
    t = timed(lambda f=f, a=a: f(a).block_until_ready(), reps)
    out[f"matmul_tflops_{n}"] = chain * 2 * n**3 / t / 1e12
  out["matmul_tflops"] = max(out.values())
  return out


def device_info() -> dict:
  d = jax.devices()[0]
  stats = d.memory_stats() if hasattr(d, "memory_stats") else None
  limit = (stats or {}).get("bytes_limit")
  return {
    "device_kind": getattr(d, "device_kind", str(d)),
    "platform": d.platform,
    "bytes_limit": int(limit) if limit else None,
  }


def fits(budget: Budget, what: str, need_bytes: float, limit) -> bool:
  if limit is None or need_bytes <= 0.9 * limit:
    return True
  budget.skip(what, f"memory: needs ~{need_bytes / 2**30:.1f} GiB of {limit / 2**30:.1f} GiB")
  return False


def kv_slot_bytes(cfg: models.ModelConfig) -> int:
  """Keys + values of one cache slot over all layers, in the compute dtype."""
  return 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * cfg.compute_dtype.itemsize
