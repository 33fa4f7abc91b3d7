"""The library on one accelerator: decode tokens/s against the memory roofline, the update's MFU
against the measured matmul rate, and transformers ``generate`` on the same device and shapes.

Random weights at the real shapes of Qwen3-0.6B and Qwen3-1.7B (``models.PRESETS``), bf16
compute over float32 master weights (``model.dtype = bfloat16``, ``model.param_dtype =
float32``); nothing is downloaded. In one process, in this order:

* ``device``: the copy bandwidth (a jitted loop of elementwise passes over a large bf16 array;
  bytes read + written / time) and the bf16 matmul rate (chained square products, 2n³ FLOPs each).
* ``generate`` (``accel/generate.py``): a random-init bf16 ``Qwen3ForCausalLM`` of each shape,
  ``min_new_tokens = max_new_tokens``, sampling at T = 1, in a subprocess that runs before JAX
  takes the device's memory; only where torch sees the device (``--hf auto``; ``cpu`` forces it).
* ``decode``: ``sampling.sample`` at B rows × T new tokens after P-token prompts, no early stop
  (an EOS id that never fires). Roofline: the T − 1 decode steps each read every weight once
  (bf16) and the keys and values of the P + t slots written so far, at the copy bandwidth
  (the prefill is not counted). ``bucket_kv_ratio``: the KV bytes the sampler's doubling cache
  attends over / that minimum.
* ``update`` (``accel/update.py``): one jitted ``train.update`` step (μ = 1, no KL, each
  group's prompt once, every decoder layer rematerialised, vocabulary-chunked log-probs) at the
  1.7B shape. MFU = 3 × the forward pass's matmul FLOPs of the work / step time / the measured
  matmul rate; HFU counts the rematerialised forward too (4 ×).
* ``pack`` (``accel/update.pack_run``): the same update on completions of mixed lengths (T/8 …
  T, the longest T), padded and packed (``loss.pack``), alternating: the padding-free update's
  speed-up where rows are about two thirds real tokens.
* ``overlap`` (``accel/overlap.py``): the RL loop at the 0.6B shape (B 8 × G 8, 256 new tokens),
  on-policy and one step off-policy (``rollout.off_policy_steps = 1``: the next batch sampled
  in a host thread while the update runs on the same device): median step, rollout, rollout
  wait and update times, and the speed-up.

Every configuration is estimated first and skipped with its reason when it would not fit the
device's memory or the time left of ``--budget_s``; a failure (compile, out of memory) is
reported in its row and the script goes on. Results go to stdout (Markdown) and ``--json``,
which is rewritten after every section, so a run cut short still leaves what it measured.

  python -m experiments.benchmarks.accelerator --json $OUT/accel.json   # one GPU, under 9 minutes
  python -m experiments.benchmarks.accelerator --toy                    # CPU, toy shapes, seconds
"""

from __future__ import annotations

import os

# Before JAX starts its backend: most of the device for the decode caches (the transformers
# subprocess has finished by then).
os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.90")

import argparse  # noqa: E402
import functools  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from experiments.benchmarks import common as bc  # noqa: E402
from experiments.benchmarks.accel.device import (  # noqa: E402
  MODELS,
  Budget,
  copy_gb_s,
  device_info,
  error_text,
  fits,
  kv_slot_bytes,
  matmul_tflops,
)
from experiments.benchmarks.accel.generate import hf_device, run_hf  # noqa: E402
from experiments.benchmarks.accel.overlap import overlap_run  # noqa: E402
from experiments.benchmarks.accel.update import pack_run, update_bytes, update_run  # noqa: E402
from grpo_jax import models, sampling  # noqa: E402
from grpo_jax.sampling.steps import FIRST_BUCKET, cache_buckets  # noqa: E402

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
    # prompt_len: a bound on the task's prompt width (countdown's are 9 tokens), for memory.
    overlap=dict(model="qwen3-0.6b", prompts=8, group=8, prompt_len=64, new_tokens=256, steps=4),
    vocab_chunk=16_384,
    budget_s=540.0,
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
    overlap=dict(model="toy-a", prompts=2, group=4, prompt_len=64, new_tokens=8, steps=3),
    vocab_chunk=128,
    budget_s=120.0,
    hf_budget_s=60.0,
    compile_guess_s=5.0,
  ),
}


# ------------------------------------------------------------------ decode


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
  fn = jax.jit(lambda p, x, m, r: sampling.sample(graphdef, p, x, m, r, sampling.Decode(**kw)))
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


# ------------------------------------------------------------------ main


def write(path: str, res: dict) -> None:
  if path:
    with open(path, "w") as f:
      json.dump(res, f, indent=2, default=str)


DECODE_COLS = [
  "model", "B", "T", "compile_s", "seconds", "tok_s", "roofline_tok_s", "roofline_pct",
  "step_gb_mean", "bucket_kv_ratio", "hf_tok_s", "ratio_vs_hf", "error",
]  # fmt: skip
PACK_COLS = [
  "model", "rows", "L", "packed_rows", "padded_fill", "packed_fill", "padded_s", "packed_s",
  "speedup", "error",
]  # fmt: skip
OVERLAP_COLS = [
  "model", "off_policy_steps", "time/step_s", "time/rollout_s", "time/rollout_wait_s",
  "time/update_s", "rollout/staleness", "speedup", "error",
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
  if res["pack"]:
    lines += ["", "### Update, mixed lengths: padded and packed (loss.pack)", ""]
    lines.append(bc.fmt_table(res["pack"], PACK_COLS))
  if res["overlap"]:
    lines += ["", "### RL loop: on-policy and one step off-policy (overlap)", ""]
    lines.append(bc.fmt_table(res["overlap"], OVERLAP_COLS))
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
  args = ap.parse_args()

  s = dict(SETTINGS["toy" if args.toy else "full"])
  if args.models:
    s["models"] = tuple(args.models.split(","))
  if args.batches:
    s["batches"] = tuple(int(b) for b in args.batches.split(","))
  s["new_tokens"] = args.new_tokens or s["new_tokens"]
  unknown = sorted(set(s["models"]) - set(MODELS))
  if unknown or s["new_tokens"] < 2:
    ap.error(f"models must be among {sorted(MODELS)} (got {unknown}) and --new_tokens >= 2")
  budget = Budget(args.budget_s or s["budget_s"])
  P, T = s["prompt"], s["new_tokens"]
  tables = ("decode", "generate", "update", "pack", "overlap", "goals")
  res = {"settings": s, **{k: [] for k in tables}, "skipped": budget.skipped}

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
      u, o, chunk = s["update"], s["overlap"], s["vocab_chunk"]
      # (section, its settings, seconds guessed, run): the overlap's two runs each compile a
      # sampler and an update.
      sections = (
        ("update", u, 2 * compile_s + 20, functools.partial(update_run, u, chunk, rate)),
        ("pack", u, 4 * compile_s + 40, functools.partial(pack_run, u, chunk)),
        ("overlap", o, 4 * compile_s + 12 * o["steps"], functools.partial(overlap_run, o, chunk)),
      )
      for section, x, guess, run in sections:
        what = f"{section} {x['model']}"
        N, L = x["prompts"] * x["group"], x["prompt_len"] + x["new_tokens"]
        need = update_bytes(MODELS[x["model"]], N, L, x["new_tokens"], chunk)
        if not budget.allows(what, guess) or not fits(
          budget, what, need, res["device"]["bytes_limit"]
        ):
          continue
        try:
          out = run()  # a row, or the overlap's row per mode
        except Exception as e:  # noqa: BLE001
          out = {"model": x["model"], "rows": N, "L": L, "error": error_text(e)}
        gc.collect()
        res[section] += out if isinstance(out, list) else [out]
        print(json.dumps(out), flush=True)
        write(args.json, res)
  res["goals"] = goals(res)
  res["elapsed_s"] = budget.seconds - budget.left()
  write(args.json, res)
  print(report(res))


if __name__ == "__main__":
  main()
