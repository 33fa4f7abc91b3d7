"""``vllm_engine.keep_segv_handler``: a SIGSEGV handler installed inside the block (as vLLM's
import installs tvm_ffi's) is gone after it, and a fault reaches the handler from before."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FAULT = """
import contextlib, faulthandler, os, signal, sys
from grpo_jax.sampling.vllm_engine import keep_segv_handler

faulthandler.enable()
def replaced(signum, frame):
  print("the handler installed inside the block ran", file=sys.stderr, flush=True)
  os._exit(3)
with keep_segv_handler() if sys.argv[1] == "kept" else contextlib.nullcontext():
  signal.signal(signal.SIGSEGV, replaced)
os.kill(os.getpid(), signal.SIGSEGV)
"""


@pytest.mark.parametrize("mode", ["kept", "plain"])
def test_a_fault_after_the_block_reaches_the_handler_from_before_it(mode):
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  proc = subprocess.run(
    [sys.executable, "-c", FAULT, mode], env=env, capture_output=True, text=True, timeout=120
  )
  if mode == "kept":  # faulthandler's report, then the default action: the process dies
    assert proc.returncode == -11 and "Fatal Python error: Segmentation fault" in proc.stderr
    assert "installed inside the block" not in proc.stderr
  else:  # without it, the handler from inside the block ran
    assert proc.returncode == 3 and "installed inside the block ran" in proc.stderr
