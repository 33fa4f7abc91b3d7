"""``sampling.engine = "vllm"`` on SmolLM2-135M-Instruct (all 30 layers, float32): vLLM's
greedy tokens equal our jitted sampler's for 32 steps on a left-padded chat batch, with the same
log-probs; weights pushed in memory change the tokens to the pushed model's and back; G copies
of a prompt are one request of n = G, seeded by the rng, no seed twice in a call (a prompt in two
consecutive groups gets 2G different completions); the sampler's log-probs are the trainer's up
to kernel numerics (the mismatch the correction weighs); with top-k / top-p both engines report
the log-prob under the truncated, renormalised distribution."""

import importlib.util
import types

import jax
import numpy as np
import pytest

# Not imported here: vLLM's import replaces the process's SIGSEGV handler (VllmEngine.start
# restores it).
if importlib.util.find_spec("vllm") is None:
  pytest.skip("needs vLLM (the .[vllm] extra)", allow_module_level=True)
torch = pytest.importorskip("torch")

from grpo_jax import models  # noqa: E402
from grpo_jax import sharding as shard_lib  # noqa: E402
from grpo_jax.sampling import engine as engine_lib  # noqa: E402
from grpo_jax.sampling import vllm_engine  # noqa: E402
from grpo_jax.sampling.engine import generate_with  # noqa: E402
from grpo_jax.sampling.generate import generate  # noqa: E402
from grpo_jax.sampling.next_token import truncate  # noqa: E402
from grpo_jax.sampling.policy import Policy, SampleSettings  # noqa: E402
from grpo_jax.sampling.vllm_engine import VllmEngine  # noqa: E402

QUESTIONS = (
  "What is 7 times 8?",
  "Name a primary colour.",
  "Write one short sentence about cats.",
  "Who wrote the play Hamlet, and when?",
)
T = 32

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm_engine")]


@pytest.fixture(scope="module")
def setup(smollm2_hf_dir, load_cfg):
  path = str(smollm2_hf_dir)
  ours = models.load_hf(path)
  tok = ours.tokenizer
  tok.padding_side = "left"
  texts = [
    tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                            add_generation_prompt=True)
    for q in QUESTIONS
  ]  # fmt: skip
  batch = tok(texts, padding=True, return_tensors="np")
  prompts, mask = batch["input_ids"].astype(np.int32), batch["attention_mask"].astype(np.int32)
  assert len(set(mask.sum(1))) > 2  # different lengths: real left padding
  mesh = shard_lib.make_mesh(load_cfg().mesh, jax.devices()[:1])
  task = types.SimpleNamespace(
    stop_ids=(tok.eos_token_id,),
    pad_id=tok.pad_token_id,
    decode=lambda t, m: [tok.decode(r[k > 0], skip_special_tokens=True) for r, k in zip(t, m)],
  )
  # One torch thread: the suite's other worker holds the second core, and vLLM's OpenMP threads
  # spin against a busy core (several times slower). vLLM fixes the count once built.
  torch.set_num_threads(1)
  engine = VllmEngine(path, "float32")
  return ours, engine, task, prompts, mask, mesh


def _policy(ours, mesh, params=None, **settings):
  return Policy(ours.graphdef, params or ours.params, mesh, SampleSettings(T, **settings))


def test_greedy_tokens_and_logps_equal_the_jitted_sampler(setup):
  ours, engine, task, prompts, mask, mesh = setup
  policy = _policy(ours, mesh, temperature=0.0)
  ref = generate(policy, task, prompts, mask, jax.random.key(0))
  got, push_s = generate_with(engine, policy, task, prompts, mask, jax.random.key(0))
  assert push_s > 0  # the first call moves our parameters in
  np.testing.assert_array_equal(got.tokens_NxT, ref.tokens_NxT)
  np.testing.assert_array_equal(got.mask_NxT, ref.mask_NxT)
  np.testing.assert_array_equal(got.truncated_N, ref.truncated_N)
  assert got.completions == ref.completions
  on = ref.mask_NxT > 0
  np.testing.assert_allclose(got.logps_NxT[on], ref.logps_NxT[on], atol=2e-3)
  assert 0 < ref.mask_NxT.sum() < ref.mask_NxT.size  # some rows stopped, some ran to T


def test_pushed_weights_change_the_tokens_and_back(setup):
  ours, engine, task, prompts, mask, mesh = setup
  rng = jax.random.key(0)
  base = _policy(ours, mesh, temperature=0.0)
  before, _ = generate_with(engine, base, task, prompts, mask, rng)
  again, push_s = generate_with(engine, base, task, prompts, mask, rng)
  assert push_s == 0.0  # the same tree: nothing to move
  np.testing.assert_array_equal(again.tokens_NxT, before.tokens_NxT)
  noise = jax.random.split(jax.random.key(3), len(jax.tree.leaves(ours.params)))
  leaves, tree = jax.tree.flatten(ours.params)
  moved = [x + 0.02 * jax.random.normal(k, x.shape, x.dtype) for x, k in zip(leaves, noise)]
  other = _policy(ours, mesh, jax.tree.unflatten(tree, moved), temperature=0.0)
  pushed, push_s = generate_with(engine, other, task, prompts, mask, rng)
  assert push_s > 0
  ref = generate(other, task, prompts, mask, rng)
  assert (pushed.tokens_NxT != before.tokens_NxT).any()
  np.testing.assert_array_equal(pushed.tokens_NxT, ref.tokens_NxT)  # the pushed model's tokens
  back, _ = generate_with(engine, _policy(ours, mesh, temperature=0.0), task, prompts, mask, rng)
  np.testing.assert_array_equal(back.tokens_NxT, before.tokens_NxT)


def test_groups_are_seeded_requests_with_the_trainers_logps(setup):
  ours, engine, task, prompts, mask, mesh = setup
  G = 4
  rows_P, rows_mask = np.repeat(prompts[:2], G, axis=0), np.repeat(mask[:2], G, axis=0)
  policy = _policy(ours, mesh, temperature=1.0)
  draw = lambda seed: generate_with(engine, policy, task, rows_P, rows_mask,
                                    jax.random.key(seed), G)[0]  # fmt: skip
  a, b, c = draw(0), draw(0), draw(1)
  np.testing.assert_array_equal(a.tokens_NxT, b.tokens_NxT)  # the rng seeds the requests
  assert (a.tokens_NxT != c.tokens_NxT).any()
  assert len({tuple(r) for r in a.tokens_NxT[:G]}) > 1  # n = G different samples of a prompt
  # The trainer's log-probs of the same tokens (one forward pass): equal up to kernel numerics.
  tokens = np.concatenate([rows_P, a.tokens_NxT], axis=1)
  full_mask = np.concatenate([rows_mask, a.mask_NxT], axis=1)
  logits = np.asarray(ours(tokens, full_mask))[:, rows_P.shape[1] - 1 : -1]
  logps = jax.nn.log_softmax(logits, axis=-1)
  trainer = np.take_along_axis(np.asarray(logps), a.tokens_NxT[..., None], axis=-1)[..., 0]
  on = a.mask_NxT > 0
  gap = np.abs(trainer - a.logps_NxT)[on]
  assert gap.mean() < 1e-3 and gap.max() < 2e-2, (gap.mean(), gap.max())
  shifted = np.abs(trainer[:, 1:] - a.logps_NxT[:, :-1])[on[:, 1:] & on[:, :-1]]
  assert shifted.mean() > 0.1  # the comparison can fail: one slot off is far off


def test_a_prompt_in_two_consecutive_groups_gets_different_completions(setup, monkeypatch):
  ours, engine, task, prompts, mask, mesh = setup
  G = 4
  rows_P, rows_mask = np.repeat(prompts[2:3], 2 * G, axis=0), np.repeat(mask[2:3], 2 * G, axis=0)
  policy = _policy(ours, mesh, temperature=1.0)
  draw = lambda: generate_with(engine, policy, task, rows_P, rows_mask, jax.random.key(5), G)[0]
  rows = lambda out: [tuple(r[m > 0]) for r, m in zip(out.tokens_NxT, out.mask_NxT)]
  assert len(set(rows(draw()))) == 2 * G  # 2G seeds, 2G completions
  # The old seeding (request i: base + i) repeats G − 1 of them: vLLM seeds child j seed + j,
  # so group 1's child j is group 0's child j + 1.
  monkeypatch.setattr(vllm_engine, "request_seeds", lambda base, R, G: base + np.arange(R))
  old = rows(draw())
  assert [old[G + j] == old[j + 1] for j in range(G - 1)] == [True] * (G - 1)


def _truncated_logps(ours, prompts, mask, out, temperature, top_k, top_p):
  """(our sampler's log-probs of ``out``'s tokens: teacher-forced logits, our truncation,
  renormalised; whether each token lies in our truncation set; the untruncated log-probs)."""
  tokens = np.concatenate([prompts, out.tokens_NxT], axis=1)
  full_mask = np.concatenate([mask, out.mask_NxT], axis=1)
  logits_NxTxV = np.asarray(ours(tokens, full_mask))[:, prompts.shape[1] - 1 : -1] / temperature
  N, T, V = logits_NxTxV.shape
  vals_MxK, idx_MxK = truncate(logits_NxTxV.reshape(N * T, V), top_k, top_p)
  logp_MxK = jax.nn.log_softmax(vals_MxK, axis=-1)
  hit_MxK = np.asarray(idx_MxK) == out.tokens_NxT.reshape(-1, 1)
  logp_NxT = np.where(hit_MxK, np.asarray(logp_MxK), 0.0).sum(-1).reshape(N, T)
  full_NxTxV = np.asarray(jax.nn.log_softmax(logits_NxTxV, axis=-1))
  untruncated_NxT = np.take_along_axis(full_NxTxV, out.tokens_NxT[..., None], axis=-1)[..., 0]
  return logp_NxT, hit_MxK.any(-1).reshape(N, T), untruncated_NxT


def test_truncated_draws_report_the_same_log_probs_on_both_engines(setup):
  """Top-k and top-p on: vLLM's log-probs of its tokens equal ours of the same tokens after the
  same truncation (``next_token.truncate``), not the untruncated ones; and where both engines
  drew the same tokens so far, the two samplers' own log-probs agree."""
  ours, engine, task, prompts, mask, mesh = setup
  settings = dict(temperature=0.7, top_k=2, top_p=0.95)
  policy = _policy(ours, mesh, **settings)
  got, _ = generate_with(engine, policy, task, prompts, mask, jax.random.key(1))
  logp_NxT, kept_NxT, untruncated_NxT = _truncated_logps(ours, prompts, mask, got, **settings)
  on = got.mask_NxT > 0
  assert kept_NxT[on].all()  # vLLM drew only from our truncation set
  np.testing.assert_allclose(got.logps_NxT[on], logp_NxT[on], atol=2e-3)
  assert (logp_NxT - untruncated_NxT)[on].max() > 0.05  # the comparison can fail
  # Our sampler on the same prompts: its returned log-probs on the positions where its row and
  # vLLM's agree up to and including the token.
  mine = generate(policy, task, prompts, mask, jax.random.key(1))
  same_NxT = np.cumprod(mine.tokens_NxT == got.tokens_NxT, axis=1).astype(bool) & on
  assert same_NxT.sum() > 0
  np.testing.assert_allclose(mine.logps_NxT[same_NxT], got.logps_NxT[same_NxT], atol=2e-3)


def test_the_engine_implements_the_protocol():
  assert isinstance(VllmEngine("x"), engine_lib.RolloutEngine)
  assert isinstance(engine_lib.JaxEngine(), engine_lib.RolloutEngine)
