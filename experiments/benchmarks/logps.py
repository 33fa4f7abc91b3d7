"""Per-token log-probs and their gradient at a real vocabulary size: the library's
``token_logps`` against ``chunked_token_logps`` (``model.logps_vocab_chunk``), which never
holds the B×T×V logits.

``token_logps`` computes log softmax(z)[y] as z_y − logsumexp(z) (z = logits / τ), so the
B×T×V log-probs are never written; the chunked form runs the unembedding and the logsumexp
over ``--vocab_chunk`` columns at a time. Each is ``jax.value_and_grad`` of Σ w·logp over the
parameters of a one-layer Qwen3 model with untied embeddings and the given vocabulary (Qwen3's
151,936 by default), so the vocabulary-sized work dominates (the unembedding, its logsumexp and
the two V×D parameter gradients); both are compiled side by side and timed interleaved, best
of ``--reps``, and their gradients compared.

  python -m experiments.benchmarks.logps                         # V = 151,936, D = 1,024, 2 × 64
  python -m experiments.benchmarks.logps --vocab 4096 --hidden 512 --rows 8 --length 96
"""

from __future__ import annotations

import argparse
import json

import jax
import jax.numpy as jnp
import numpy as np

from experiments.benchmarks import common as bc
from grpo_jax import models
from grpo_jax.models.chunked_logps import chunked_token_logps


def compare(vocab: int, hidden: int, rows: int, length: int, chunk: int, reps: int) -> dict:
  heads = max(1, hidden // 128)
  cfg = models.ModelConfig(
    vocab_size=vocab,
    hidden_dim=hidden,
    num_layers=1,
    num_heads=heads,
    num_kv_heads=max(1, heads // 2),
    head_dim=hidden // heads,
    mlp_dim=3 * hidden,
    tie_embeddings=False,
  )
  graphdef, params = models.init_params(cfg, 0)
  rng = np.random.default_rng(0)
  tokens = jnp.asarray(rng.integers(0, vocab, (rows, length)), jnp.int32)
  mask = jnp.ones((rows, length), jnp.int32)
  w = jnp.asarray(rng.normal(size=(rows, length)), jnp.float32)
  variants = {
    "token_logps": lambda p: models.token_logps(graphdef, p, tokens, mask, 1.0),
    "chunked": lambda p: chunked_token_logps(chunk)(graphdef, p, tokens, mask),
  }
  loss = lambda f: lambda p: jnp.sum(f(p) * w)
  fns = {k: jax.jit(jax.value_and_grad(loss(f))) for k, f in variants.items()}
  outs = {k: jax.block_until_ready(f(params)) for k, f in fns.items()}  # compiled here
  best = dict.fromkeys(fns, float("inf"))
  for _ in range(reps):  # interleaved: the machine's drift hits both alike
    for k, f in fns.items():
      best[k] = min(best[k], bc.best_of(lambda f=f: jax.block_until_ready(f(params)), 1))
  row = {"V": vocab, "D": hidden, "rows": rows, "L": length}
  row.update({f"{k}_ms": 1e3 * t for k, t in best.items()})
  pairs = zip(jax.tree.leaves(outs["token_logps"]), jax.tree.leaves(outs["chunked"]))
  row["chunked_max_abs_diff"] = max(float(jnp.max(jnp.abs(a - b))) for a, b in pairs)
  row["chunked_slowdown"] = best["chunked"] / best["token_logps"]
  return row


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--vocab", type=int, default=151_936)
  ap.add_argument("--hidden", type=int, default=1024)
  ap.add_argument("--rows", type=int, default=2)
  ap.add_argument("--length", type=int, default=64)
  ap.add_argument("--vocab_chunk", type=int, default=8192)
  ap.add_argument("--reps", type=int, default=5)
  ap.add_argument("--json", default="")
  args = ap.parse_args()

  info = bc.machine()
  print(json.dumps(info), flush=True)
  row = compare(args.vocab, args.hidden, args.rows, args.length, args.vocab_chunk, args.reps)
  print(json.dumps(row), flush=True)
  print(bc.fmt_table([row], list(row)))
  if args.json:
    with open(args.json, "w") as f:
      json.dump({"machine": info, "logps": row}, f, indent=2)


if __name__ == "__main__":
  main()
