"""The suite's XLA flags (``tests/conftest.py``) for a subprocess on another device count."""

import os


def flags(devices: int | None = None) -> str:
  """The test process's ``XLA_FLAGS`` with its simulated device count replaced by ``devices``
  (``None``: removed, so the subprocess runs on one CPU device as typed)."""
  kept = [f for f in os.environ.get("XLA_FLAGS", "").split() if "device_count" not in f]
  if devices is not None:
    kept.append(f"--xla_force_host_platform_device_count={devices}")
  return " ".join(kept)
