"""grpo_jax's sampler against Hugging Face transformers ``generate`` on the same local checkpoints.

Same weights (a random Qwen3-architecture HF checkpoint, see ``common``), same work: B
left-aligned prompts of P = 32 random tokens, T new tokens each, temperature 1.0, no top-k /
top-p, no early stop (our eos id is one no token equals; ``generate`` gets ``min_new_tokens =
T``). Each configuration is timed interleaved (HF, ours, HF, ours …), best of ``--reps``, after
one warm-up call each (``generate``: 4 tokens; our compile is reported separately). Reports
generated tokens/s (B·T / time) for both, the ratio, and the share of the matmul ceiling
measured first in the same run. ``--model real`` (or a HF directory) compares on
SmolLM2-135M-Instruct instead, with its own tokenizer and the arithmetic task's chat prompts
(``common.chat_prompts``: left-padded to the config's 80 prompt slots, as the library's
sampler takes them; ``generate`` gets the same ids and attention mask), at every B of
``--batches`` and T of ``--new_tokens``; ``--bound`` adds this machine's bound on such a run
(``decode_bound.sampling_bound``: the model's GEMMs at M = B rows, the KV read, the
prefill at the ceiling). Then the growth table: our time vs T (128 → 1024) at fixed
B, and ``generate``'s (``--growth_hf``) — linear in T means the per-token cost does not grow
with the cache.

  python -m experiments.benchmarks.sampler                      # tiny+small, B 16/64, ~4 min
  python -m experiments.benchmarks.sampler --sizes small --batches 64 --reps 5
  python -m experiments.benchmarks.sampler --growth_sizes tiny,small --growth_max 2048
  python -m experiments.benchmarks.sampler --model real --batches 32,64 --new_tokens 64,256 \
    --growth_sizes '' --bound    # SmolLM2-135M; B 64 T 64 alone ~6 min

Needs torch + transformers (``pip install -e .[bench]``); grpo_jax itself never imports torch.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import numpy as np

from experiments.benchmarks import common as bc
from experiments.benchmarks import decode_bound as bound_lib
from grpo_jax import models, sampling
from grpo_jax import sharding as shard_lib


def ours_runner(
  model, prompts_BxP, new_tokens: int, seed: int = 0, mask_BxP=None, pad_id=bc.PAD_ID, **sample_kw
):
  """Rows split over the mesh's devices (one per core with ``--cpu_devices``), params replicated;
  ``mask_BxP`` defaults to every slot a token."""
  mesh = bc.mesh()
  mask_BxP = np.ones_like(prompts_BxP) if mask_BxP is None else mask_BxP
  rows = shard_lib.shard_batch({"p": prompts_BxP, "m": mask_BxP}, mesh)
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
      sampling.Decode(
        max_new_tokens=new_tokens,
        eos_id=-1,  # no token equals it: every row runs the full T steps
        pad_id=pad_id,
        temperature=1.0,
        **sample_kw,
      ),
    )
    out.tokens_NxT.block_until_ready()
    return out

  return run


def hf_runner(hf_model, prompts_BxP, new_tokens: int, mask_BxP=None, pad_id=bc.PAD_ID):
  import torch

  ids = torch.as_tensor(prompts_BxP, dtype=torch.long)
  mask = torch.ones_like(ids) if mask_BxP is None else torch.as_tensor(mask_BxP, dtype=torch.long)

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
        pad_token_id=pad_id,
      )

  return run


def flop_rate(name: str, batch: int, prompt: int, new: int, seconds: float) -> float:
  """Model GFLOP/s of a sampling run: prefill + T decode steps over the growing context."""
  f = bc.flops_of(name)
  total = prompt + new
  pairs = batch * bc.causal_pairs(prompt, total)
  return f.forward(batch * total, batch * new, pairs) / seconds / 1e9


def compare(
  name: str, batches, prompt_len: int, news, reps: int, ceiling: float, bound: dict | None = None
):
  """Each B of ``batches`` × T of ``news`` on checkpoint ``name``: random prompts of
  ``prompt_len`` tokens on the toy checkpoints, the chat prompts otherwise. ``bound``: the
  machine's ``read_gb_s``, to add the bound of each configuration (``sampling_bound``)."""
  import torch
  import transformers

  name = bc.register(name)
  path = bc.model_dir(name)
  ours = models.load_hf(path, dtype="float32")
  hf = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
  rows = []
  for B in batches:
    if name in ("tiny", "small"):
      prompts = bc.random_prompts(B, prompt_len, bc.SIZES[name]["vocab"])
      kw = {}
    else:
      chat = bc.chat_prompts(name, B)
      prompts, kw = chat["prompts_BxP"], dict(mask_BxP=chat["mask_BxP"], pad_id=chat["pad_id"])
    P = prompts.shape[1]
    for T in news:
      run_ours, run_hf = ours_runner(ours, prompts, T, **kw), hf_runner(hf, prompts, T, **kw)
      t0 = time.perf_counter()
      out = run_ours()
      compile_s = time.perf_counter() - t0
      assert int(np.asarray(out.lengths_N).min()) == T
      gen = hf_runner(hf, prompts, 4, **kw)()  # warm-up (no compile on the torch side)
      assert gen.shape == (B, P + 4), gen.shape
      t_ours, t_hf = [], []
      for _ in range(reps):
        t0 = time.perf_counter()
        gen = run_hf()
        t_hf.append(time.perf_counter() - t0)
        t_ours.append(bc.best_of(run_ours, 1))
      toks = B * T
      row = {
        "model": os.path.basename(name.rstrip("/")),
        "B": B,
        "P": P,
        "T": T,
        "ours_tokens": int(np.asarray(out.lengths_N).sum()),
        "hf_tokens": int(gen.shape[0] * (gen.shape[1] - P)),
        "hf_tok_s": toks / min(t_hf),
        "ours_tok_s": toks / min(t_ours),
        "ratio": min(t_hf) / min(t_ours),
        "ours_first_call_s": compile_s,
        "hf_pct_ceiling": 100 * flop_rate(name, B, P, T, min(t_hf)) / ceiling,
        "ours_pct_ceiling": 100 * flop_rate(name, B, P, T, min(t_ours)) / ceiling,
      }
      if bound is not None:
        b = bound_lib.sampling_bound(name, B, P, T, bound["read_gb_s"], ceiling, steps=8, reps=2)
        row["bound_tok_s"] = toks / b["sampling_bound_s"]
        row["ours_pct_of_bound"] = 100 * row["ours_tok_s"] / row["bound_tok_s"]
        row["bound_ratio_vs_hf"] = row["bound_tok_s"] / row["hf_tok_s"]
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
  ap.add_argument("--sizes", default="tiny,small", help="toy checkpoints (ignored with --model)")
  ap.add_argument(
    "--model", default="", help="real | a HF directory: compare on it, with the chat prompts"
  )
  ap.add_argument("--batches", default="16,64")
  ap.add_argument("--prompt_len", type=int, default=32)
  ap.add_argument("--new_tokens", default="128", help="T, comma-separated")
  ap.add_argument(
    "--bound", action="store_true", help="add each configuration's bound on this machine"
  )
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
  if args.bound:
    info["read_gb_s"] = bound_lib.read_bandwidth_gb_s()
  print(json.dumps(info), flush=True)
  ceiling = info["ceiling"]["gflops"]
  batches = [int(b) for b in args.batches.split(",")]
  news = [int(t) for t in args.new_tokens.split(",")]
  bound = info if args.bound else None
  rows = []
  for name in [args.model] if args.model else filter(None, args.sizes.split(",")):
    rows += compare(name, batches, args.prompt_len, news, args.reps, ceiling, bound)
  grow = []
  for name in filter(None, args.growth_sizes.split(",")):
    reps = max(1, args.reps - 1)
    grow += growth(name, args.growth_batch, args.prompt_len, args.growth_max, reps, args.growth_hf)
  info["ceiling_end"] = bc.matmul_ceiling(sizes=(1024,))
  cols = ["model", "B", "T", "hf_tok_s", "ours_tok_s", "ratio", "hf_pct_ceiling"]
  print(f"\nceiling {ceiling:.1f} GFLOP/s (end of run: {info['ceiling_end']['gflops']:.1f})")
  if rows:
    extra = ["bound_tok_s", "ours_pct_of_bound", "bound_ratio_vs_hf"] if args.bound else []
    print(bc.fmt_table(rows, cols + ["ours_pct_ceiling", "ours_first_call_s"] + extra))
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
