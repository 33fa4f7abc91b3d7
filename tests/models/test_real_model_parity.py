"""SmolLM2-135M-Instruct (the real checkpoint of ``real_model.py``) through ``load_hf`` against
transformers: logits on a left-padded chat batch, 32 greedy tokens against ``generate``, a
``save_hf`` round trip, and the sampler–trainer log-prob gap on sampled completions.

SmolLM2's pad token is its eos (<|im_end|>): masks come from the tokenizer, never from ids."""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

from grpo_jax import models, sampling
from grpo_jax.train.update import rollout_metrics

QUESTIONS = ("What is 7 times 8?", "Name a primary colour.", "Write one short sentence about cats.")
T = 32


@pytest.fixture(scope="module")
def setup(smollm2_hf_dir):
  path = str(smollm2_hf_dir)
  ours = models.load_hf(path)
  hf = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
  tok = ours.tokenizer
  tok.padding_side = "left"
  texts = [
    tok.apply_chat_template(
      [{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True
    )
    for q in QUESTIONS
  ]
  batch = tok(texts, padding=True, return_tensors="np")
  prompt_NxP, mask_NxP = batch["input_ids"].astype(np.int32), batch["attention_mask"]
  assert len(set(mask_NxP.sum(1))) == len(QUESTIONS)  # different lengths: real left padding
  return ours, hf, tok, prompt_NxP, mask_NxP.astype(np.int32)


def _hf_logits(hf, tokens, mask):
  positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
  with torch.no_grad():
    return hf(
      torch.tensor(tokens), attention_mask=torch.tensor(mask), position_ids=torch.tensor(positions)
    ).logits.numpy()


def test_padded_logits_match_transformers(setup):
  ours, hf, _, prompt, mask = setup
  keep = mask.astype(bool)
  diff = np.abs(np.asarray(ours(prompt, mask)) - _hf_logits(hf, prompt, mask))[keep]
  assert diff.max() <= 1e-3


def test_greedy_tokens_match_generate(setup):
  ours, hf, tok, prompt, mask = setup
  with torch.no_grad():
    ref = hf.generate(
      torch.tensor(prompt),
      attention_mask=torch.tensor(mask),
      max_new_tokens=T,
      do_sample=False,
      eos_token_id=tok.eos_token_id,
      pad_token_id=tok.pad_token_id,
    ).numpy()[:, prompt.shape[1] :]
  out = sampling.sample(
    ours.graphdef,
    ours.params,
    prompt,
    mask,
    jax.random.PRNGKey(0),
    sampling.Decode(
      max_new_tokens=T, eos_id=tok.eos_token_id, pad_id=tok.pad_token_id, temperature=0.0
    ),
  )
  got = np.asarray(out.tokens_NxT)
  np.testing.assert_array_equal(got[:, : ref.shape[1]], ref)
  assert (got[:, ref.shape[1] :] == tok.pad_token_id).all()


def test_save_hf_loads_in_transformers(setup, tmp_path):
  ours, _, _, prompt, mask = setup
  models.save_hf(ours, tmp_path)
  hf = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), dtype=torch.float32)
  keep = mask.astype(bool)
  diff = np.abs(np.asarray(ours(prompt, mask)) - _hf_logits(hf.eval(), prompt, mask))[keep]
  assert diff.max() <= 1e-3


def test_sampler_trainer_logp_gap_is_small_and_can_fail(setup):
  ours, _, tok, prompt, mask = setup
  out = sampling.sample(
    ours.graphdef,
    ours.params,
    prompt,
    mask,
    jax.random.PRNGKey(1),
    sampling.Decode(
      max_new_tokens=T, eos_id=tok.eos_token_id, pad_id=tok.pad_token_id, temperature=1.0
    ),
  )
  tokens_NxL = jnp.concatenate([prompt, out.tokens_NxT], axis=1)
  mask_NxL = jnp.concatenate([mask, out.mask_NxT], axis=1)
  P = prompt.shape[1]
  logps_NxT = models.token_logps(ours.graphdef, ours.params, tokens_NxL, mask_NxL)[:, P:]
  N = prompt.shape[0]
  batch = SimpleNamespace(  # the fields of an UpdateBatch that rollout_metrics reads
    completion_mask_NxT=out.mask_NxT,
    sample_logps_NxT=out.logps_NxT,
    group_ids_N=jnp.arange(N),
    rewards_N=jnp.zeros(N),
  )
  clean = rollout_metrics(batch, logps_NxT)
  assert float(clean["rollout/logp_gap_mean"]) < 1e-4
  assert float(clean["rollout/logp_certain_frac"]) < 0.5  # T = 1 samples: the gap sees them
  corrupted = SimpleNamespace(**{**vars(batch), "sample_logps_NxT": out.logps_NxT.at[0, 0].add(-1)})
  metrics = rollout_metrics(corrupted, logps_NxT)
  assert float(metrics["rollout/logp_gap_mean"]) > 1e-3  # one token of ≤ N·T off by 1
  assert float(metrics["rollout/logp_gap_max"]) > 0.9


def test_certain_tokens_are_counted():
  """Probability-1 tokens (sampled log-prob exactly 0) hide any sampler/trainer mismatch."""
  batch = SimpleNamespace(
    completion_mask_NxT=jnp.array([[1, 1, 1, 0], [1, 1, 0, 0]]),
    sample_logps_NxT=jnp.array([[0.0, -0.5, 0.0, 0.0], [0.0, 0.0, -2.0, 0.0]]),
    group_ids_N=jnp.arange(2),
    rewards_N=jnp.zeros(2),
  )
  metrics = rollout_metrics(batch, jnp.zeros((2, 4)))
  assert float(metrics["rollout/logp_certain_frac"]) == pytest.approx(4 / 5)
  assert float(metrics["rollout/logp_gap_max"]) == 0.5  # the one uncertain token
  only_certain = SimpleNamespace(
    **{**vars(batch), "completion_mask_NxT": jnp.array([[1, 0, 1, 0], [1, 1, 0, 0]])}
  )
  metrics = rollout_metrics(only_certain, jnp.zeros((2, 4)))
  assert float(metrics["rollout/logp_certain_frac"]) == 1.0
  assert float(metrics["rollout/logp_gap_max"]) == 0.0  # exactly 0, and vacuous
