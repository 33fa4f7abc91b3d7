"""The transformers section of ``accelerator.py``: ``generate`` of a random-init bf16
``Qwen3ForCausalLM`` of each shape (``models.to_hf_config``), ``min_new_tokens =
max_new_tokens``, sampling at T = 1. It runs as its own process (JAX on the CPU there) before
the benchmark's JAX takes the device's memory:

  python -m experiments.benchmarks.accel.generate SPEC_JSON --json OUT   # what ``run_hf`` starts
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from experiments.benchmarks.accel.device import MODELS, Budget, error_text, fits, kv_slot_bytes
from grpo_jax import models

ROOT = pathlib.Path(__file__).resolve().parents[3]  # where ``-m`` finds ``experiments``


def hf_child(spec: dict, path: str) -> dict:
  """Runs in its own process (JAX on the CPU there): ``generate`` for every (B, model) of
  ``spec`` in order while its budget lasts; the results so far are rewritten to ``path`` after
  each one (a killed run keeps them)."""
  import torch
  import transformers

  device, P, T = spec["device"], spec["prompt"], spec["new_tokens"]
  budget = Budget(spec["budget_s"])
  rows, per_row_step = [], 0.0
  kw = dict(max_new_tokens=T, min_new_tokens=T, do_sample=True, temperature=1.0, top_k=0)
  for B in spec["batches"]:
    for name in spec["models"]:
      what = f"generate {name} B={B}"
      cfg = MODELS[name]
      guess = T * max(per_row_step * B, 0.02 if device == "cuda" else 0.0)
      if not budget.allows(what, 2 * guess + 5):
        continue
      if device == "cuda":
        kv = B * (P + T) * kv_slot_bytes(cfg)
        need = 2 * cfg.num_params + 2.5 * kv + 3 * B * cfg.vocab_size * 4
        if not fits(budget, what, need, torch.cuda.mem_get_info()[0]):
          continue
      model = None
      try:
        torch.manual_seed(0)
        torch.set_default_dtype(torch.bfloat16)
        with torch.device(device):
          model = transformers.Qwen3ForCausalLM(models.to_hf_config(cfg)).eval()
        torch.set_default_dtype(torch.float32)
        ids = torch.randint(3, cfg.vocab_size, (B, P), device=device)
        args = dict(input_ids=ids, attention_mask=torch.ones_like(ids), pad_token_id=0)
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        with torch.inference_mode():
          model.generate(**args, eos_token_id=1, **{**kw, "max_new_tokens": 4, "min_new_tokens": 4})
          sync()
          t0 = time.perf_counter()
          out = model.generate(**args, eos_token_id=1, **kw)
          sync()
          seconds = time.perf_counter() - t0
        assert out.shape == (B, P + T), out.shape
        per_row_step = max(per_row_step, seconds / T / B)
        dtype = str(next(model.parameters()).dtype).replace("torch.", "")
        rows.append(
          {"model": name, "B": B, "hf_s": seconds, "hf_tok_s": B * T / seconds, "hf_dtype": dtype}
        )
      except Exception as e:  # noqa: BLE001  (one config's failure is its row's result)
        rows.append({"model": name, "B": B, "hf_error": error_text(e)})
      finally:
        torch.set_default_dtype(torch.float32)
        del model
        gc.collect()
        if device == "cuda":
          torch.cuda.empty_cache()
      print(json.dumps(rows[-1]), flush=True)
      _write(path, {"generate": rows, "skipped": budget.skipped, "torch": torch.__version__})
  _write(path, {"generate": rows, "skipped": budget.skipped, "torch": torch.__version__})


def _write(path: str, res: dict) -> None:
  """Whole or not at all: a kill mid-write leaves the last complete file."""
  with open(path + ".tmp", "w") as f:
    json.dump(res, f, indent=2)
  os.replace(path + ".tmp", path)


def hf_device(choice: str) -> str:
  """'cuda' where torch sees a GPU (``auto``), '' (skip) where it does not; ``cpu`` forces it."""
  if choice in ("off", "cpu", "cuda"):
    return "" if choice == "off" else choice
  try:
    import torch
  except ImportError:
    return ""
  return "cuda" if torch.cuda.is_available() else ""


def run_hf(spec: dict, budget: Budget) -> dict:
  """``hf_child`` in a subprocess (killed at its budget + 60 s: what it wrote by then counts)."""
  with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "hf.json")
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    cmd = [sys.executable, "-m", "experiments.benchmarks.accel.generate", json.dumps(spec)]
    cmd += ["--json", out]
    try:
      proc = subprocess.run(cmd, env=env, timeout=spec["budget_s"] + 60, text=True, cwd=ROOT)
    except subprocess.TimeoutExpired:
      budget.skip("generate", "the transformers subprocess ran past its budget")
      proc = None
    if proc is not None and proc.returncode != 0:
      budget.skip("generate", f"the transformers subprocess failed (exit {proc.returncode})")
    if not os.path.exists(out):
      return {}
    with open(out) as f:
      return json.load(f)


if __name__ == "__main__":
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("spec", help="JSON: device, models, batches, prompt, new_tokens, budget_s")
  ap.add_argument("--json", required=True)
  args = ap.parse_args()
  hf_child(json.loads(args.spec), args.json)
