"""Tiny random transformers models (torch CPU) against ours, per family: logits within 1e-4
(sequences longer than the sliding window, left padding), greedy continuations equal to
``generate``, and the rope/norm details each family brings (llama3 / yarn scaling, OLMo-3
post-norm and full-projection QK-norm, per-layer-type rope)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

from grpo_jax import models, sampling

V, WINDOW = 97, 5


def make_hf(family: str, seed: int = 0):
  """A 4-layer random model with every norm weight and bias perturbed away from its init."""
  torch.manual_seed(seed)
  kw = dict(
    vocab_size=V,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=256,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
  )
  if family == "qwen3":
    cfg = transformers.Qwen3Config(
      **kw,
      tie_word_embeddings=True,
      use_sliding_window=True,
      sliding_window=WINDOW,
      max_window_layers=2,
      rope_parameters={"rope_type": "default", "rope_theta": 1e3},
    )
    cls = transformers.Qwen3ForCausalLM
  elif family == "llama":
    rope = {
      "rope_type": "llama3",
      "rope_theta": 5e5,
      "factor": 8.0,
      "low_freq_factor": 1.0,
      "high_freq_factor": 4.0,
      "original_max_position_embeddings": 16,
    }
    cfg = transformers.LlamaConfig(
      **kw, tie_word_embeddings=True, rms_norm_eps=1e-5, attention_bias=True, rope_parameters=rope
    )
    cls = transformers.LlamaForCausalLM
  else:
    rope = {
      "full_attention": {
        "rope_type": "yarn",
        "rope_theta": 5e5,
        "factor": 8.0,
        "original_max_position_embeddings": 32,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
      },
      "sliding_attention": {"rope_type": "default", "rope_theta": 5e5},
    }
    cfg = transformers.Olmo3Config(
      **kw, tie_word_embeddings=False, sliding_window=WINDOW, rope_parameters=rope
    )
    cls = transformers.Olmo3ForCausalLM
  cfg._attn_implementation = "eager"
  model = cls(cfg).eval()
  with torch.no_grad():
    for p in model.parameters():
      p.add_(0.05 * torch.randn_like(p))
  return model


@pytest.fixture(scope="module", params=["qwen3", "llama", "olmo3"])
def pair(request, tmp_path_factory):
  hf = make_hf(request.param)
  path = tmp_path_factory.mktemp(request.param)
  hf.save_pretrained(path)
  return request.param, hf, models.load_hf(str(path))


def test_config_read_through_transformers(pair):
  family, hf, ours = pair
  c = ours.config
  assert c.family == family and c.vocab_size == V and c.head_dim == 16
  assert c.tie_embeddings == (family != "olmo3")
  if family == "qwen3":
    assert c.layer_types == ("full_attention",) * 2 + ("sliding_attention",) * 2
    assert c.sliding_window == WINDOW
  if family == "llama":
    assert dict(c.rope_scaling)["rope_type"] == "llama3" and c.norm_eps == 1e-5
    assert c.attention_bias
  if family == "olmo3":
    assert c.layer_types == ("sliding_attention",) * 3 + ("full_attention",)
    assert dict(c.rope_scaling)["rope_type"] == "yarn" and c.sliding_rope_scaling == ()
    # QK-norm over the whole projection (H·Dh, Hk·Dh), not per head.
    attn = ours.params["layers"][0]["self_attn"]
    assert attn["q_norm"]["weight"].shape == (64,) and attn["k_norm"]["weight"].shape == (32,)
    assert "input_layernorm" not in ours.params["layers"][0]


def test_logits_match_transformers(pair):
  family, hf, ours = pair
  rng = np.random.RandomState(1)
  tokens = rng.randint(3, V, (2, 23))  # 23 > 4·WINDOW: windows truly cut
  with torch.no_grad():
    ref = hf(torch.tensor(tokens)).logits.numpy()
  np.testing.assert_allclose(np.asarray(ours(tokens)), ref, atol=1e-4, rtol=0)


def test_left_padded_logits_match_transformers(pair):
  family, hf, ours = pair
  tokens = np.random.RandomState(2).randint(3, V, (2, 17))
  mask = np.ones_like(tokens)
  mask[1, :4] = 0
  tokens[1, :4] = 0
  with torch.no_grad():
    ref = hf(torch.tensor(tokens), attention_mask=torch.tensor(mask)).logits.numpy()
  got = np.asarray(ours(tokens, mask))
  keep = mask.astype(bool)
  np.testing.assert_allclose(got[keep], ref[keep], atol=1e-4, rtol=0)


def test_greedy_continuation_matches_generate(pair):
  family, hf, ours = pair
  prompt = np.random.RandomState(3).randint(3, V, (1, 6))
  T = 12  # the cache runs past the sliding window
  with torch.no_grad():
    ref = hf.generate(
      torch.tensor(prompt),
      max_new_tokens=T,
      do_sample=False,
      eos_token_id=None,
      pad_token_id=0,
      min_new_tokens=T,
    ).numpy()[0, 6:]
  out = sampling.sample(
    ours.graphdef,
    ours.params,
    prompt,
    np.ones_like(prompt),
    np.asarray([0, 0], np.uint32),
    sampling.Decode(max_new_tokens=T, eos_id=-1, pad_id=0, temperature=0.0),
  )
  np.testing.assert_array_equal(np.asarray(out.tokens_NxT)[0], ref)


def test_bf16_compute_keeps_float32_logsoftmax():
  cfg = dataclasses.replace(
    models.PRESETS["test"],
    family="olmo3",
    sliding_window=3,
    layer_types=("sliding_attention", "full_attention"),
  )
  graphdef, params = models.init_params(cfg, 0)
  cfg16 = dataclasses.replace(cfg, dtype="bfloat16", param_dtype="bfloat16")
  graphdef16, _ = models.abstract_params(cfg16)
  params16 = jax.tree.map(lambda x: x.astype(jnp.bfloat16), params)
  tokens = np.random.RandomState(4).randint(3, 64, (2, 9))
  mask = np.ones_like(tokens)
  logps_fn = jax.jit(models.token_logps, static_argnums=0)
  logits16 = jax.jit(models.forward, static_argnums=0)(graphdef16, params16, tokens, mask)
  assert logits16.dtype == jnp.float32  # bf16 operands, float32 sums (Transformer.logits)
  logps16 = logps_fn(graphdef16, params16, tokens, mask)
  ref = logps_fn(graphdef, params, tokens, mask)
  assert logps16.dtype == jnp.float32
  # bf16 weights and activations: close to float32, not equal.
  np.testing.assert_allclose(np.asarray(logps16), np.asarray(ref), atol=0.1)
  assert float(jnp.max(jnp.abs(logps16 - ref))) > 0
