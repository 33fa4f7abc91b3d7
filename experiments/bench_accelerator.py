"""The library on one accelerator: decode tokens/s against the memory roofline, the update's MFU
against the measured matmul rate, and transformers ``generate`` on the same device and shapes.

Random weights at the real shapes of Qwen3-0.6B and Qwen3-1.7B (``models.PRESETS``), bf16
compute over float32 master weights (``model.dtype = bfloat16``, ``model.param_dtype =
float32``); nothing is downloaded. In one process, in this order:

* ``device``: the copy bandwidth (a jitted loop of elementwise passes over a large bf16 array;
  bytes read + written / time) and the bf16 matmul rate (chained square products, 2n³ FLOPs each).
* ``generate``: a random-init ``Qwen3ForCausalLM`` of each shape in bf16 (``to_hf_config``),
  ``min_new_tokens = max_new_tokens``, sampling at T = 1, in a subprocess that runs before JAX
  takes the device's memory; only where torch sees the device (``--hf auto``; ``cpu`` forces it).
* ``decode``: ``sampling.sample`` at B rows × T new tokens after P-token prompts, no early stop
  (an EOS id that never fires). Roofline: the T − 1 decode steps each read every weight once
  (bf16) and the keys and values of the P + t slots written so far, at the copy bandwidth
  (the prefill is not counted). ``bucket_kv_ratio``: the KV bytes the sampler's doubling cache
  attends over / that minimum.
* ``update``: one jitted ``train.update`` step (μ = 1, no KL, each group's prompt once, every
  decoder layer rematerialised, vocabulary-chunked log-probs) at the 1.7B shape. MFU = 3 ×
  the forward pass's matmul FLOPs of the work / step time / the measured matmul rate; HFU
  counts the rematerialised forward too (4 ×).

Every configuration is estimated first and skipped with its reason when it would not fit the
device's memory or the time left of ``--budget_s``; a failure (compile, out of memory) is
reported in its row and the script goes on. Results go to stdout (Markdown) and ``--json``,
which is rewritten after every section, so a run cut short still leaves what it measured.

  python experiments/bench_accelerator.py --json $OUT/accel.json   # one GPU, under 8 minutes
  python experiments/bench_accelerator.py --toy                    # CPU, toy shapes, seconds
"""

from __future__ import annotations

import os

# Before JAX starts its backend: most of the device for the decode caches (the transformers
# subprocess has finished by then).
os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.90")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import bench_common as bc  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from grpo_jax import models, sampling  # noqa: E402
from grpo_jax.sampling.sampler import FIRST_BUCKET, cache_buckets  # noqa: E402

MIXED = {"dtype": "bfloat16", "param_dtype": "float32"}
TOY_MODEL = dict(vocab_size=512, num_heads=4, num_kv_heads=2, head_dim=16, rope_theta=1e6)
MODELS = {
  "qwen3-0.6b": dataclasses.replace(models.PRESETS["qwen3-0.6b"], **MIXED),
  "qwen3-1.7b": dataclasses.replace(models.PRESETS["qwen3-1.7b"], **MIXED),
  "toy-a": models.ModelConfig(hidden_dim=64, num_layers=2, mlp_dim=128, **TOY_MODEL, **MIXED),
  "toy-b": models.ModelConfig(hidden_dim=96, num_layers=3, mlp_dim=192, **TOY_MODEL, **MIXED),
}
# Each mode's shapes. Decode configs run batch-major (every model at the first batch size,
# then the next), the update after the first batch size: the goals' configs come first.
SETTINGS = {
  "full": dict(
    models=("qwen3-0.6b", "qwen3-1.7b"),
    batches=(256, 64, 1024),
    prompt=16,
    new_tokens=512,
    copy_mib=2048,
    matmul_sizes=(4096, 8192),
    update=dict(
      model="qwen3-1.7b", prompts=8, group=8, prompt_len=256, new_tokens=768, micro=0, steps=3
    ),
    vocab_chunk=16_384,
    budget_s=420.0,
    hf_budget_s=110.0,
    compile_guess_s=45.0,
  ),
  "toy": dict(
    models=("toy-a", "toy-b"),
    batches=(4,),
    prompt=4,
    new_tokens=16,
    copy_mib=16,
    matmul_sizes=(128, 256),
    update=dict(model="toy-a", prompts=2, group=4, prompt_len=8, new_tokens=24, micro=0, steps=2),
    vocab_chunk=128,
    budget_s=120.0,
    hf_budget_s=60.0,
    compile_guess_s=5.0,
  ),
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


# ------------------------------------------------------------------ decode


def kv_slot_bytes(cfg: models.ModelConfig) -> int:
  """Keys + values of one cache slot over all layers, in the compute dtype."""
  return 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * cfg.compute_dtype.itemsize


def decode_roofline(cfg: models.ModelConfig, B: int, P: int, T: int, gb_s: float) -> dict:
  """Seconds of the T − 1 decode steps at the copy bandwidth: step t reads the bf16 weights and
  B·(P + t) cache slots; also the slots the sampler's doubling cache attends over."""
  weights = cfg.num_params * cfg.compute_dtype.itemsize
  limits = cache_buckets(T, FIRST_BUCKET)
  t_ = np.arange(1, T)
  needed = float(np.sum(P + t_))
  attended = float(sum(P + min(lim for lim in limits if lim > t) for t in t_))
  total = (T - 1) * weights + B * needed * kv_slot_bytes(cfg)
  return {
    "roofline_s": total / (gb_s * 1e9),
    "step_gb_mean": total / (T - 1) / 1e9,
    "bucket_kv_ratio": attended / needed,
  }


def decode_bytes(cfg: models.ModelConfig, B: int, P: int, T: int) -> float:
  """Float32 masters + their bf16 copy, the cache at P + T slots (1.5×: the last doubling holds
  the old and the new cache at once), float32 logits and their softmax working set."""
  kv = B * (P + T) * kv_slot_bytes(cfg)
  return 6 * cfg.num_params + 1.5 * kv + 4 * B * cfg.vocab_size * 4


class Params:
  """The random float32 masters of one model at a time (switching models frees the last)."""

  def __init__(self):
    self.name, self.graphdef, self.params = None, None, None

  def get(self, name: str):
    if name != self.name:
      self.name = self.graphdef = self.params = None
      gc.collect()
      self.graphdef, self.params = models.init_params(MODELS[name], 0)
      self.name = name
    return self.graphdef, self.params


def decode_run(store: Params, name: str, B: int, P: int, T: int, reps: int, budget) -> dict:
  graphdef, params = store.get(name)
  V = MODELS[name].vocab_size
  prompt_BxP = jnp.asarray(bc.random_prompts(B, P, V))
  mask_BxP = jnp.ones_like(prompt_BxP)
  kw = dict(max_new_tokens=T, eos_id=-1, pad_id=0)  # no token is -1: no early stop
  fn = jax.jit(lambda p, x, m, r: sampling.sample(graphdef, p, x, m, r, **kw))
  t0 = time.perf_counter()
  compiled = fn.lower(params, prompt_BxP, mask_BxP, jax.random.key(0)).compile()
  row = {"compile_s": time.perf_counter() - t0}
  times = []
  for i in range(reps):
    if i and budget.left() < 2 * times[-1]:
      break
    t0 = time.perf_counter()
    out = compiled(params, prompt_BxP, mask_BxP, jax.random.key(i))
    jax.block_until_ready(out)
    times.append(time.perf_counter() - t0)
    assert int(out.lengths_N.sum()) == B * T, "a row stopped early"
  del out, compiled
  return {**row, "seconds": min(times), "runs": len(times), "tok_s": B * T / min(times)}


# ------------------------------------------------------------------ update


def forward_flops(cfg: models.ModelConfig, positions, unembedded, key_pairs) -> float:
  """Matmul FLOPs (2 per multiply-add) of a forward pass: projections and MLP per position,
  the unembedding per unembedded position, q·k and p·v per (query, visible key) pair."""
  D, H, Hk, Dh, F = cfg.hidden_dim, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.mlp_dim
  dense = cfg.num_layers * 2 * (2 * D * H * Dh + 2 * D * Hk * Dh + 3 * D * F)
  attn = cfg.num_layers * 4 * H * Dh
  return dense * positions + 2 * D * cfg.vocab_size * unembedded + attn * key_pairs


def update_flops(cfg: models.ModelConfig, N: int, P: int, T: int, share: int) -> float:
  """3 × forward of the update's work: each prompt once per ``share`` rows, every completion
  position over its whole context, the completion positions unembedded."""
  prompt_pairs = P * (P + 1) / 2
  completion_pairs = T * P + T * (T + 1) / 2
  pairs = N / share * prompt_pairs + N * completion_pairs
  return 3 * forward_flops(cfg, N / share * P + N * T, N * T, pairs)


def update_config(u: dict, vocab_chunk: int):
  from grpo_jax import config as config_lib

  cfg = config_lib.base_config()
  cfg.sampling.prompts_per_step, cfg.sampling.group_size = u["prompts"], u["group"]
  cfg.sampling.max_new_tokens = u["new_tokens"]
  cfg.model.dtype, cfg.model.param_dtype, cfg.model.remat = "bfloat16", "float32", "full"
  cfg.model.logps_vocab_chunk = vocab_chunk
  cfg.loss.micro_batch_size = u["micro"]
  cfg.loss.share_prompt = True
  cfg.loss.kl_coef = 0.0
  cfg.optimizer.warmup_steps = 0
  cfg.optimizer.learning_rate = 1e-6
  return cfg


def update_batch(N: int, G: int, P: int, T: int, V: int) -> dict:
  """The update's device arrays: G rows per prompt, every completion T tokens long, rewards
  0 and 1 in every group (non-zero advantages)."""
  rng = np.random.default_rng(0)
  prompts_NxP = np.repeat(rng.integers(3, V, (N // G, P)), G, axis=0)
  tokens_NxL = np.concatenate([prompts_NxP, rng.integers(3, V, (N, T))], axis=1)
  rewards_N = (np.arange(N) % 2).astype(np.float32)
  groups_N = np.repeat(np.arange(N // G), G).astype(np.int32)
  return {
    "tokens_NxL": tokens_NxL.astype(np.int32),
    "input_mask_NxL": np.ones((N, P + T), np.int32),
    "completion_mask_NxT": np.ones((N, T), np.int32),
    "sample_logps_NxT": np.zeros((N, T), np.float32),
    "rewards_N": rewards_N,
    "accuracy_N": rewards_N,
    "group_ids_N": groups_N,
    "subgroup_ids_N": groups_N,
    "loss_mask_N": np.ones(N, np.int32),
    "step_accuracy_N": np.full(N, rewards_N.mean(), np.float32),
  }


def update_bytes(cfg: models.ModelConfig, N: int, L: int, T: int, chunk: int) -> float:
  """Masters, gradients, two Adam moments (float32) and a bf16 copy; every layer's bf16 input
  (remat), one layer's float32 attention scores and probabilities and MLP activations, and
  three float32 logits chunks."""
  D, F, H = cfg.hidden_dim, cfg.mlp_dim, cfg.num_heads
  act = cfg.num_layers * N * L * D * 2 + N * H * L * L * 8 + 3 * N * L * F * 2
  return 18 * cfg.num_params + act + 3 * N * T * chunk * 4


def update_run(u: dict, vocab_chunk: int, rate_tflops: float) -> dict:
  from grpo_jax import sharding as shard_lib
  from grpo_jax.train.microbatch import num_parts, row_blocks
  from grpo_jax.train.optimizer import make_optimizer
  from grpo_jax.train.state import init_state
  from grpo_jax.train.update import make_update_step, prompt_share

  model_cfg = dataclasses.replace(MODELS[u["model"]], remat="full")
  N, G, P, T = u["prompts"] * u["group"], u["group"], u["prompt_len"], u["new_tokens"]
  cfg = update_config(u, vocab_chunk)
  mesh = bc.mesh()
  graphdef, params = models.init_params(model_cfg, 1)
  optimizer = make_optimizer(cfg.optimizer)
  state = init_state(params, optimizer, cfg)
  del params
  shardings = jax.tree.map(lambda _: shard_lib.replicated(mesh), state)
  state = jax.device_put(state, shardings)
  update = make_update_step(graphdef, optimizer, cfg, mesh, shardings, prompt_len=P)
  batch = shard_lib.shard_batch(update_batch(N, G, P, T, model_cfg.vocab_size), mesh)
  t0 = time.perf_counter()
  compiled = update.lower(state, batch).compile()
  compile_s = time.perf_counter() - t0
  times = []
  for _ in range(u["steps"]):
    t0 = time.perf_counter()
    state, metrics = compiled(state, batch)
    jax.block_until_ready((state, metrics))
    times.append(time.perf_counter() - t0)
  assert np.isfinite(float(metrics["loss/total"]))
  del state, compiled
  k = num_parts(N, u["micro"], "micro")
  share = prompt_share(cfg, N, k, row_blocks(N, k, jax.device_count()))
  flops = update_flops(model_cfg, N, P, T, share)
  step_s = min(times[1:] or times)
  return {
    "model": u["model"],
    "rows": N,
    "L": P + T,
    "micro": u["micro"],
    "rows_per_prompt": share,
    "remat": "full",
    "compile_s": compile_s,
    "step_s": step_s,
    "model_tflop": flops / 1e12,
    "model_tflops_s": flops / step_s / 1e12,
    "mfu_pct": 100 * flops / step_s / 1e12 / rate_tflops,
    "hfu_pct": 100 * flops * 4 / 3 / step_s / 1e12 / rate_tflops,
  }


# ------------------------------------------------------------------ transformers generate


def hf_child(spec: dict) -> dict:
  """Runs in its own process (JAX on the CPU there): ``generate`` for every (B, model) of
  ``spec`` in order while its budget lasts."""
  import torch
  import transformers

  device, P, T = spec["device"], spec["prompt"], spec["new_tokens"]
  budget = Budget(spec["budget_s"])
  rows, per_row_step = [], 0.0
  kw = dict(max_new_tokens=T, min_new_tokens=T, do_sample=True, temperature=1.0, top_k=0)
  for B in spec["batches"]:
    for name in spec["models"]:
      what = f"generate {name} B={B}"
      cfg = MODELS[name]
      guess = T * max(per_row_step * B, 0.02 if device == "cuda" else 0.0)
      if not budget.allows(what, 2 * guess + 5):
        continue
      if device == "cuda":
        kv = B * (P + T) * kv_slot_bytes(cfg)
        need = 2 * cfg.num_params + 2.5 * kv + 3 * B * cfg.vocab_size * 4
        if not fits(budget, what, need, torch.cuda.mem_get_info()[0]):
          continue
      model = None
      try:
        torch.manual_seed(0)
        torch.set_default_dtype(torch.bfloat16)
        with torch.device(device):
          model = transformers.Qwen3ForCausalLM(models.to_hf_config(cfg)).eval()
        torch.set_default_dtype(torch.float32)
        ids = torch.randint(3, cfg.vocab_size, (B, P), device=device)
        args = dict(input_ids=ids, attention_mask=torch.ones_like(ids), pad_token_id=0)
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        with torch.inference_mode():
          model.generate(**args, eos_token_id=1, **{**kw, "max_new_tokens": 4, "min_new_tokens": 4})
          sync()
          t0 = time.perf_counter()
          out = model.generate(**args, eos_token_id=1, **kw)
          sync()
          seconds = time.perf_counter() - t0
        assert out.shape == (B, P + T), out.shape
        per_row_step = max(per_row_step, seconds / T / B)
        dtype = str(next(model.parameters()).dtype).replace("torch.", "")
        rows.append(
          {"model": name, "B": B, "hf_s": seconds, "hf_tok_s": B * T / seconds, "hf_dtype": dtype}
        )
      except Exception as e:  # noqa: BLE001  (one config's failure is its row's result)
        rows.append({"model": name, "B": B, "hf_error": error_text(e)})
      finally:
        torch.set_default_dtype(torch.float32)
        del model
        gc.collect()
        if device == "cuda":
          torch.cuda.empty_cache()
      print(json.dumps(rows[-1]), flush=True)
  return {"generate": rows, "skipped": budget.skipped, "torch": torch.__version__}


def hf_device(choice: str) -> str:
  """'cuda' where torch sees a GPU (``auto``), '' (skip) where it does not; ``cpu`` forces it."""
  if choice in ("off", "cpu", "cuda"):
    return "" if choice == "off" else choice
  try:
    import torch
  except ImportError:
    return ""
  return "cuda" if torch.cuda.is_available() else ""


def run_hf(spec: dict, budget: Budget) -> dict:
  """``hf_child`` in a subprocess (killed at its budget + 60 s)."""
  with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "hf.json")
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    cmd = [sys.executable, __file__, "--hf_child", json.dumps(spec), "--json", out]
    try:
      proc = subprocess.run(cmd, env=env, timeout=spec["budget_s"] + 60, text=True)
    except subprocess.TimeoutExpired:
      budget.skip("generate", "the transformers subprocess ran past its budget")
      return {}
    if proc.returncode != 0 or not os.path.exists(out):
      budget.skip("generate", f"the transformers subprocess failed (exit {proc.returncode})")
      return {}
    with open(out) as f:
      return json.load(f)


# ------------------------------------------------------------------ main


def write(path: str, res: dict) -> None:
  if path:
    with open(path, "w") as f:
      json.dump(res, f, indent=2, default=str)


DECODE_COLS = [
  "model", "B", "T", "compile_s", "seconds", "tok_s", "roofline_tok_s", "roofline_pct",
  "step_gb_mean", "bucket_kv_ratio", "hf_tok_s", "ratio_vs_hf", "error",
]  # fmt: skip
UPDATE_COLS = [
  "model", "rows", "L", "micro", "rows_per_prompt", "compile_s", "step_s", "model_tflops_s",
  "mfu_pct", "hfu_pct", "error",
]  # fmt: skip


def report(res: dict) -> str:
  dev = {**res["device"], **res["machine"]}
  lines = [
    f"## {dev['device_kind']} ({dev['platform']}, jax {dev['jax']}, {dev['date']})",
    "",
    bc.fmt_table([dev], ["device_kind", "copy_gb_s", "matmul_tflops", "bytes_limit"]),
  ]
  if res["decode"]:
    lines += ["", "### Decode (bf16, no early stop)", "", bc.fmt_table(res["decode"], DECODE_COLS)]
  if res["generate"]:
    cols = ["model", "B", "hf_dtype", "hf_s", "hf_tok_s", "hf_error"]
    lines += ["", "### transformers generate", "", bc.fmt_table(res["generate"], cols)]
  if res["update"]:
    lines += ["", "### Update step (bf16 compute, fp32 masters)", ""]
    lines.append(bc.fmt_table(res["update"], UPDATE_COLS))
  if res["goals"]:
    lines += ["", "### Goals", "", bc.fmt_table(res["goals"], ["goal", "measured", "met"])]
  if res["skipped"]:
    lines += ["", "### Skipped", "", bc.fmt_table(res["skipped"], ["what", "reason"])]
  return "\n".join(lines)


def goals(res: dict) -> list[dict]:
  out = []
  for r in res["decode"]:
    if r.get("B") == 256 and "roofline_pct" in r:
      pct = r["roofline_pct"]
      out.append({"goal": f"decode {r['model']} B=256 ≥ 50% of roofline", "measured": pct,
                  "met": pct >= 50})  # fmt: skip
  for r in res["update"]:
    if "mfu_pct" in r:
      out.append({"goal": f"update MFU {r['model']} ≥ 40%", "measured": r["mfu_pct"],
                  "met": r["mfu_pct"] >= 40})  # fmt: skip
  return out


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--toy", action="store_true", help="toy shapes (CPU, seconds)")
  ap.add_argument("--models", default="", help="comma-separated MODELS keys (default: mode's)")
  ap.add_argument("--batches", default="", help="decode rows, e.g. 256,64,1024")
  ap.add_argument("--new_tokens", type=int, default=0, help="decode T (default: mode's)")
  ap.add_argument("--budget_s", type=float, default=0.0, help="total seconds (default: mode's)")
  ap.add_argument("--hf", default="auto", choices=("auto", "off", "cpu", "cuda"))
  ap.add_argument("--no_update", action="store_true")
  ap.add_argument("--reps", type=int, default=2, help="timed runs per decode config")
  ap.add_argument("--json", default="", help="write all results to this file")
  ap.add_argument("--hf_child", default="", help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.hf_child:
    write(args.json, hf_child(json.loads(args.hf_child)))
    return

  s = dict(SETTINGS["toy" if args.toy else "full"])
  if args.models:
    s["models"] = tuple(args.models.split(","))
  if args.batches:
    s["batches"] = tuple(int(b) for b in args.batches.split(","))
  s["new_tokens"] = args.new_tokens or s["new_tokens"]
  budget = Budget(args.budget_s or s["budget_s"])
  P, T = s["prompt"], s["new_tokens"]
  res = {"settings": s, "decode": [], "generate": [], "update": [], "goals": []}
  res["skipped"] = budget.skipped

  # transformers first, in its own process, before JAX holds the device's memory.
  device = hf_device(args.hf)
  if device:
    spec = {"device": device, "models": s["models"], "batches": s["batches"], "prompt": P,
            "new_tokens": T, "budget_s": min(s["hf_budget_s"], 0.3 * budget.left())}  # fmt: skip
    hf = run_hf(spec, budget)
    res["generate"], res["torch"] = hf.get("generate", []), hf.get("torch")
    budget.skipped += hf.get("skipped", [])
  else:
    budget.skip("generate", f"no torch device for --hf {args.hf}")

  res["machine"], res["device"] = bc.machine(), device_info()
  res["device"].update(copy_gb_s(s["copy_mib"]))
  res["device"].update(matmul_tflops(s["matmul_sizes"]))
  gb_s, rate = res["device"]["copy_gb_s"], res["device"]["matmul_tflops"]
  print(json.dumps(res["device"]), flush=True)
  write(args.json, res)

  hf_rows = {(r["model"], r["B"]): r for r in res["generate"] if "hf_tok_s" in r}
  store, compile_s, step_s = Params(), s["compile_guess_s"], 0.0
  for i, B in enumerate(s["batches"]):
    for name in s["models"]:
      cfg, what = MODELS[name], f"decode {name} B={B}"
      row = {"model": name, "B": B, "T": T, **decode_roofline(cfg, B, P, T, gb_s)}
      guess = compile_s + 2 * max(3 * row["roofline_s"], step_s * T)
      if not budget.allows(what, guess):
        continue
      if not fits(budget, what, decode_bytes(cfg, B, P, T), res["device"]["bytes_limit"]):
        continue
      try:
        row.update(decode_run(store, name, B, P, T, args.reps, budget))
        compile_s, step_s = max(compile_s, row["compile_s"]), max(step_s, row["seconds"] / T)
        row["roofline_tok_s"] = B * T / row["roofline_s"]
        row["roofline_pct"] = 100 * row["roofline_s"] / row["seconds"]
        if (name, B) in hf_rows:
          row["hf_tok_s"] = hf_rows[(name, B)]["hf_tok_s"]
          row["ratio_vs_hf"] = row["tok_s"] / row["hf_tok_s"]
      except Exception as e:  # noqa: BLE001  (one config's failure is its row's result)
        row["error"] = error_text(e)
      gc.collect()
      res["decode"].append(row)
      print(json.dumps(row), flush=True)
      write(args.json, res)
    if i == 0 and not args.no_update:
      store = Params()  # the update's state needs the memory
      gc.collect()
      u = s["update"]
      what, cfg = f"update {u['model']}", MODELS[u["model"]]
      N, L = u["prompts"] * u["group"], u["prompt_len"] + u["new_tokens"]
      need = update_bytes(cfg, N, L, u["new_tokens"], s["vocab_chunk"])
      if budget.allows(what, 2 * s["compile_guess_s"] + 20) and fits(
        budget, what, need, res["device"]["bytes_limit"]
      ):
        try:
          row = update_run(u, s["vocab_chunk"], rate)
        except Exception as e:  # noqa: BLE001
          row = {"model": u["model"], "rows": N, "L": L, "error": error_text(e)}
        gc.collect()
        res["update"].append(row)
        print(json.dumps(row), flush=True)
        write(args.json, res)
  res["goals"] = goals(res)
  res["elapsed_s"] = budget.seconds - budget.left()
  write(args.json, res)
  print(report(res))


if __name__ == "__main__":
  main()
