"""SmolLM2 (its first 2 layers, real weights) sampled with bf16 compute and scored by the float32
trainer: the mismatch is visible in ``mismatch/*``, and the rollout correction changes the
gradient of the loss (it is ~0 on the all-float32 path)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import losses, models, sampling
from grpo_jax.config import base_config, views

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


def _cfg(**kw):
  c = base_config().loss
  for k, v in kw.items():
    c[k] = v
  return views.of(c, "loss")


def _grad(c, trainer, sample, mask):
  adv = jnp.array([1.0, -1.0, 0.5, -0.5])
  denoms = losses.denominators(mask, c)
  terms = losses.Terms(sample_logps_NxT=sample)
  f = lambda lp: losses.policy_loss(lp, jax.lax.stop_gradient(lp), adv, mask, c, denoms, terms)[0]
  return np.asarray(jax.grad(f)(trainer))


def test_a_bf16_sampler_shows_a_mismatch_the_correction_acts_on(rollout):
  valid = np.array([True] * 4)
  seq = _cfg(rollout_correction="seq_mis")
  kl = {
    n: float(losses.mismatch_metrics(t, s, m, valid, seq)["mismatch/kl"])
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
