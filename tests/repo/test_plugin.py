"""``plugin.release_if_crowded``: a process's loaded XLA programs hold memory maps until jax
drops them, and the release drops them only past its share of the kernel's limit."""

import jax
import jax.numpy as jnp
import pytest

from tests import plugin

PROGRAMS = 40


@pytest.mark.skipif(not plugin.MAPS.exists(), reason="needs /proc (Linux)")
def test_the_release_drops_loaded_programs_only_past_its_share():
  programs = [jax.jit(lambda x, k=k: x * k + 1.0) for k in range(PROGRAMS)]  # distinct constants
  for f in programs:
    f(jnp.ones(3)).block_until_ready()
  held = plugin.map_count()
  assert not plugin.release_if_crowded(share=1.0)  # under the whole limit: all kept
  assert plugin.map_count() >= held - 8
  assert plugin.release_if_crowded(share=0.5 * held / int(plugin.MAP_LIMIT.read_text()))
  assert plugin.map_count() <= held - PROGRAMS  # at least one map a program (adjacent ones merge)
  assert float(programs[1](jnp.ones(3))[0]) == 2.0  # a dropped program runs again (reloaded)
