"""The benchmarks' FLOP model (``experiments/benchmarks/common.py``: ``flops_of``, behind every
MFU, roofline and bound the scripts report) against the library's model as XLA compiles it: the
matmul FLOPs of ``models.forward`` on the "tiny" shapes, counted by XLA's cost analysis, equal the
model's count to within the element-wise work it leaves out (norms, RoPE, softmax, SiLU: ~1%).
A new projection, a changed MLP or an untied unembedding in the library moves XLA's count off
the benchmark's."""

import jax
import jax.numpy as jnp
import pytest

from experiments.benchmarks import common as bc
from grpo_jax import models


@pytest.mark.parametrize(("B", "L"), [(2, 16), (1, 64)])
def test_the_benchmarks_flop_count_is_the_library_models(B, L):
  s = bc.SIZES["tiny"]
  cfg = models.ModelConfig(
    vocab_size=s["vocab"],
    hidden_dim=s["hidden"],
    num_layers=s["layers"],
    num_heads=s["heads"],
    num_kv_heads=s["kv_heads"],
    head_dim=s["hidden"] // s["heads"],
    mlp_dim=s["mlp"],
  )
  graphdef, params = models.init_params(cfg, 0)
  tokens_BxL, mask_BxL = jnp.zeros((B, L), jnp.int32), jnp.ones((B, L), jnp.int32)
  lowered = jax.jit(models.forward, static_argnums=0).lower(graphdef, params, tokens_BxL, mask_BxL)
  cost = lowered.compile().cost_analysis()
  xla_flops = (cost[0] if isinstance(cost, list) else cost)["flops"]
  # Every position projected and unembedded; the dense attention scores all L × L pairs.
  counted = bc.flops_of("tiny").forward(B * L, B * L, B * L * L)
  assert counted <= xla_flops <= 1.03 * counted
