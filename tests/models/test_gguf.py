"""``models.load_gguf`` on the real SmolLM2-135M-Instruct Q4_1 file: logits equal transformers'
own GGUF loader, parameters equal the converted Hugging Face directory, and llama.cpp's q/k row
permutation is undone (a load that keeps it is a different model)."""

import jax
import numpy as np
import pytest
import torch
import transformers

from grpo_jax import models
from grpo_jax.models import gguf_io

TEXTS = (
  "The capital of France is Paris, and the capital of Italy is",
  "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
  "Countdown: reach 24 with 3, 8 and 9. One way is to compute",
)


@pytest.fixture(scope="module")
def ours(smollm2_gguf):
  return models.load_gguf(smollm2_gguf)


def _rows(tokenizer) -> np.ndarray:
  # Text, not random ids: on random ids our fp32 logits at position 1 are ~7e-3 from a float64
  # reference (transformers' fp32 ~1e-4); on text both stay ~1e-4 from it.
  ids = [tokenizer(t)["input_ids"] for t in TEXTS]
  return np.asarray([x[:12] for x in ids])


def _leaves(params) -> dict:
  """'layers/0/self_attn/q_proj/kernel' → array."""
  flat = jax.tree_util.tree_flatten_with_path(params)[0]
  return {"/".join(str(getattr(k, "key", k)) for k in kp): np.asarray(x) for kp, x in flat}


def test_config_from_metadata(ours):
  c = ours.config
  assert (c.family, c.num_layers, c.vocab_size, c.hidden_dim) == ("llama", 30, 49152, 576)
  assert (c.num_heads, c.num_kv_heads, c.head_dim, c.mlp_dim) == (9, 3, 64, 1536)
  assert c.tie_embeddings and c.rope_theta == 1e5 and c.max_position_embeddings == 8192
  assert "lm_head" not in ours.params
  assert ours.hf_config.pad_token_id == ours.tokenizer.pad_token_id == 2
  tok = ours.tokenizer  # the file's own special tokens, whatever transformers reads
  assert tok.bos_token == "<|im_start|>" and tok.eos_token == tok.pad_token == "<|im_end|>"


def test_logits_match_transformers_gguf_loader(ours, smollm2_gguf):
  path = smollm2_gguf
  ref = transformers.AutoModelForCausalLM.from_pretrained(
    str(path.parent), gguf_file=path.name, dtype=torch.float32
  ).eval()
  with torch.no_grad():
    want = ref(torch.tensor(_rows(ours.tokenizer))).logits.numpy()
  got = np.asarray(ours(_rows(ours.tokenizer)))
  assert np.abs(got - want).max() <= 1e-3


def test_params_equal_the_converted_directory(ours, smollm2_hf_dir):
  converted = models.load_hf(str(smollm2_hf_dir), tokenizer=False)
  a, b = _leaves(ours.params), _leaves(converted.params)
  assert a.keys() == b.keys()
  for kp in a:
    np.testing.assert_allclose(a[kp], b[kp], rtol=0, atol=1e-6, err_msg=kp)


def test_tokenizer_matches_the_converted_directory(ours, smollm2_hf_dir):
  converted = transformers.AutoTokenizer.from_pretrained(str(smollm2_hf_dir))
  chat = [{"role": "user", "content": "What is 12 * 7? Answer briefly."}]
  text = ours.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
  assert text == converted.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
  assert ours.tokenizer(text)["input_ids"] == converted(text)["input_ids"]


def _llama_cpp_permute(w, n_head):
  # convert_hf_to_gguf.py, LlamaModel.permute
  return (
    w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
  )


@pytest.mark.parametrize("shape", [(12, 5), (12,)])
def test_unpermute_inverts_llama_cpp_permute(shape):
  w = np.random.RandomState(1).randn(*shape)
  permuted = _llama_cpp_permute(w, 3)
  assert not np.array_equal(permuted, w)
  np.testing.assert_array_equal(gguf_io.unpermute_rows(permuted, 3), w)


def test_keeping_the_permutation_is_a_different_model(ours, smollm2_gguf):
  kept = models.load_gguf(smollm2_gguf, tokenizer=False, unpermute=False)
  a, b = _leaves(ours.params), _leaves(kept.params)
  differ = {k for k in a if not np.array_equal(a[k], b[k])}
  qk = {f"layers/{i}/self_attn/{m}_proj/kernel" for i in range(30) for m in "qk"}
  assert differ == qk
  # The same columns in another order (kernels are (in, out)), and far-off logits.
  for k in qk:
    np.testing.assert_array_equal(np.sort(a[k], axis=1), np.sort(b[k], axis=1))
  assert (
    np.abs(np.asarray(kept(_rows(ours.tokenizer))) - np.asarray(ours(_rows(ours.tokenizer)))).max()
    > 1.0
  )
