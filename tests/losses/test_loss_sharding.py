"""Data-parallel sharding gives the full-batch loss and gradient (METHODS §4 statement 13).

Runs in a subprocess with 8 simulated CPU devices (the flag must be set before jax starts):
rows are split over a `data` mesh axis, each device computes ``policy_loss`` and its gradient
on its own rows with the step-global denominators, and a psum of the losses equals the
single-device full-batch loss; the per-device gradients, stitched back, equal the full-batch
gradient. Also runs the loss under plain ``jit`` with row-sharded inputs.
"""

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
  """
  import numpy as np, jax, jax.numpy as jnp
  from jax.sharding import NamedSharding, PartitionSpec as P
  from grpo_jax import losses
  from grpo_jax.config import defaults

  assert jax.device_count() == 8
  rng = np.random.default_rng(0)
  n_rows, width = 16, 7
  lengths = rng.integers(0, width + 1, n_rows)
  mask = (np.arange(width)[None] < lengths[:, None]).astype(np.float32)
  logp = -rng.uniform(0.05, 3.0, (n_rows, width)).astype(np.float32)
  old = (logp + 0.4 * rng.normal(size=logp.shape)).astype(np.float32)
  ref = (logp + 0.4 * rng.normal(size=logp.shape)).astype(np.float32)
  adv = rng.normal(size=n_rows).astype(np.float32)
  mesh = jax.make_mesh((8,), ("data",))
  for kind, agg in (("grpo", "token_mean"), ("gspo", "seq_mean_token_mean"),
                    ("dapo", "seq_mean_token_sum_norm")):
    keys = {"kind": kind, "aggregation": agg, "dual_clip": 3.0, "kl_coef": 0.05}
    cfg = defaults({f"loss.{k}": v for k, v in keys.items()}).loss
    denoms = losses.denominators(mask, cfg)
    f = lambda lp, o, a, m, r: losses.policy_loss(lp, o, a, m, cfg, denoms, losses.Terms(r))[0]
    loss, grad = jax.value_and_grad(f)(logp, old, adv, mask, ref)

    def per_device(lp, o, a, m, r):
      l, g = jax.value_and_grad(f)(lp, o, a, m, r)
      return jax.lax.psum(l, "data"), g

    rows = P("data")
    sharded = jax.jit(jax.shard_map(
      per_device, mesh=mesh, in_specs=(rows,) * 5, out_specs=(P(), rows)))
    put = lambda x: jax.device_put(x, NamedSharding(mesh, rows))
    s_loss, s_grad = sharded(*map(put, (logp, old, adv, mask, ref)))
    assert abs(float(s_loss) - float(loss)) <= 1e-6 * abs(float(loss)) + 1e-7, (kind, agg)
    np.testing.assert_allclose(s_grad, grad, rtol=1e-6, atol=1e-6 * np.abs(grad).max())

    j_loss, j_grad = jax.jit(jax.value_and_grad(f))(*map(put, (logp, old, adv, mask, ref)))
    assert abs(float(j_loss) - float(loss)) <= 1e-6 * abs(float(loss)) + 1e-7, (kind, agg)
    np.testing.assert_allclose(j_grad, grad, rtol=1e-6, atol=1e-6 * np.abs(grad).max())
  print("OK")
  """
)


def test_row_sharded_loss_and_gradient_equal_the_full_batch():
  env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=os.environ["XLA_FLAGS"])
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  proc = subprocess.run(
    [sys.executable, "-c", SCRIPT], env=env, cwd=root, capture_output=True, text=True, timeout=300
  )
  assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), proc.stderr[-3000:]
