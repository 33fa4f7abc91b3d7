"""Per-token log-probs and their gradient: the library's ``token_logps`` against the materialised
log_softmax + gather it replaced, and the chunked version, at a real vocabulary size.

``token_logps`` computes log softmax(z)[y] as z_y − logsumexp(z) (z = logits / τ), so the
B×T×V log-probs are never written; the materialised form (``jax.nn.log_softmax`` over the
whole vocabulary, then ``take_along_axis``) writes them in the forward pass and reads them back
in the backward. ``chunked_token_logps`` never holds the B×T×V logits at all (``--vocab_chunk``).
Each variant is ``jax.value_and_grad`` of Σ w·logp over the parameters of a one-layer Qwen3
model with untied embeddings and the given vocabulary (Qwen3's 151,936 by default), so the
vocabulary-sized work dominates (the unembedding, its log-softmax and the two V×D parameter
gradients); the three are compiled side by side and timed interleaved, best of ``--reps``, and
their gradients compared.

  python experiments/bench_logps.py                         # V = 151,936, D = 1,024, 2 × 64
  python experiments/bench_logps.py --vocab 4096 --hidden 512 --rows 8
"""

from __future__ import annotations

import argparse
import json

import bench_common as bc
import jax
import jax.numpy as jnp
import numpy as np

from grpo_jax import models
from grpo_jax.models.chunked_logps import chunked_token_logps


def materialised_logps(graphdef, params, tokens_BxL, mask_BxL, temperature):
  """The replaced form: log_softmax over the whole vocabulary, then the target's entry."""
  logits_BxLxV = models.forward(graphdef, params, tokens_BxL, mask_BxL)[:, :-1]
  logp_BxLxV = models.logps_from_logits(logits_BxLxV, temperature)
  picked_BxL1 = jnp.take_along_axis(logp_BxLxV, tokens_BxL[:, 1:, None], axis=-1)[..., 0]
  return jnp.pad(picked_BxL1, ((0, 0), (1, 0))) * mask_BxL


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
    "materialised": lambda p: materialised_logps(graphdef, p, tokens, mask, 1.0),
    "token_logps": lambda p: models.token_logps(graphdef, p, tokens, mask, 1.0),
    "chunked": lambda p: chunked_token_logps(graphdef, p, tokens, mask, vocab_chunk=chunk),
  }
  loss = lambda f: lambda p: jnp.sum(f(p) * w)
  fns = {k: jax.jit(jax.value_and_grad(loss(f))) for k, f in variants.items()}
  outs = {k: jax.block_until_ready(f(params)) for k, f in fns.items()}  # compiled here
  ref = jax.tree.leaves(outs["materialised"])
  best = dict.fromkeys(fns, float("inf"))
  for _ in range(reps):  # interleaved: the machine's drift hits every variant alike
    for k, f in fns.items():
      best[k] = min(best[k], bc.best_of(lambda f=f: jax.block_until_ready(f(params)), 1))
  row = {"V": vocab, "D": hidden, "rows": rows, "L": length}
  for k, t in best.items():
    err = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(ref, jax.tree.leaves(outs[k])))
    row.update({f"{k}_ms": 1e3 * t, f"{k}_max_abs_diff": err})
  row["token_logps_speedup"] = best["materialised"] / best["token_logps"]
  row["chunked_speedup"] = best["materialised"] / best["chunked"]
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
