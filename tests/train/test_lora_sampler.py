"""``model.lora.sampler``: the sampler reads the base with the adapters merged in (a copy after
each update) or beside it (``unmerged``: the adapted graphdef on the frozen base, no second copy
of the weights). Both give the same greedy tokens and log-probs up to rounding, the unmerged
sampler's weights are the base's buffers plus the adapters, and export writes the merged
checkpoint either way."""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax.config import files
from grpo_jax.config.fields import ConfigError
from grpo_jax.models import lora
from grpo_jax.sampling import sampler
from grpo_jax.sampling.policy import SampleSettings
from grpo_jax.train import run as run_lib
from grpo_jax.train.state import init_state

CONFIG = str(pathlib.Path(__file__).resolve().parents[2] / "configs/tiny_test.py")
LORA = ["model.lora.rank=2", "model.lora.alpha=4", "sampling.temperature=0"]


def _setup(kind: str):
  e = files.load(CONFIG, [*LORA, f"model.lora.sampler={kind}"])
  s = run_lib.setup(e, log=lambda *_: None)
  state = init_state(s.params, s.optimizer, e)
  # B away from 0, so the adapters move the policy off the base
  keys = iter(jax.random.split(jax.random.key(1), 10_000))
  adapters = jax.tree_util.tree_map_with_path(
    lambda kp, x: 0.3 * jax.random.normal(next(keys), x.shape) if "lora_b" in str(kp) else x,
    state.params,
  )
  state = state.replace(params=adapters)
  state = jax.device_put(state, s.state_shardings)
  return e, s, state


def _greedy(e, s, state):
  weights = s.to_sampler(s.weights(state))
  task = s.task
  tokens, mask = task.encode_prompts(task.train_problems(0, 4))
  decode = SampleSettings.from_config(e.sampling).decode(task.stop_ids, task.pad_id)
  out = sampler.sample(
    s.sampler_graphdef, weights, jnp.asarray(tokens), jnp.asarray(mask), jax.random.key(0), decode
  )
  return weights, np.asarray(out.tokens_NxT), np.asarray(out.logps_NxT)


@pytest.fixture(scope="module")
def both():
  return {kind: (*_setup(kind),) for kind in ("merged", "unmerged")}


def test_unmerged_and_merged_samplers_agree(both):
  (e, s_m, state_m), (_, s_u, state_u) = both["merged"], both["unmerged"]
  w_m, tok_m, lp_m = _greedy(e, s_m, state_m)
  w_u, tok_u, lp_u = _greedy(e, s_u, state_u)
  assert s_m.sampler_graphdef is s_m.graphdef and s_u.sampler_graphdef is s_u.lora.graphdef
  names = lambda w: {str(kp[-1].key) for kp, _ in jax.tree_util.tree_flatten_with_path(w)[0]}
  assert {"lora_a", "lora_b"} <= names(w_u) and not {"lora_a", "lora_b"} & names(w_m)
  np.testing.assert_array_equal(tok_u, tok_m)
  np.testing.assert_allclose(lp_u, lp_m, atol=1e-4)
  assert not np.array_equal(lp_u, lp_m)  # the key reaches the sampler: W + A·B vs (x·A)·B


def test_the_unmerged_sampler_reads_the_base_itself(both):
  """The sampler's weights hold the frozen base's own buffers (in the compute dtype and, on one
  device, the sampler's layout already): no second copy; the adapters are cast for it."""
  e, s, state = both["unmerged"]
  weights = s.to_sampler(s.weights(state))
  base, adapters = lora.detach(weights)
  for a, b in zip(jax.tree.leaves(base), jax.tree.leaves(state.base)):
    assert a is b
  cast = {x.dtype for x in jax.tree.leaves(adapters) if x.ndim >= 2}
  assert cast == {np.dtype(e.model.dtype)}
  _, s_m, state_m = both["merged"]
  merged = jax.tree.leaves(s_m.to_sampler(s_m.weights(state_m)))
  assert not any(a is b for a in merged for b in jax.tree.leaves(state_m.base))


def test_merged_weights_of_either_sampler_are_the_same_checkpoint(both):
  (_, s_m, state_m), (_, s_u, state_u) = both["merged"], both["unmerged"]
  merged = jax.device_get(s_m.merged(s_m.weights(state_m)))
  from_unmerged = jax.device_get(s_u.merged(s_u.weights(state_u)))
  for a, b in zip(jax.tree.leaves(merged), jax.tree.leaves(from_unmerged)):
    np.testing.assert_array_equal(a, b)
  assert jax.tree.structure(merged) == jax.tree.structure(s_m.params)


def test_bad_sampler_values_fail_at_load():
  with pytest.raises((ConfigError, ValueError), match="model.lora.sampler"):
    files.load(CONFIG, [*LORA, "model.lora.sampler=fused"])
  with pytest.raises((ConfigError, ValueError), match="model.lora.sampler = 'unmerged'"):
    files.load(CONFIG, [*LORA, "model.lora.sampler=unmerged", "sampling.engine=vllm"])


def test_sampler_shardings_follow_the_attached_tree(both):
  _, s, state = both["unmerged"]
  attached = lora.attach(state.base, state.params)
  assert jax.tree.structure(s.sample_shardings) == jax.tree.structure(attached)
