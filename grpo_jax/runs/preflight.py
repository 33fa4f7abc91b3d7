"""The launcher's checks before any file is written: everything a run needs that can be known
from the config and the command line, each failure a :class:`PreflightError` (exit status 2)
that names the key, path or flag, in seconds rather than after the model is built.

  check_model_path   ``model.hf_path``: a checkpoint directory, a ``.gguf`` file or a hub id
  check_engine       ``sampling.engine``: its extra installed (found, not imported: seconds)
  check_storage      a ``gs://`` run directory: the extra installed, the bucket answering
  check_checkpoint   ``--mode=eval`` / ``export``: a checkpoint (the ``--step``) to read
  check_mesh         the mesh against the devices (after ``jax.distributed`` is up)
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading

from etils import epath

from grpo_jax.rundir import names

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # org/name
MODES_WITH_CHECKPOINT = ("eval", "export")
# The modules an external engine imports at its first use, and the extra that installs them.
ENGINE_MODULES = {"vllm": (("vllm", "torch"), "vllm")}


class PreflightError(ValueError):
  """A run that cannot start; the message says what to change."""


def check_model_path(hf_path: str) -> None:
  """A local directory with ``config.json``, a ``.gguf`` file, or an ``org/name`` hub id
  (downloaded into ``HF_HOME``; ``HF_HUB_OFFLINE=1`` reads the cache only)."""
  if not hf_path:
    return
  path = os.path.expanduser(hf_path)
  key = f"config key model.hf_path = {hf_path!r}"
  if os.path.isdir(path):
    if not os.path.isfile(os.path.join(path, "config.json")):
      raise PreflightError(f"{key}: the directory has no config.json (not a checkpoint)")
    return
  if os.path.isfile(path):
    if not path.endswith(".gguf"):
      raise PreflightError(f"{key}: a file, but not a .gguf checkpoint")
    return
  if path.endswith(".gguf"):
    hint = " (python3 -m grpo_jax.models.smollm2 fetches SmolLM2)" if "SmolLM2" in path else ""
    raise PreflightError(f"{key}: no such file{hint}")
  if not HUB_ID.match(hf_path):
    raise PreflightError(f"{key}: no such directory or .gguf file, and not a hub id ('org/name')")


def _importable(module: str) -> bool:
  """Whether ``module`` can be imported, found without importing it (vLLM's import takes
  seconds and loads torch)."""
  try:
    return importlib.util.find_spec(module) is not None
  except (ImportError, ValueError):  # a parent package missing; a module without a spec
    return False


def check_engine(engine: str) -> None:
  """``sampling.engine``: the modules of an external engine are installed. Without this the
  run would fail at its first rollout, after the warm start, checkpoint 0 and evaluation."""
  if engine not in ENGINE_MODULES:
    return
  modules, extra = ENGINE_MODULES[engine]
  missing = [m for m in modules if not _importable(m)]
  if missing:
    raise PreflightError(
      f"config key sampling.engine = {engine!r}: {' and '.join(missing)} cannot be imported; "
      f"install the extra: pip install -e '.[{extra}]' (docs/scaling.md), or set "
      "sampling.engine = 'jax'"
    )


def _answer_within(fn, timeout_s: float):
  """``fn()``'s value, or TimeoutError when it has not returned within ``timeout_s``."""
  out: dict = {}

  def call():
    try:
      out["value"] = fn()
    except Exception as e:  # noqa: BLE001 (reported to the caller)
      out["error"] = e

  thread = threading.Thread(target=call, daemon=True)
  thread.start()
  thread.join(timeout_s)
  if thread.is_alive():
    raise TimeoutError
  if "error" in out:
    raise out["error"]
  return out["value"]


def check_storage(workdir: str, timeout_s: float = 30.0) -> None:
  """A ``gs://`` run directory needs the gcs extra, and its bucket must answer (found or not)
  within ``timeout_s``; local directories need nothing."""
  if not workdir.startswith("gs://"):
    return
  try:
    import gcsfs  # noqa: F401, PLC0415
  except ImportError:
    raise PreflightError(
      f"run directory {workdir} is on Cloud Storage: pip install -e '.[gcs]'"
    ) from None
  try:
    _answer_within(lambda: epath.Path(workdir).exists(), timeout_s)
  except TimeoutError:
    raise PreflightError(
      f"run directory {workdir}: the storage did not answer within {timeout_s:.0f} s "
      "(network, credentials: GOOGLE_APPLICATION_CREDENTIALS, STORAGE_EMULATOR_HOST)"
    ) from None
  except Exception as e:
    first = str(e).splitlines()[0] if str(e) else ""
    raise PreflightError(
      f"run directory {workdir}: the storage cannot be read ({type(e).__name__}: {first})"
    ) from None


def checkpoint_steps(workdir: str) -> list[int]:
  """The steps saved under ``<workdir>/checkpoints`` (none when it does not exist)."""
  root = epath.Path(workdir) / names.CHECKPOINTS
  if not root.exists():
    return []
  return sorted(int(p.name) for p in root.iterdir() if p.name.isdigit())


def check_checkpoint(workdir: str, mode: str, step: int | None, allow_init: bool) -> None:
  """``--mode=export`` needs a checkpoint; ``--mode=eval`` needs one too unless
  ``--allow_init`` evaluates the model as built (``model.hf_path`` or a fresh init); a
  ``--step`` must be one of the saved steps."""
  if mode not in MODES_WITH_CHECKPOINT:
    return
  steps = checkpoint_steps(workdir)
  if step is not None and step not in steps:
    raise PreflightError(f"--step {step}: {workdir} holds checkpoints of steps {steps or 'none'}")
  if steps or (mode == "eval" and allow_init):
    return
  what = "evaluate" if mode == "eval" else "export"
  extra = "; --allow_init evaluates the model as built (model.hf_path or a fresh init)"
  raise PreflightError(
    f"--mode={mode}: no checkpoint in {workdir}/{names.CHECKPOINTS} to {what} (is the "
    f"--workdir right?){extra if mode == 'eval' else ''}"
  )


def check_mesh(mesh_cfg) -> None:
  """The mesh divides the devices this job has (``jax.device_count()``, every process's)."""
  import jax  # noqa: PLC0415

  from grpo_jax.sharding.mesh import mesh_shape  # noqa: PLC0415

  try:
    mesh_shape(mesh_cfg, jax.device_count())
  except ValueError as e:
    raise PreflightError(f"config key mesh: {e}") from None


__all__ = [
  "PreflightError",
  "check_checkpoint",
  "check_engine",
  "check_mesh",
  "check_model_path",
  "check_storage",
  "checkpoint_steps",
]
