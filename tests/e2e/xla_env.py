"""The suite's XLA flags (``tests/plugin.py``) for a subprocess on another device count."""

import os


def flags(devices: int | None = None, optimize: bool = False) -> str:
  """The test process's ``XLA_FLAGS`` with its simulated device count replaced by ``devices``
  (``None``: removed, so the subprocess runs on one CPU device as typed); ``optimize`` drops the
  suite's ``FAST_COMPILE`` (``tests/plugin.py``) for run-bound programs, as the real model's
  49k-entry vocabulary makes them."""
  drop = ("device_count", "xla_backend_optimization_level") if optimize else ("device_count",)
  kept = [f for f in os.environ.get("XLA_FLAGS", "").split() if not any(d in f for d in drop)]
  if devices is not None:
    kept.append(f"--xla_force_host_platform_device_count={devices}")
  return " ".join(kept)
