"""A Google Cloud Storage JSON API server on 127.0.0.1 for tests: the ``gcp-storage-emulator``
package, in memory, with GCS's object generations (``gcs_emulator_server.py``); and the
environment that points every client of the run directory at it: ``gcsfs`` (``etils.epath``,
``datasets``) and ``google-cloud-storage`` (tensorboardX) read ``STORAGE_EMULATOR_HOST``,
tensorstore (orbax) reads ``TENSORSTORE_GCS_HTTP_URL``.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import socket
import subprocess
import sys
import time

BUCKET = "grpo-runs"
SERVER = pathlib.Path(__file__).with_name("gcs_emulator_server.py")


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def client_env(url: str) -> dict[str, str]:
  return {
    "STORAGE_EMULATOR_HOST": url,
    "TENSORSTORE_GCS_HTTP_URL": url,
    "GOOGLE_CLOUD_PROJECT": "test",
    "GCE_METADATA_HOST": "127.0.0.1:1",  # no metadata server: fail fast, never leave the host
    "NO_GCE_CHECK": "true",
  }


@contextlib.contextmanager
def emulator(bucket: str = BUCKET, timeout_s: float = 60.0):
  """Yields the client environment of a fresh in-memory server holding ``bucket``; the server
  stops when the block ends."""
  port = _free_port()
  cmd = [sys.executable, str(SERVER), "start", "--host", "127.0.0.1"]
  cmd += ["--port", str(port), "--in-memory", "--default-bucket", bucket]
  proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    deadline = time.time() + timeout_s
    while True:
      try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        break
      except OSError:
        if proc.poll() is not None or time.time() > deadline:
          raise RuntimeError(f"the storage emulator did not start (exit {proc.poll()})") from None
        time.sleep(0.1)
    yield client_env(f"http://127.0.0.1:{port}")
  finally:
    proc.terminate()
    try:
      proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
      proc.kill()


@contextlib.contextmanager
def patched_environ(env: dict[str, str]):
  """``os.environ`` with ``env`` for the block (clients in this process)."""
  old = {k: os.environ.get(k) for k in env}
  os.environ.update(env)
  try:
    yield
  finally:
    for k, v in old.items():
      if v is None:
        os.environ.pop(k, None)
      else:
        os.environ[k] = v
