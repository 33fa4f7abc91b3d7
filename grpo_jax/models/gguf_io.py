"""llama.cpp GGUF checkpoints in: ``load_gguf`` → :class:`HFModel`.

The file is read with the ``gguf`` package (``GGUFReader`` memory-maps it). The model config is
built from the ``llama.*`` metadata, like transformers' GGUF loader does; each tensor is
dequantised in NumPy (``gguf.quants.dequantize``: F32/F16/BF16/Q4_0/Q4_1/Q8_0/K-quants, ...),
one at a time, under its Hugging Face name, and placed by :func:`hf_io.load_params`.

llama.cpp's converter permutes the rows of ``q_proj`` / ``k_proj`` of Llama models (its rotary
embedding pairs adjacent features, transformers' pairs the two halves of a head):
:func:`unpermute_rows` undoes it, as transformers' ``LlamaTensorProcessor`` does.
The tokenizer is transformers' GGUF tokenizer (``AutoTokenizer.from_pretrained(dir,
gguf_file=name)``).
"""

from __future__ import annotations

import pathlib
import re

import jax
import numpy as np

from grpo_jax.models import hf_config
from grpo_jax.models.hf_io import HFModel, load_params

# GGUF module name → Hugging Face module name (``blk.N.`` ↔ ``model.layers.N.``).
BLOCK_NAMES = {
  "attn_q": "self_attn.q_proj",
  "attn_k": "self_attn.k_proj",
  "attn_v": "self_attn.v_proj",
  "attn_output": "self_attn.o_proj",
  "ffn_gate": "mlp.gate_proj",
  "ffn_up": "mlp.up_proj",
  "ffn_down": "mlp.down_proj",
  "attn_norm": "input_layernorm",
  "ffn_norm": "post_attention_layernorm",
}
TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
_BLOCK = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")


def hf_tensor_name(name: str) -> str | None:
  """The Hugging Face name of GGUF tensor ``name`` (None for one with no counterpart)."""
  m = _BLOCK.fullmatch(name)
  if m:
    module = BLOCK_NAMES.get(m.group(2))
    return module and f"model.layers.{m.group(1)}.{module}.{m.group(3)}"
  module, _, leaf = name.rpartition(".")
  return TOP_NAMES.get(module) and f"{TOP_NAMES[module]}.{leaf}"


def unpermute_rows(w_RxC: np.ndarray, num_heads: int) -> np.ndarray:
  """Inverse of llama.cpp's ``permute`` of a q/k projection's rows (or bias), ``num_heads`` its
  heads: per head, rows (d0, d1, d0', d1', ...) interleaved back to two halves."""
  half = w_RxC.shape[0] // num_heads // 2
  w = w_RxC.reshape(num_heads, half, 2, *w_RxC.shape[1:])
  return w.swapaxes(1, 2).reshape(w_RxC.shape)


def _field(reader, key: str, default=None):
  field = reader.fields.get(key)
  return default if field is None else field.contents()


def special_ids(reader) -> dict[str, int]:
  """The file's special token ids: ``bos``, ``eos``, ``pad``, ``unk`` (those it names)."""
  ids = {}
  for ours, theirs in (("bos", "bos"), ("eos", "eos"), ("pad", "padding"), ("unk", "unknown")):
    value = _field(reader, f"tokenizer.ggml.{theirs}_token_id")
    if value is not None:
      ids[ours] = int(value)
  return ids


def gguf_hf_config(reader):
  """The transformers config of a GGUF file's metadata (a ``LlamaConfig``)."""
  import transformers

  arch = _field(reader, "general.architecture")
  if arch != "llama":
    raise NotImplementedError(f"GGUF architecture '{arch}' is not supported (only llama)")
  names = {t.name for t in reader.tensors}
  if "rope_freqs.weight" in names:
    raise NotImplementedError("GGUF rope_freqs (llama3 rope scaling) is not supported")
  rope = {"rope_type": "default", "rope_theta": float(_field(reader, "llama.rope.freq_base", 1e4))}
  scaling = _field(reader, "llama.rope.scaling.type", "none")
  if scaling == "linear":
    rope.update(rope_type="linear", factor=float(_field(reader, "llama.rope.scaling.factor")))
  elif scaling != "none":
    raise NotImplementedError(f"GGUF rope scaling '{scaling}' is not supported")
  H = int(_field(reader, "llama.attention.head_count"))
  D = int(_field(reader, "llama.embedding_length"))
  head_dim = _field(reader, "llama.attention.key_length")
  head_dim = head_dim or _field(reader, "llama.rope.dimension_count")
  ids = {f"{k}_token_id": v for k, v in special_ids(reader).items()}
  hf = transformers.LlamaConfig(
    vocab_size=len(reader.fields["tokenizer.ggml.tokens"].data),
    hidden_size=D,
    intermediate_size=int(_field(reader, "llama.feed_forward_length")),
    num_hidden_layers=int(_field(reader, "llama.block_count")),
    num_attention_heads=H,
    num_key_value_heads=int(_field(reader, "llama.attention.head_count_kv", H)),
    head_dim=int(head_dim or D // H),
    max_position_embeddings=int(_field(reader, "llama.context_length", 2048)),
    rms_norm_eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon", 1e-6)),
    rope_parameters=rope,
    tie_word_embeddings="output.weight" not in names,
    attention_bias="blk.0.attn_q.bias" in names,
    mlp_bias="blk.0.ffn_up.bias" in names,
    **ids,
  )
  hf.architectures = ["LlamaForCausalLM"]
  return hf


class GGUFTensors:
  """HF name → GGUF tensor; ``read`` dequantises one to float32 (torch layout, q/k rows back in
  transformers' order unless ``unpermute=False``), ``read_slice`` one slice of it."""

  def __init__(self, reader, hf, unpermute: bool = True):
    self.tensors = {}
    for t in reader.tensors:
      name = hf_tensor_name(t.name)
      if name is not None:
        self.tensors[name] = t
    self.heads = {"q_proj": hf.num_attention_heads, "k_proj": hf.num_key_value_heads}
    self.unpermute = unpermute
    self.last: tuple[str, np.ndarray] | None = None  # the tensor ``read_slice`` last dequantised

  def __contains__(self, name: str) -> bool:
    return name in self.tensors

  def shape(self, name: str) -> tuple[int, ...]:
    return tuple(int(n) for n in reversed(self.tensors[name].shape))  # ggml lists ne0 first

  def read(self, name: str) -> np.ndarray:
    from gguf.quants import dequantize

    t = self.tensors[name]
    w = np.asarray(dequantize(t.data, t.tensor_type), np.float32).reshape(self.shape(name))
    module = name.split(".")[-2]
    if self.unpermute and module in self.heads:
      w = unpermute_rows(w, self.heads[module])
    return np.array(w)  # a private copy, not a view of the memory-mapped file

  def read_slice(self, name: str, index: tuple[slice, ...]) -> np.ndarray:
    """``read(name)[index]``. A quantised tensor dequantises only as a whole (blocks span
    rows, and q/k rows are reordered), so this reads the full tensor and slices it; the last
    tensor is kept, so the other shards of it on this host do not dequantise it again."""
    if self.last is None or self.last[0] != name:
      self.last = None  # drop the previous tensor before the next one is made
      self.last = (name, self.read(name))
    return np.array(self.last[1][index])


def load_gguf_tokenizer(path: str | pathlib.Path, reader=None):
  """transformers' tokenizer of a ``.gguf`` file (vocabulary, merges, chat template), with the
  file's own special tokens: transformers 5.12 reads SmolLM2's eos as its bos
  (``<|im_start|>``) and drops its pad. ``reader``: the file's ``GGUFReader``, if open."""
  from gguf import GGUFReader
  from transformers import AutoTokenizer

  path = pathlib.Path(path)
  tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
  for name, token_id in special_ids(reader or GGUFReader(str(path))).items():
    setattr(tok, f"{name}_token", tok.convert_ids_to_tokens(token_id))
  return tok


def load_gguf_config(path: str | pathlib.Path, dtype: str = "float32", param_dtype=None):
  """(ModelConfig, transformers config) of a ``.gguf`` file's metadata; no tensor is read."""
  from gguf import GGUFReader

  hf = gguf_hf_config(GGUFReader(str(path)))
  return hf_config.from_hf_config(hf, dtype, param_dtype), hf


def load_gguf(
  path: str | pathlib.Path,
  dtype: str = "float32",
  param_dtype: str | None = None,
  mesh: jax.sharding.Mesh | None = None,
  shardings: dict | None = None,
  tokenizer: bool = True,
  unpermute: bool = True,
) -> HFModel:
  """Loads a Llama ``.gguf`` file as an :class:`HFModel`, dequantised; arguments as in
  :func:`load_hf`. ``unpermute=False`` keeps llama.cpp's q/k row order (a wrong model: tests)."""
  from gguf import GGUFReader

  path = pathlib.Path(path)
  reader = GGUFReader(str(path))
  hf = gguf_hf_config(reader)
  cfg = hf_config.from_hf_config(hf, dtype, param_dtype)
  source = GGUFTensors(reader, hf, unpermute)
  graphdef, params = load_params(cfg, source, str(path), mesh, shardings)
  tok = load_gguf_tokenizer(path, reader) if tokenizer else None
  return HFModel(graphdef, params, cfg, tok, hf)
