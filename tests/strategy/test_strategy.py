"""Strategy-conditioned sampling (METHODS §5): allocation, merge, packing, stop ids, and a real
two-stage rollout on a tiny countdown policy whose batch must line up token for token."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pathlib

import jax
import numpy as np
import pytest

from grpo_jax import models, sampling
from grpo_jax import sharding as shard_lib
from grpo_jax.config import files as config_file
from grpo_jax.data import CountdownTask
from grpo_jax.eval.runner import EvalLoop, eval_policy
from grpo_jax.rollout.one_stage import OneStageRollout, Policy, SampleSettings
from grpo_jax.rollout.registry import build_rollout, rollout_kind
from grpo_jax.rollout.two_stage import TwoStageRollout
from grpo_jax.strategy import layout

ROOT = pathlib.Path(__file__).resolve().parents[2]


# -- host bookkeeping ---------------------------------------------------------------------------


@pytest.mark.parametrize(
  "G,K,expected",
  [(8, 4, [2, 2, 2, 2]), (8, 3, [3, 3, 2]), (5, 5, [1] * 5), (7, 1, [7]), (10, 4, [3, 3, 2, 2])],
)
def test_allocate_spreads_the_remainder(G, K, expected):
  assert layout.allocate(G, K).tolist() == expected
  assert layout.preview_of_rollout(G, K).tolist() == sum(
    ([k] * c for k, c in enumerate(expected)), []
  )


@pytest.mark.parametrize("K", [0, 9])
def test_allocate_rejects_bad_k(K):
  with pytest.raises(ValueError, match="num_previews"):
    layout.allocate(8, K)


def test_merge_identical_within_a_prompt_only():
  texts = [
    "*-;",
    " *- ; ",
    "+ +",
    "++",  # prompt 0: "*-;" differs from "*- ;" (inner space)
    "A b",
    "a  B",
    "a b ",
    "x",
  ]  # prompt 1: three spellings of "a b"
  assert layout.preview_ids(texts, 4, False).tolist() == list(range(8))
  assert layout.preview_ids(texts, 4, True).tolist() == [0, 1, 2, 3, 4, 4, 4, 7]
  same = ["z"] * 4
  assert layout.preview_ids(same, 2, True).tolist() == [0, 0, 2, 2]  # never across prompts


def test_row_ids_follow_preview_index():
  merged_BK = np.array([0, 0, 2, 3, 4, 5])  # B=2, K=3; prompt 0 merged previews 0 and 1
  group_N, sub_N, preview_N = layout.row_ids(merged_BK, 4, 3)  # counts [2, 1, 1]
  assert group_N.tolist() == [0] * 4 + [1] * 4
  assert preview_N.tolist() == [0, 0, 1, 2, 3, 3, 4, 5]
  assert sub_N.tolist() == [0, 0, 0, 2, 3, 3, 4, 5]


def test_left_align_matches_python():
  rng = np.random.default_rng(0)
  tokens = rng.integers(3, 20, (6, 7))
  mask = np.concatenate(
    [
      np.arange(4)[None] >= rng.integers(0, 4, (6, 1)),
      np.arange(3)[None] < rng.integers(0, 4, (6, 1)),
    ],
    1,
  ).astype(np.int32)
  out_t, out_m = layout.left_align(tokens, mask, pad_id=0)
  for t, m, ot, om in zip(tokens, mask, out_t, out_m):
    real = t[m == 1].tolist()
    assert ot.tolist() == [0] * (7 - len(real)) + real
    assert om.tolist() == [0] * (7 - len(real)) + [1] * len(real)


@pytest.mark.parametrize("train_on_preview", [False, True])
def test_pack_responses_matches_python(train_on_preview):
  rng = np.random.default_rng(1)
  N, M, T, pad = 5, 3, 4, 0
  lp, lc = rng.integers(0, M + 1, N), rng.integers(0, T + 1, N)
  lp[0], lc[0] = M, T
  prev = np.where(np.arange(M) < lp[:, None], rng.integers(3, 9, (N, M)), pad)
  comp = np.where(np.arange(T) < lc[:, None], rng.integers(10, 19, (N, T)), pad)
  out = layout.pack_responses(
    layout.Segment(prev, prev != pad, prev * 0.5),
    layout.Segment(comp, comp != pad, -comp * 1.0),
    pad,
    train_on_preview,
  )
  for n in range(N):
    p, c = prev[n, : lp[n]].tolist(), comp[n, : lc[n]].tolist()
    fill = M + T - len(p) - len(c)
    assert out["tokens_NxR"][n].tolist() == p + c + [pad] * fill
    assert out["input_mask_NxR"][n].tolist() == [1] * (len(p) + len(c)) + [0] * fill
    assert (
      out["loss_mask_NxR"][n].tolist()
      == [int(train_on_preview)] * len(p) + [1] * len(c) + [0] * fill
    )
    assert (
      out["logps_NxR"][n].tolist() == [0.5 * x for x in p] + [-1.0 * x for x in c] + [0.0] * fill
    )


def test_subgroup_metrics_by_hand():
  rewards = np.array([1, 1, 0, 0, 1, 0, 0, 0], np.float32)
  group = np.array([0, 0, 0, 0, 1, 1, 1, 1])
  sub = np.array([0, 0, 2, 2, 4, 4, 4, 7])
  m = layout.subgroup_metrics(rewards, group, sub, [3, 2, 3, 1], [2, 2], [1, 1, 0, 1], 0)
  assert m["strategy/subgroup_size_min"] == 1 and m["strategy/subgroup_size_max"] == 3
  # prompt 0: means 1 and 0 -> spread 1; prompt 1: means 1/3 and 0 -> 1/3.
  assert m["strategy/subgroup_reward_spread"] == pytest.approx((1 + 1 / 3) / 2)
  assert m["strategy/preview_len_mean"] == 2.25 and m["strategy/preview_stopped_frac"] == 0.75
  assert m["strategy/subgroups_per_prompt"] == 2.0


# -- the sampler's stop set ---------------------------------------------------------------------


def test_stop_set_cuts_the_unstopped_sample_at_the_first_stop():
  graphdef, params = models.init_params(models.PRESETS["test"], 0)
  V = models.PRESETS["test"].vocab_size
  rng = np.random.default_rng(3)
  prompt = jax.numpy.asarray(rng.integers(1, V, (16, 5)), jax.numpy.int32)
  mask = jax.numpy.ones_like(prompt)
  key = jax.random.PRNGKey(7)
  kw = dict(max_new_tokens=10, pad_id=0, temperature=1.0)
  free = sampling.sample(graphdef, params, prompt, mask, key, sampling.Decode(eos_id=V + 5, **kw))
  stops = tuple(int(x) for x in np.asarray(free.tokens_NxT)[:, 2][:2])  # tokens that do occur
  cut = sampling.sample(graphdef, params, prompt, mask, key, sampling.Decode(eos_id=stops, **kw))
  for n, row in enumerate(np.asarray(free.tokens_NxT)):
    hits = np.flatnonzero(np.isin(row, stops))
    end = hits[0] + 1 if hits.size else 10
    assert np.asarray(cut.tokens_NxT)[n].tolist() == row[:end].tolist() + [0] * (10 - end)
    assert np.asarray(cut.mask_NxT)[n].tolist() == [1] * end + [0] * (10 - end)
    np.testing.assert_allclose(
      np.asarray(cut.logps_NxT)[n, :end], np.asarray(free.logps_NxT)[n, :end], rtol=1e-5, atol=1e-6
    )
    assert bool(cut.truncated_N[n]) == (hits.size == 0)


# -- the two-stage rollout on a tiny countdown policy --------------------------------------------


def _setup(**overrides):
  over = {"strategy.enabled": "true", "strategy.source": "online", **overrides}
  cfg = config_file.load(str(ROOT / "configs/tiny_test.py"), [f"{k}={v}" for k, v in over.items()])
  task = CountdownTask.from_config(cfg)
  model_cfg = models.ModelConfig.from_config(cfg.model, vocab_size=len(task.tokenizer))
  graphdef, params = models.init_params(model_cfg, cfg.seed)
  # One device keeps compiles short; the launcher test runs the same code on eight.
  mesh = shard_lib.make_mesh(cfg.mesh, devices=jax.devices()[:1])
  return cfg, task, graphdef, shard_lib.replicate(params, mesh), mesh


@pytest.fixture(scope="module")
def tiny():
  return _setup(
    **{
      "strategy.num_previews": 3,
      "strategy.preview_template": "=",
      "strategy.max_preview_tokens": 3,
    }
  )


def test_two_stage_batch_lines_up_with_tokens(tiny):
  cfg, task, graphdef, params, mesh = tiny
  strat = TwoStageRollout(cfg, task)
  problems = task.train_problems(0, cfg.sampling.prompts_per_step)
  B, G, K, M = len(problems), cfg.sampling.group_size, 3, 3
  policy = Policy(graphdef, params, mesh, SampleSettings.from_config(cfg.sampling))
  batch = strat(policy, problems, jax.random.PRNGKey(1))
  P = strat.prompt_len
  assert P == task.prompt_len + 1  # the one-character template is part of the prompt
  tokens, inp, loss = batch.tokens_NxL, batch.input_mask_NxL, batch.completion_mask_NxT
  assert tokens.shape == (B * G, P + M + cfg.sampling.max_new_tokens)
  assert loss.shape == batch.sample_logps_NxT.shape == (B * G, tokens.shape[1] - P)
  # The trainer's log-probs on the packed rows equal the sampler's on every response token.
  logps = jax.jit(models.token_logps, static_argnums=(0, 4))(
    graphdef, params, tokens, inp, cfg.sampling.temperature
  )
  resp_mask = inp[:, P:]
  np.testing.assert_allclose(
    np.asarray(logps)[:, P:] * resp_mask, batch.sample_logps_NxT * resp_mask, atol=2e-5
  )
  assert np.all(loss <= resp_mask)
  delim, eos = task.tokenizer.convert_tokens_to_ids(";"), task.eos_id
  for n in range(B * G):
    b, sub = n // G, batch.subgroup_ids_N[n]
    assert batch.group_ids_N[n] == b and b * K <= sub < (b + 1) * K
    assert tokens[n, :P].tolist() == task.encode_prompts([problems[b]])[0][0].tolist() + [
      task.tokenizer.convert_tokens_to_ids("=")
    ]
    resp = tokens[n, P:][resp_mask[n] == 1]
    preview = tokens[n, P:][(resp_mask[n] == 1) & (loss[n] == 0)]
    completion = tokens[n, P:][loss[n] == 1]
    assert resp.tolist() == preview.tolist() + completion.tolist()  # preview first, contiguous
    # A preview stops at its first delimiter or after M tokens, and never holds EOS.
    assert eos not in preview.tolist() and len(preview) <= M
    assert delim not in preview[:-1].tolist()
    # Rows of one subgroup share the preview; the reward reads the completion only.
    same = np.flatnonzero(batch.subgroup_ids_N == sub)
    for m in same:
      assert tokens[m, P:][(resp_mask[m] == 1) & (loss[m] == 0)].tolist() == preview.tolist()
    text = task.decode(completion[None], np.ones((1, len(completion))))[0]
    prefix = ";" if len(preview) and preview[-1] == delim else ""
    assert batch.rewards_N[n] == task.reward(problems[b], prefix + text)
  # Remainder: G=4 over K=3 previews -> sizes 2, 1, 1, logged.
  m = batch.metrics
  assert m["strategy/subgroup_size_min"] == 1 and m["strategy/subgroup_size_max"] == 2
  assert m["strategy/alloc_remainder"] == 1.0


def test_train_on_preview_adds_preview_tokens_to_the_loss():
  cfg, task, graphdef, params, mesh = _setup(
    **{"strategy.num_previews": 2, "strategy.train_on_preview": "true"}
  )
  strat = TwoStageRollout(cfg, task)
  problems = task.train_problems(0, cfg.sampling.prompts_per_step)
  policy = Policy(graphdef, params, mesh, SampleSettings.from_config(cfg.sampling))
  batch, _ = strat.sample(policy, problems, 4, jax.random.PRNGKey(2))
  np.testing.assert_array_equal(
    batch.completion_mask_NxT, batch.input_mask_NxL[:, strat.prompt_len :]
  )


def test_merge_identical_shares_ids_of_equal_previews():
  cfg, task, graphdef, params, mesh = _setup(
    **{"strategy.num_previews": 4, "strategy.merge_identical": "true", "sampling.temperature": 0.0}
  )
  strat = TwoStageRollout(cfg, task)
  problems = task.train_problems(0, cfg.sampling.prompts_per_step)
  policy = Policy(graphdef, params, mesh, SampleSettings.from_config(cfg.sampling))
  batch, _ = strat.sample(policy, problems, 4, jax.random.PRNGKey(3))
  # Greedy previews of one prompt are identical: one subgroup per prompt, the first preview.
  assert batch.subgroup_ids_N.tolist() == [4 * (n // 4) for n in range(32)]
  assert batch.metrics["strategy/distinct_previews"] == 1.0


def test_k1_and_disabled_reproduce_plain_sampling(tiny):
  cfg, task, graphdef, params, mesh = tiny
  problems = task.train_problems(0, cfg.sampling.prompts_per_step)
  policy = Policy(graphdef, params, mesh, SampleSettings.from_config(cfg.sampling))
  key = jax.random.PRNGKey(4)
  plain = OneStageRollout(cfg, task).sample(policy, problems, 4, key)
  assert rollout_kind(cfg) == "two_stage"
  for over in ({"strategy.num_previews": 1}, {"strategy.enabled": "false"}):
    cfg1 = config_file.load(
      str(ROOT / "configs/tiny_test.py"),
      ["strategy.enabled=true"] + [f"{k}={v}" for k, v in over.items()],
    )
    strat = build_rollout(cfg1, task)
    assert rollout_kind(cfg1) == "one_stage" and strat.prompt_len == task.prompt_len
    batch = strat.sample(policy, problems, 4, key)
    for k, v in plain.arrays().items():
      np.testing.assert_array_equal(getattr(batch, k), v)
    assert batch.completions_N == plain.completions_N


def test_eval_with_strategy_summarises_two_stage_samples(tiny):
  cfg, task, graphdef, params, mesh = tiny
  strat = TwoStageRollout(cfg, task)
  problems = task.eval_problems(5)
  policy = eval_policy(graphdef, params, mesh, cfg.eval, cfg.sampling.max_new_tokens)
  loop = EvalLoop.from_config(strat, cfg.eval, chunk_problems=4, progress=False)
  res = loop.evaluate(policy, problems, jax.random.PRNGKey(5))
  assert 0.0 <= res["pass@1"] <= res["pass@4"] <= 1.0
  assert res["sampling"]["strategy"]["num_previews"] == 3
