"""Where a run came from, recorded in its ``config.json``: the git commit of the code, the
command line, the versions of the packages that shape the numbers, and the devices.

Every field is best effort: outside a git checkout the commit is None, a package that is not
installed has version None, and nothing here raises.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import pathlib
import platform
import subprocess
import sys

# Distribution names (as pip knows them) whose versions are recorded.
PACKAGES = (
  "jax",
  "jaxlib",
  "flax",
  "optax",
  "orbax-checkpoint",
  "ml-collections",
  "numpy",
  "transformers",
)

_ROOT = pathlib.Path(__file__).resolve().parents[2]  # the checkout grpo_jax was imported from


def _git(*args: str) -> str | None:
  try:
    out = subprocess.run(
      ["git", *args], cwd=_ROOT, capture_output=True, text=True, timeout=10, check=True
    )
  except (OSError, subprocess.SubprocessError):
    return None
  return out.stdout.strip()


def git_commit() -> str | None:
  """The commit HEAD of the checkout grpo_jax runs from, or None outside a git repository."""
  commit = _git("rev-parse", "HEAD")
  return commit or None


def git_dirty() -> bool | None:
  """True if tracked files differ from the commit (the run's code is not exactly the commit)."""
  if git_commit() is None:
    return None
  status = _git("status", "--porcelain", "--untracked-files=no")
  return None if status is None else bool(status)


def package_versions(names=PACKAGES) -> dict[str, str | None]:
  out = {}
  for name in names:
    try:
      out[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      out[name] = None
  return out


def devices() -> dict:
  """Platform, device kind and counts of the job (after ``jax.distributed.initialize``)."""
  import jax  # noqa: PLC0415

  devs = jax.devices()
  return {
    "platform": devs[0].platform,
    "kind": devs[0].device_kind,
    "count": jax.device_count(),
    "local_count": jax.local_device_count(),
    "process_count": jax.process_count(),
  }


def collect(argv=None) -> dict:
  """The provenance record of this process: commit, command, packages, devices, host, time."""
  argv = sys.argv if argv is None else argv
  return {
    "git_commit": git_commit(),
    "git_dirty": git_dirty(),
    "command": [sys.executable, *argv],
    "packages": package_versions(),
    "python": platform.python_version(),
    "devices": devices(),
    "host": platform.node(),
    "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
  }


__all__ = ["PACKAGES", "collect", "devices", "git_commit", "git_dirty", "package_versions"]
