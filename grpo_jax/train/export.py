"""A trained policy as a Hugging Face checkpoint (``launch.py --mode=export``).

``export_run`` restores the params of a run directory's checkpoint (the latest, or ``step``)
and writes ``config.json``, safetensors, the tokenizer (``model.hf_path``'s, chat template
included, else the task's) and ``generation_config.json`` (copied from the source checkpoint
directory when it has one, else built from the tokenizer's special tokens).
"""

from __future__ import annotations

import os
import pathlib
import shutil

import jax

from grpo_jax import models
from grpo_jax.config.experiment import Experiment
from grpo_jax.models import build, gguf_io, hf_config, hf_io, lora
from grpo_jax.rundir import names, paths
from grpo_jax.sharding import distributed
from grpo_jax.train.run import open_run, policy_params, restore

GENERATION_CONFIG = "generation_config.json"
LORA_DIR = "lora"  # with LoRA: the adapters as a PEFT adapter directory


def source_config(cfg, vocab_size: int):
  """(ModelConfig, transformers config or None) of the run's policy, without loading weights."""
  m = cfg.model
  hf_path = m.hf_path
  dtype, param_dtype = m.dtype, m.param_dtype
  if not hf_path:
    return build.policy_config(m, vocab_size), None
  if build.is_gguf(hf_path):
    from gguf import GGUFReader

    hf = gguf_io.gguf_hf_config(GGUFReader(str(hf_path)))
    return hf_config.from_hf_config(hf, dtype, param_dtype), hf
  return hf_config.load_hf_config(str(hf_io.resolve_checkpoint(hf_path)), dtype, param_dtype)


def _generation_config(cfg, tokenizer, out: pathlib.Path) -> None:
  hf_path = cfg.model.hf_path
  if hf_path and not build.is_gguf(hf_path):
    source = hf_io.resolve_checkpoint(hf_path) / GENERATION_CONFIG
    if source.exists():
      shutil.copyfile(source, out / GENERATION_CONFIG)
      return
  from transformers import GenerationConfig

  ids = {f"{k}_token_id": getattr(tokenizer, f"{k}_token_id", None) for k in ("bos", "eos", "pad")}
  GenerationConfig(**{k: v for k, v in ids.items() if v is not None}).save_pretrained(str(out))


def export_run(
  e: Experiment,
  workdir: str | os.PathLike,
  out: str | pathlib.Path,
  step: int | None = None,
  log=print,
) -> pathlib.Path:
  """Writes the checkpoint of run directory ``workdir`` (step ``step``, default the latest) as a
  Hugging Face directory ``out`` (a local folder; the run directory may be a URI such as
  ``gs://``); returns ``out``. With LoRA the checkpoint's weights are the base with the adapters
  merged in (W' = W + (α/r)·A·B), and ``out/lora`` holds the adapters alone as a PEFT adapter
  (``models.lora.save_peft``: ``PeftModel.from_pretrained(base, out/lora)``). ``log`` prints on
  process 0 only."""
  if paths.is_uri(out):
    raise ValueError(f"export writes a local Hugging Face directory (--out); got {out}")
  out = pathlib.Path(out)
  with open_run(e, workdir, "export", log=log) as run:
    if run.ckpt.latest_step() is None:
      raise FileNotFoundError(f"no checkpoint in {run.workdir / names.CHECKPOINTS}")
    params, step = policy_params(run, step)
    params = run.s.merged(params)  # the base model's layout
    adapters = restore(run, step).params if run.s.lora is not None else None
  s, log = run.s, run.log
  model_cfg, hf = source_config(e, len(s.task.tokenizer))
  hf_path = e.model.hf_path
  tokenizer = build.load_tokenizer(hf_path) if hf_path else s.task.tokenizer
  model = models.HFModel(s.graphdef, params, model_cfg, tokenizer, hf)
  if distributed.is_primary():
    models.save_hf(model, out)
    _generation_config(e, tokenizer, out)
    if adapters is not None:
      base_name = str(hf_path or "")
      lora.save_peft(jax.device_get(adapters), s.lora.spec, out / LORA_DIR, base_name)
    log(f"exported step {step} of {workdir} to {out}")
  return out
