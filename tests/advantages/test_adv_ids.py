"""advantages.compute's id contract: ids in [0, N) or negative (padding); concrete ids >= N fail."""

import jax
import numpy as np
import pytest

from grpo_jax import advantages as adv_lib
from grpo_jax.config import defaults

R = np.array([1, 0, 1, 0, 0.5], np.float32)


def run(gid, sid=None):
  cfg = defaults()
  return adv_lib.compute(
    R, gid, sid, cfg.advantage, cfg.hadw, adv_lib.init_anchor(cfg.hadw), jax.random.key(0)
  )


def test_dense_ids_and_padding_pass():
  adv, _, _ = run(np.array([0, 0, 2, 2, -1], np.int32))
  assert np.asarray(adv)[-1] == 0.0 and np.all(np.asarray(adv)[:4] != 0.0)


@pytest.mark.parametrize("which", ["group", "subgroup"])
def test_ids_at_or_above_n_are_rejected(which):
  gid = np.array([0, 0, 2, 2, -1], np.int32)
  bad = np.array([0, 0, 5, 5, -1], np.int32)
  name = f"{which}_ids_N\\[2\\] = 5 is outside \\[0, N = 5\\)"
  with pytest.raises(ValueError, match=name):
    run(bad, None) if which == "group" else run(gid, bad)


def test_traced_ids_are_not_checked():
  """Under jit the ids cannot be read; an id >= N then silently drops its row (documented)."""
  cfg = defaults()
  anchor = adv_lib.init_anchor(cfg.hadw)

  @jax.jit
  def f(gid):
    return adv_lib.compute(R, gid, None, cfg.advantage, cfg.hadw, anchor, jax.random.key(0))[0]

  adv = np.asarray(f(np.array([0, 0, 7, 7, -1], np.int32)))
  assert np.all(adv[2:] == 0.0)
