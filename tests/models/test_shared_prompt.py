"""Each group's prompt through the model once (models/shared_prompt.py): in the update
(loss.share_prompt) and in the sampler's prefill (``prompt_share``).

Same log-probs, entropies and gradients as the per-row forward for every family (sliding
window, remat and the chunked vocabulary included), a row that does not share its run's prompt
reads the run's, the update with the key on equals the update with it off, and the sampler
draws the same tokens with the same log-probs.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import models, sampling
from grpo_jax import sharding as shard_lib
from grpo_jax.models.chunked_logps import chunked_token_logps
from grpo_jax.models.shared_prompt import group_run
from grpo_jax.sampling.generate import generate
from grpo_jax.sampling.policy import Policy, SampleSettings
from grpo_jax.train.update import check_shared_prompts, prompt_share
from tests.support.models import FAMILIES, small_model

P, T, V = 10, 12, 97


def _model(family="qwen3", **kw):
  return small_model(family, V, **kw)


def _batch(num_runs=3, share=4, seed=0):
  """Runs of ``share`` rows with one left-padded prompt each and their own completions."""
  rng = np.random.default_rng(seed)
  pad_U = rng.integers(0, 4, num_runs)
  prompt_mask_UxP = (np.arange(P)[None] >= pad_U[:, None]).astype(np.int32)
  prompts_UxP = np.where(prompt_mask_UxP > 0, rng.integers(2, V, (num_runs, P)), 0)
  N = num_runs * share
  lengths_N = rng.integers(1, T + 1, N)
  comp_mask_NxT = (np.arange(T)[None] < lengths_N[:, None]).astype(np.int32)
  comp_NxT = np.where(comp_mask_NxT > 0, rng.integers(2, V, (N, T)), 0)
  tokens = np.concatenate([np.repeat(prompts_UxP, share, 0), comp_NxT], 1)
  mask = np.concatenate([np.repeat(prompt_mask_UxP, share, 0), comp_mask_NxT], 1)
  return jnp.asarray(tokens, jnp.int32), jnp.asarray(mask, jnp.int32)


def _close(a, b, rtol=2e-5, atol=2e-5):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_allclose(np.asarray(y), np.asarray(x), rtol=rtol, atol=atol)


@pytest.mark.parametrize("family,kw", FAMILIES, ids=[f for f, _ in FAMILIES])
def test_shared_prompt_gives_the_per_row_logps_entropies_and_gradients(family, kw, rel_diff):
  graphdef, params = _model(family, **kw)
  tokens, mask = _batch()
  w = jnp.asarray(np.random.default_rng(1).normal(size=(tokens.shape[0], T)), jnp.float32)

  def logps(p, share):
    return models.token_logps(graphdef, p, tokens, mask, 0.8, True, models.Window(P, share))

  plain, shared = jax.jit(logps, static_argnums=1)(params, 1), logps(params, 4)
  _close(plain, shared)
  assert float(jnp.max(jnp.abs(plain[0]))) > 0  # log-probs at the completion tokens
  loss = lambda share: lambda p: jnp.sum(logps(p, share)[0] * w) + jnp.sum(logps(p, share)[1])
  grad = lambda share: jax.jit(jax.grad(loss(share)))(params)
  assert rel_diff(grad(1), grad(4)) < 1e-5


@pytest.mark.parametrize("remat", ["full", "dots_with_no_batch_dims_saveable"])
def test_shared_prompt_with_remat_and_vocabulary_chunks(remat, rel_diff):
  graphdef, params = _model(remat=remat)
  tokens, mask = _batch(num_runs=2, share=3)

  def loss(share):
    def fn(p):
      return jnp.sum(
        chunked_token_logps(40)(graphdef, p, tokens, mask, window=models.Window(P, share))
      )

    return fn

  plain_l, plain_g = jax.jit(jax.value_and_grad(loss(1)))(params)
  shared_l, shared_g = jax.jit(jax.value_and_grad(loss(3)))(params)
  np.testing.assert_allclose(shared_l, plain_l, rtol=1e-5)
  assert rel_diff(plain_g, shared_g) < 1e-5
  # The completion pass is rematerialised too: one region per layer in each of the two passes,
  # plus the vocabulary-chunk body's.
  jaxpr = str(jax.make_jaxpr(jax.grad(loss(3)))(params))
  assert len(re.findall(r"\b(?:checkpoint|remat2?)\[", jaxpr)) == 2 * 3 + 1


def test_a_row_reads_its_runs_prompt():
  """Shared: row 1 scores its completion after row 0's prompt, whatever its own slots hold."""
  graphdef, params = _model()
  tokens, mask = _batch(num_runs=2, share=2)
  other = tokens.at[1, P - 3 : P].set(5)  # row 1's last three prompt tokens (real ones)
  logps = jax.jit(
    lambda t, share: models.token_logps(graphdef, params, t, mask, window=models.Window(P, share)),
    static_argnums=1,
  )
  shared, per_row_own, per_row_run = logps(other, 2), logps(other, 1), logps(tokens, 1)
  _close(per_row_run, shared)
  assert float(jnp.max(jnp.abs(per_row_own[1] - shared[1]))) > 1e-3


def test_share_must_divide_the_rows_and_needs_a_prompt():
  graphdef, params = _model()
  tokens, mask = _batch(num_runs=3, share=2)
  with pytest.raises(ValueError, match="share = 4 must"):
    models.token_logps(graphdef, params, tokens, mask, window=models.Window(P, 4))
  with pytest.raises(ValueError, match="prompt_len"):
    models.token_logps(graphdef, params, tokens, mask, window=models.Window(0, 2))


def share(e, *rows_parts_blocks):
  return prompt_share(e.loss.share_prompt, e.sampling.group_size, *rows_parts_blocks)


def test_prompt_share_keeps_runs_inside_groups(load_cfg):
  cfg = load_cfg(("sampling.group_size=8", "loss.share_prompt=true"))
  # (rows, parts, device blocks) -> gcd(G, rows per part per block)
  assert share(cfg, 64, 1, 1) == 8
  assert share(cfg, 64, 8, 1) == 8
  assert share(cfg, 64, 8, 2) == 4  # a group's 8 rows: 4 in each device's part
  assert share(cfg, 48, 4, 2) == 2  # 6 rows per block: runs of 2 stay inside groups
  assert share(cfg, 64, 64, 1) == 1
  assert share(cfg.with_overrides({"loss.share_prompt": False}), 64, 1, 1) == 1


def _prompt_len(cfg, batch):
  return batch.tokens_NxL.shape[1] - cfg.sampling.max_new_tokens


def _shared_batch(cfg, synthetic_batch):
  """The synthetic update batch with one prompt per group, as rollouts pack it."""
  batch = synthetic_batch(cfg)
  G, P = cfg.sampling.group_size, _prompt_len(cfg, batch)
  batch.tokens_NxL[:, :P] = np.repeat(batch.tokens_NxL[::G, :P], G, axis=0)
  return batch


@pytest.mark.parametrize(
  "extra,devices",
  [
    ((), 1),
    (("loss.micro_batch_size=8",), 2),  # runs of 4: half a group per device and part
    (("loss.micro_batch_size=4", "loss.kl_coef=0.05", "loss.num_iterations=2"), 8),
  ],
)
def test_update_with_shared_prompts_equals_the_per_row_update(
  extra, devices, load_cfg, synthetic_batch, rel_diff, sgd_grad
):
  batch = _shared_batch(load_cfg(), synthetic_batch)
  g_plain, m_plain = sgd_grad(extra, batch, devices)
  g_shared, m_shared = sgd_grad((*extra, "loss.share_prompt=true"), batch, devices)
  assert rel_diff(g_plain, g_shared) < 2e-5
  for key in ("loss/total", "grad/norm", "rollout/logp_gap_mean"):
    np.testing.assert_allclose(m_shared[key], m_plain[key], rtol=1e-4)


def test_share_prompt_key_reaches_the_update(load_cfg, synthetic_batch, rel_diff, sgd_grad):
  """On a batch whose groups do NOT share a prompt, the key changes the gradient."""
  batch = synthetic_batch(load_cfg())  # random prompt per row
  g_plain, _ = sgd_grad((), batch)
  g_shared, _ = sgd_grad(("loss.share_prompt=true",), batch)
  assert rel_diff(g_plain, g_shared) > 1e-2


def test_check_shared_prompts(load_cfg, synthetic_batch):
  cfg = load_cfg()
  batch = _shared_batch(cfg, synthetic_batch)
  G, P = cfg.sampling.group_size, _prompt_len(cfg, batch)
  check_shared_prompts(batch, G, P)
  bad = batch.replace(input_mask_NxL=batch.input_mask_NxL.copy())
  bad.input_mask_NxL[G + 1, 0] = 0  # row 1 of group 1 pads its first slot
  with pytest.raises(ValueError, match="group 1 .*input_mask_NxL"):
    check_shared_prompts(bad, G, P)
  with pytest.raises(ValueError, match="not groups of 3"):
    check_shared_prompts(batch, 3, P)


def _sample(graphdef, params, tokens, mask, share, **kw):
  prompt_NxP, mask_NxP = tokens[:, :P], mask[:, :P]
  kw = dict(max_new_tokens=6, eos_id=V + 1, pad_id=0, prompt_share=share, **kw)
  return sampling.sample(
    graphdef, params, prompt_NxP, mask_NxP, jax.random.key(3), sampling.Decode(**kw)
  )


def test_sampler_prefills_each_prompt_once():
  graphdef, params = _model()
  tokens, mask = _batch(num_runs=4, share=4)
  ref = _sample(graphdef, params, tokens, mask, 1)
  for share in (2, 4):
    out = _sample(graphdef, params, tokens, mask, share)
    np.testing.assert_array_equal(out.tokens_NxT, ref.tokens_NxT)
    np.testing.assert_allclose(out.logps_NxT, ref.logps_NxT, atol=1e-5)
  # A row whose prompt differs from its run's first one is sampled after the run's prompt.
  other = tokens.at[1, P - 2 : P].set(5)
  shared = _sample(graphdef, params, other, mask, 2)
  np.testing.assert_array_equal(shared.tokens_NxT, ref.tokens_NxT)
  own = _sample(graphdef, params, other, mask, 1)
  assert float(jnp.max(jnp.abs(own.logps_NxT[1] - shared.logps_NxT[1]))) > 1e-3
  with pytest.raises(ValueError, match="prompt_share = 3"):
    _sample(graphdef, params, tokens, mask, 3)


class _Task:
  pad_id, eos_id, stop_ids = 0, V + 1, (V + 1,)

  def decode(self, tokens_NxT, mask_NxT):
    return [" ".join(map(str, t[m > 0])) for t, m in zip(tokens_NxT, mask_NxT)]


def test_generate_shares_prompts_within_each_devices_rows(load_cfg):
  """16 rows in groups of 4 over 8 devices: runs of 2 rows (one device's) share a prefill."""
  graphdef, params = _model()
  tokens, mask = _batch(num_runs=4, share=4)
  prompts_NxP = np.asarray(tokens[:, :P])
  mesh = shard_lib.make_mesh(load_cfg().mesh, jax.devices())
  assert shard_lib.batch_size_multiple(mesh) == 8 and group_run(4, 16, 1, 8) == 2
  params = shard_lib.replicate(params, mesh)
  prompt_mask_NxP = np.asarray(mask[:, :P])
  policy = Policy(graphdef, params, mesh, SampleSettings(6))
  run = lambda g: generate(policy, _Task(), prompts_NxP, prompt_mask_NxP, jax.random.key(0), g)
  ref, out = run(1), run(4)
  np.testing.assert_array_equal(out.tokens_NxT, ref.tokens_NxT)
  np.testing.assert_allclose(out.logps_NxT, ref.logps_NxT, atol=1e-5)
  assert out.completions == ref.completions


def test_strategy_draws_share_contexts_and_their_padding_rows(load_cfg):
  """3 contexts × 2 rows over 4 devices: padded to 8 rows by copying the last, runs of 2."""
  from grpo_jax.strategy import previews as two_stage

  graphdef, params = _model()
  tokens, mask = _batch(num_runs=3, share=2)
  mesh = shard_lib.make_mesh(load_cfg().mesh, jax.devices()[:4])
  params = shard_lib.replicate(params, mesh)
  policy = Policy(graphdef, params, mesh, SampleSettings(6))
  draw = lambda t, share: two_stage.draw_rows(
    policy, np.asarray(t[:, :P]), np.asarray(mask[:, :P]), jax.random.key(1),
    stop_ids=V + 1, pad_id=0, prompt_share=share,
  )  # fmt: skip
  ref, out = draw(tokens, 1), draw(tokens, 2)
  assert out.tokens_NxT.shape == (6, 6) and group_run(2, 8, 1, 4) == 2
  np.testing.assert_array_equal(out.tokens_NxT, ref.tokens_NxT)
  np.testing.assert_allclose(out.logps_NxT, ref.logps_NxT, atol=1e-5)
  # Shared for real: row 5 reads its run's context (row 4's) when its own differs.
  other = tokens.at[5, P - 2 : P].set(5)
  np.testing.assert_allclose(draw(other, 2).logps_NxT, ref.logps_NxT, atol=1e-5)
  assert np.max(np.abs(draw(other, 1).logps_NxT[5] - ref.logps_NxT[5])) > 1e-3
