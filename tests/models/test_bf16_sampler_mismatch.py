"""SmolLM2 sampled with bf16 compute and scored by the float32 trainer: on its first 2 layers the
mismatch is visible in ``mismatch/*`` and the rollout correction changes the gradient of the
loss (it is ~0 on the all-float32 path); on all 30 layers every preset weighs and rejects the
rows as verl's formulas do (``tests/losses/verl_numpy.py``, an independent NumPy
transcription)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import losses, models, sampling
from grpo_jax.config import base_config, experiment
from grpo_jax.losses import correction
from tests.losses import verl_numpy

T = 16


@pytest.fixture(scope="module")
def rollout(smollm2_2layer_dir):
  path = str(smollm2_2layer_dir)
  fp32 = models.load_hf(path)
  bf16 = models.load_hf(path, dtype="bfloat16", tokenizer=False)
  tok = fp32.tokenizer
  texts = ["Calculate 4 + 9.", "Name a colour.", "What is 7 times 6?", "Say hello."]
  enc = tok(texts, padding=True, padding_side="left", return_tensors="np")
  prompt, mask = enc["input_ids"].astype(np.int32), enc["attention_mask"].astype(np.int32)
  decode = sampling.Decode(max_new_tokens=T, eos_id=-1, pad_id=tok.pad_token_id, temperature=1.0)
  out = {}
  for name, model in (("bf16", bf16), ("fp32", fp32)):
    s = sampling.sample(model.graphdef, model.params, prompt, mask, jax.random.PRNGKey(0), decode)
    tokens_NxL = jnp.concatenate([prompt, s.tokens_NxT], axis=1)
    mask_NxL = jnp.concatenate([mask, s.mask_NxT], axis=1)
    trainer = models.token_logps(fp32.graphdef, fp32.params, tokens_NxL, mask_NxL)
    out[name] = (trainer[:, prompt.shape[1] :], s.logps_NxT, s.mask_NxT)
  return out


def _bf16_rollout(path, texts, T):
  """(trainer float32 log-probs, bf16 sampler log-probs, mask) of completions of ``texts``."""
  fp32 = models.load_hf(path)
  bf16 = models.load_hf(path, dtype="bfloat16", tokenizer=False)
  tok = fp32.tokenizer
  enc = tok(texts, padding=True, padding_side="left", return_tensors="np")
  prompt, mask = enc["input_ids"].astype(np.int32), enc["attention_mask"].astype(np.int32)
  eos, pad = tok.eos_token_id, tok.pad_token_id
  decode = sampling.Decode(max_new_tokens=T, eos_id=eos, pad_id=pad, temperature=1.0)
  s = sampling.sample(bf16.graphdef, bf16.params, prompt, mask, jax.random.PRNGKey(0), decode)
  tokens_NxL = jnp.concatenate([prompt, s.tokens_NxT], axis=1)
  mask_NxL = jnp.concatenate([mask, s.mask_NxT], axis=1)
  trainer = models.token_logps(fp32.graphdef, fp32.params, tokens_NxL, mask_NxL)
  P = prompt.shape[1]
  return np.asarray(trainer)[:, P:], np.asarray(s.logps_NxT), np.asarray(s.mask_NxT, np.float32)


def _cfg(**kw):
  c = base_config().loss
  for k, v in kw.items():
    c[k] = v
  return experiment.of(c, "loss")


def _grad(c, trainer, sample, mask):
  adv = jnp.array([1.0, -1.0, 0.5, -0.5])
  denoms = losses.denominators(mask, c)
  terms = losses.Terms(sample_logps_NxT=sample)
  f = lambda lp: losses.policy_loss(lp, jax.lax.stop_gradient(lp), adv, mask, c, denoms, terms)[0]
  return np.asarray(jax.grad(f)(trainer))


def test_a_bf16_sampler_shows_a_mismatch_the_correction_acts_on(rollout):
  valid = np.array([True] * 4)
  kl = {
    n: float(losses.mismatch_metrics(t, s, m, valid)["mismatch/kl"])
    for n, (t, s, m) in rollout.items()
  }
  assert kl["bf16"] > 1e-4 > kl["fp32"]  # visible against the float32 sampler's rounding
  trainer, sample, mask = rollout["bf16"]
  plain = _grad(_cfg(), trainer, sample, mask)
  tis = _grad(_cfg(rollout_correction="token_tis"), trainer, sample, mask)
  moved = np.abs(tis - plain).max()
  assert moved > 1e-3 * np.abs(plain).max()
  # On the float32 path the same correction moves the gradient by float32 rounding only.
  t32, s32, m32 = rollout["fp32"]
  same = _grad(_cfg(rollout_correction="token_tis"), t32, s32, m32)
  assert np.abs(same - _grad(_cfg(), t32, s32, m32)).max() < 0.01 * moved


QUESTIONS = [
  "Calculate 4 + 9.",
  "Name a colour.",
  "What is 7 times 6?",
  "Say hello.",
  "Write a haiku about rain.",
  "What is the capital of France?",
  "Count to five.",
  "Explain gravity briefly.",
]


def test_the_presets_reject_what_verl_would_on_the_real_model(smollm2_hf_dir):
  # 32 rows of up to 128 tokens from all 30 layers in bf16, scored in float32 (METHODS §8:
  # π_old the trainer's, π_rollout the sampler's).
  trainer, sample, mask = _bf16_rollout(
    str(smollm2_hf_dir), [q for q in QUESTIONS for _ in range(4)], 128
  )
  scored = mask.sum(1) > 0
  rejected = {}
  for name in ("token_tis", "seq_tis", "seq_mis", "geo_mis"):
    c = _cfg(rollout_correction=name)
    w_ref, mask_ref, veto_ref = verl_numpy.correct(trainer, sample, mask, name)
    w = correction.weights_NxT(trainer, sample, mask > 0, c)
    if w_ref is not None:
      np.testing.assert_allclose(np.asarray(w) * mask, w_ref, rtol=1e-4, err_msg=name)
    r = correction.reject(trainer, sample, mask, c)
    np.testing.assert_array_equal(np.asarray(r.mask_NxT), mask_ref, err_msg=name)
    np.testing.assert_array_equal(np.asarray(r.vetoed_N), veto_ref, err_msg=name)
    rejected[name] = int(np.sum(scored & (mask_ref.sum(1) == 0)))
  # The bf16 sampler drifts enough that the product leaves [0.5, 2] on some rows, and the
  # geometric mean leaves verl's tight [1/1.001, 1.001] on most, not all.
  n = int(scored.sum())
  assert 0 < rejected["seq_mis"] < n / 4 and n / 2 < rejected["geo_mis"] < n
  assert rejected["token_tis"] == rejected["seq_tis"] == 0
