"""compute() jitted with rows sharded over 8 simulated devices equals the unsharded result."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
  """
  import functools
  import jax, jax.numpy as jnp, numpy as np
  from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
  from grpo_jax import advantages as adv_lib
  from grpo_jax.config import base_config, experiment

  assert jax.device_count() == 8
  mesh = Mesh(np.array(jax.devices()), ("data",))
  rows = NamedSharding(mesh, P("data"))
  rng = np.random.default_rng(0)
  n = 64
  gids = np.repeat(np.arange(0, 64, 8), 8).astype(np.int32)
  gids = rng.permutation(gids)
  sids = (gids + rng.integers(0, 3, n)).astype(np.int32)
  gids[:5] = sids[:5] = -1
  rewards = (rng.random(n) < 0.4).astype(np.float32)
  for kw in [dict(), dict(baseline="subgroup_offset", offset_coef=-1.0, offset_control="shuffle",
             offset_shuffle_scope="batch", offset_shuffle_recenter=True, scale="batch")]:
    cfg = base_config()
    cfg.hadw.enabled = True
    for k, v in kw.items():
      cfg.advantage[k] = v
    cfg = experiment.of(cfg)
    anchor = adv_lib.init_anchor(cfg.hadw)
    f = jax.jit(functools.partial(adv_lib.compute, adv=cfg.advantage, hadw=cfg.hadw))
    key = jax.random.key(3)
    want = f(rewards, gids, sids, anchor=anchor, rng=key)
    args = [jax.device_put(x, rows) for x in (rewards, gids, sids)]
    assert len(args[0].sharding.device_set) == 8
    for _ in range(2):  # two steps so the anchor's second step is exercised too
      got = f(*args, anchor=anchor, rng=key)
      want = f(rewards, gids, sids, anchor=anchor, rng=key)
      np.testing.assert_allclose(np.asarray(got[0]), np.asarray(want[0]), rtol=1e-6, atol=1e-6)
      for k in want[2]:
        np.testing.assert_allclose(float(got[2][k]), float(want[2][k]), rtol=1e-6, atol=1e-6)
      for k in want[1]:
        np.testing.assert_allclose(np.asarray(got[1][k]), np.asarray(want[1][k]), rtol=1e-6)
      anchor = want[1]
  print("OK")
  """
)


def test_sharded_jit_equals_unsharded():
  env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=os.environ["XLA_FLAGS"])
  out = subprocess.run(
    [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300
  )
  assert out.returncode == 0, out.stderr[-3000:]
  assert "OK" in out.stdout
