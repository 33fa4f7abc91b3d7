"""The rollout engines side by side (``sampling.engine``): our jitted sampler against vLLM in
this process, through the same ``RolloutEngine.generate`` call, on SmolLM2-135M-Instruct.

Same weights (ours, pushed into vLLM in memory), same work: B arithmetic chat prompts
(``common.chat_prompts``, 80 prompt slots) × G samples, T new tokens at temperature 1,
stopping on the task's end token. Timed interleaved (ours, vLLM, ours …), best of ``--reps``
after one warm-up call each (our compile and vLLM's start are reported apart). Reports sampled
tokens/s of each (the tokens the rows kept, which differ between engines: their draws differ),
the ratio, the push time (median of ``--pushes`` pushes of the same tree) and greedy agreement
(rows whose T greedy tokens are equal).

  python -m experiments.benchmarks.engine                       # B 8 x G 8, T 64, ~3 min
  python -m experiments.benchmarks.engine --dtype bfloat16 --prompts 8 --group 8 --new_tokens 128

Needs the ``.[vllm]`` extra (docs/scaling.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import types

import jax
import numpy as np

from experiments.benchmarks import common as bc
from grpo_jax import models
from grpo_jax.sampling.engine import JaxEngine, generate_with
from grpo_jax.sampling.policy import Policy, SampleSettings
from grpo_jax.sampling.vllm_engine import VllmEngine


def main(argv=None) -> dict:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--model", default="real", help="real (SmolLM2-135M-Instruct) or a HF dir")
  p.add_argument("--dtype", default="float32", help="both engines' compute dtype")
  p.add_argument("--prompts", type=int, default=8, help="B")
  p.add_argument("--group", type=int, default=8, help="G")
  p.add_argument("--new_tokens", type=int, default=64, help="T")
  p.add_argument("--reps", type=int, default=3)
  p.add_argument("--pushes", type=int, default=5)
  p.add_argument("--json", default="", help="a JSON file for the results")
  args = p.parse_args(argv)

  path = bc.model_dir(args.model)
  batch = bc.chat_prompts(args.model, args.prompts)
  G, T = args.group, args.new_tokens
  prompts = np.repeat(batch["prompts_BxP"], G, axis=0)
  mask = np.repeat(batch["mask_BxP"], G, axis=0)
  tok = batch["tokenizer"]
  task = types.SimpleNamespace(
    stop_ids=(tok.eos_token_id,), pad_id=batch["pad_id"], decode=lambda t, m: [""] * len(t)
  )
  model = models.load_hf(path, dtype=args.dtype)
  mesh = bc.mesh()
  policy = Policy(model.graphdef, model.params, mesh, SampleSettings(T, temperature=1.0))
  engines = {"ours": JaxEngine(), "vllm": VllmEngine(path, args.dtype)}
  rng = jax.random.key(0)
  kept, first = {}, {}
  for name, engine in engines.items():
    t0 = time.perf_counter()
    kept[name] = int(generate_with(engine, policy, task, prompts, mask, rng, G)[0].mask_NxT.sum())
    first[name] = time.perf_counter() - t0  # our compile; vLLM's start and first push
  best = dict.fromkeys(engines, float("inf"))
  for i in range(args.reps):
    for name, engine in engines.items():
      t0 = time.perf_counter()
      out, _ = generate_with(engine, policy, task, prompts, mask, jax.random.key(i + 1), G)
      seconds = time.perf_counter() - t0
      if seconds < best[name]:
        best[name], kept[name] = seconds, int(out.mask_NxT.sum())
  # A new tree of the same arrays each time: the engine pushes any tree it does not hold.
  fresh = lambda: jax.tree.map(lambda x: x, model.params)
  pushes = [engines["vllm"].push_weights(fresh()) for _ in range(args.pushes)]
  greedy = policy.replace(settings=SampleSettings(T, temperature=0.0))
  ref, got = (
    generate_with(e, greedy, task, prompts[::G], mask[::G], rng)[0] for e in engines.values()
  )
  result = {
    "machine": bc.machine(),
    "work": {"model": args.model, "dtype": args.dtype, "B": args.prompts, "G": G, "T": T},
    "first_call_s": first,
    "best_s": best,
    "tokens": kept,
    "tokens_per_s": {k: kept[k] / best[k] for k in engines},
    "vllm_over_ours": (kept["vllm"] / best["vllm"]) / (kept["ours"] / best["ours"]),
    "push_s_median": statistics.median(pushes),
    "greedy_rows_equal": int((ref.tokens_NxT == got.tokens_NxT).all(1).sum()),
    "greedy_rows": len(ref.tokens_NxT),
  }
  print(json.dumps(result, indent=2))
  if args.json:
    with open(args.json, "w") as f:
      json.dump(result, f, indent=2)
  return result


if __name__ == "__main__":
  main()
