"""grpo_jax's sampler against Hugging Face transformers ``generate`` on the same local checkpoints.

Same weights (a random Qwen3-architecture HF checkpoint, see ``bench_common``), same work: B
left-aligned prompts of P = 32 random tokens, T new tokens each, temperature 1.0, no top-k /
top-p, no early stop (our eos id is one no token equals; ``generate`` gets ``min_new_tokens =
T``). Each configuration is timed interleaved (HF, ours, HF, ours …), best of ``--reps``, after
one warm-up call each (``generate``: 4 tokens; our compile is reported separately). Reports
generated tokens/s (B·T / time) for both, the ratio, and the share of the matmul ceiling
measured first in the same run. Then the growth table: our time vs T (128 → 1024) at fixed
B, and ``generate``'s (``--growth_hf``) — linear in T means the per-token cost does not grow
with the cache.

  python experiments/bench_sampler.py                      # tiny+small, B 16/64, ~4 min
  python experiments/bench_sampler.py --sizes small --batches 64 --reps 5
  python experiments/bench_sampler.py --growth_sizes tiny,small --growth_max 2048

Needs torch + transformers (``pip install -e .[bench]``); grpo_jax itself never imports torch.
"""

from __future__ import annotations

import argparse
import json
import time

import bench_common as bc
import jax
import numpy as np

from grpo_jax import models, sampling
from grpo_jax import sharding as shard_lib


def ours_runner(model, prompts_BxP, new_tokens: int, seed: int = 0, **sample_kw):
  """Rows split over the mesh's devices (one per core with ``--cpu_devices``), params replicated."""
  mesh = bc.mesh()
  rows = shard_lib.shard_batch({"p": prompts_BxP, "m": np.ones_like(prompts_BxP)}, mesh)
  prompt_BxP, mask_BxP = rows["p"], rows["m"]
  params = jax.device_put(model.params, shard_lib.replicated(mesh))
  sample = shard_lib.under_mesh(sampling.sample, mesh)
  calls = [0]

  def run():
    calls[0] += 1
    out = sample(
      model.graphdef,
      params,
      prompt_BxP,
      mask_BxP,
      jax.random.key(seed + calls[0]),
      max_new_tokens=new_tokens,
      eos_id=-1,  # no token equals it: every row runs the full T steps
      pad_id=bc.PAD_ID,
      temperature=1.0,
      **sample_kw,
    )
    out.tokens_NxT.block_until_ready()
    return out

  return run


def hf_runner(hf_model, prompts_BxP, new_tokens: int):
  import torch

  ids = torch.as_tensor(prompts_BxP, dtype=torch.long)
  mask = torch.ones_like(ids)

  def run():
    with torch.inference_mode():
      return hf_model.generate(
        input_ids=ids,
        attention_mask=mask,
        do_sample=True,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        pad_token_id=bc.PAD_ID,
      )

  return run


def flop_rate(name: str, batch: int, prompt: int, new: int, seconds: float) -> float:
  """Model GFLOP/s of a sampling run: prefill + T decode steps over the growing context."""
  f = bc.flops_of(name)
  total = prompt + new
  pairs = batch * bc.causal_pairs(prompt, total)
  return f.forward(batch * total, batch * new, pairs) / seconds / 1e9


def compare(name: str, batches, prompt_len: int, new_tokens: int, reps: int, ceiling: float):
  import torch
  import transformers

  path = bc.checkpoint(name)
  ours = models.load_hf(str(path), dtype="float32")
  hf = transformers.AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
  rows = []
  for B in batches:
    prompts = bc.random_prompts(B, prompt_len, bc.SIZES[name]["vocab"])
    run_ours, run_hf = ours_runner(ours, prompts, new_tokens), hf_runner(hf, prompts, new_tokens)
    t0 = time.perf_counter()
    out = run_ours()
    compile_s = time.perf_counter() - t0
    assert int(np.asarray(out.lengths_N).min()) == new_tokens
    gen = hf_runner(hf, prompts, 4)()  # warm-up (no compile on the torch side)
    assert gen.shape == (B, prompt_len + 4), gen.shape
    t_ours, t_hf = [], []
    for _ in range(reps):
      t_hf.append(bc.best_of(run_hf, 1))
      t_ours.append(bc.best_of(run_ours, 1))
    toks = B * new_tokens
    row = {
      "model": name,
      "B": B,
      "T": new_tokens,
      "hf_tok_s": toks / min(t_hf),
      "ours_tok_s": toks / min(t_ours),
      "ratio": min(t_hf) / min(t_ours),
      "ours_first_call_s": compile_s,
      "hf_pct_ceiling": 100 * flop_rate(name, B, prompt_len, new_tokens, min(t_hf)) / ceiling,
      "ours_pct_ceiling": 100 * flop_rate(name, B, prompt_len, new_tokens, min(t_ours)) / ceiling,
    }
    print(json.dumps(row), flush=True)
    rows.append(row)
  return rows


def growth(name: str, batch: int, prompt_len: int, max_new: int, reps: int, with_hf: bool):
  """Our sampling time vs T, T = 128, 256, … max_new, one compile per T; with ``with_hf``,
  ``generate``'s time for the same work after ours (its KV cache grows by one slot per step),
  for reference on how any KV-cache sampler's step cost grows."""
  path = bc.checkpoint(name)
  ours = models.load_hf(str(path), dtype="float32")
  if with_hf:
    import torch
    import transformers

    hf = transformers.AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
  prompts = bc.random_prompts(batch, prompt_len, bc.SIZES[name]["vocab"])
  rows, T = [], 128
  while T <= max_new:
    run = ours_runner(ours, prompts, T)
    run()  # compiles
    t = bc.best_of(run, reps)
    rows.append({"model": name, "B": batch, "T": T, "seconds": t, "ms_per_step": 1e3 * t / T})
    if with_hf:
      t_hf = bc.best_of(hf_runner(hf, prompts, T), reps)
      rows[-1].update(hf_seconds=t_hf, hf_ms_per_step=1e3 * t_hf / T)
    T *= 2
  first = rows[0]
  for r in rows:
    r["step_cost_vs_T128"] = r["ms_per_step"] / first["ms_per_step"]
    if with_hf:
      r["hf_step_cost_vs_T128"] = r["hf_ms_per_step"] / first["hf_ms_per_step"]
    print(json.dumps(r), flush=True)
  return rows


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--sizes", default="tiny,small")
  ap.add_argument("--batches", default="16,64")
  ap.add_argument("--prompt_len", type=int, default=32)
  ap.add_argument("--new_tokens", type=int, default=128)
  ap.add_argument("--reps", type=int, default=2)
  ap.add_argument("--growth_sizes", default="tiny", help="'' to skip the growth table")
  ap.add_argument("--growth_batch", type=int, default=16)
  ap.add_argument("--growth_max", type=int, default=1024)
  ap.add_argument(
    "--growth_hf", type=int, default=1, help="1: time generate in the growth table too"
  )
  ap.add_argument("--torch_threads", type=int, default=1, help="0 = torch's default")
  ap.add_argument("--cpu_devices", type=int, default=0, help="0 = jax's default (one)")
  ap.add_argument("--json", default="", help="write all results to this file")
  args = ap.parse_args()

  bc.set_cpu_devices(args.cpu_devices)
  info = bc.machine()
  info["torch_threads"] = bc.set_torch_threads(args.torch_threads)
  info["ceiling"] = bc.matmul_ceiling()
  info["torch_matmul_gflops"] = bc.torch_matmul_gflops()
  print(json.dumps(info), flush=True)
  ceiling = info["ceiling"]["gflops"]
  batches = [int(b) for b in args.batches.split(",")]
  rows = []
  for name in filter(None, args.sizes.split(",")):
    rows += compare(name, batches, args.prompt_len, args.new_tokens, args.reps, ceiling)
  grow = []
  for name in filter(None, args.growth_sizes.split(",")):
    reps = max(1, args.reps - 1)
    grow += growth(name, args.growth_batch, args.prompt_len, args.growth_max, reps, args.growth_hf)
  info["ceiling_end"] = bc.matmul_ceiling(sizes=(1024,))
  cols = ["model", "B", "T", "hf_tok_s", "ours_tok_s", "ratio", "hf_pct_ceiling"]
  print(f"\nceiling {ceiling:.1f} GFLOP/s (end of run: {info['ceiling_end']['gflops']:.1f})")
  if rows:
    print(bc.fmt_table(rows, cols + ["ours_pct_ceiling", "ours_first_call_s"]))
  if grow:
    print()
    cols = ["model", "B", "T", "seconds", "ms_per_step", "step_cost_vs_T128"]
    hf_cols = ["hf_seconds", "hf_ms_per_step", "hf_step_cost_vs_T128"]
    print(bc.fmt_table(grow, cols + (hf_cols if args.growth_hf else [])))
  if args.json:
    with open(args.json, "w") as f:
      json.dump({"machine": info, "compare": rows, "growth": grow}, f, indent=2)


if __name__ == "__main__":
  main()
