"""Shape-only dry run of an experiment config (``launch.py --dry_run``): nothing is allocated.

Reads the config's mesh sizes, model and batch shape and hands them to
:func:`grpo_jax.planning.memory.plan`, which builds the train state with ``jax.eval_shape`` on a
device-less ``AbstractMesh``, places it by the logical-axis rules, and adds the sampler's KV
cache and the update's activations (formulas in that module). No tensor, tokenizer or dataset
is read: a local checkpoint's ``config.json`` or ``.gguf`` metadata gives the shape, else
``model.preset`` (``model.hf_path`` a hub id), so a 7-8B config plans on a laptop.

Widths: L = P + R with P = ``data.max_prompt_tokens`` ('math'; countdown: the task's prompt
width) and R = the strategy preview budget (if on) + ``sampling.max_new_tokens``. Micro-batch
rows per device b = (``loss.micro_batch_size`` or one minibatch) / (data·fsdp).
"""

from __future__ import annotations

import dataclasses
import math
import pathlib

import jax

from grpo_jax import models
from grpo_jax import sharding as shard_lib
from grpo_jax.config.experiment import Experiment
from grpo_jax.models.lora import LoraSpec
from grpo_jax.planning import memory as memory_plan
from grpo_jax.train import autofit
from grpo_jax.train.state import uses_reference


@dataclasses.dataclass(frozen=True)
class DryRunPlan:
  mesh_shape: tuple[int, int, int]
  model: models.ModelConfig
  hardware: memory_plan.Hardware
  workload: memory_plan.Workload
  bytes: dict  # per device: params, optimizer, ..., peak; plus fits and projected seconds

  @property
  def num_params(self) -> int:
    return self.model.num_params


def model_config(cfg: Experiment, vocab_size: int | None = None) -> models.ModelConfig:
  """The decoder's shape: a local checkpoint's config.json or ``.gguf`` metadata, else the preset
  or the fields."""
  hf_path = cfg.model.hf_path
  dtypes = cfg.model.dtype, cfg.model.param_dtype
  if hf_path and (pathlib.Path(hf_path) / "config.json").exists():
    return models.load_hf_config(hf_path, *dtypes)[0]
  if models.build.is_gguf(hf_path) and pathlib.Path(hf_path).is_file():
    return models.load_gguf_config(hf_path, *dtypes)[0]
  mcfg = models.build.policy_config(cfg.model, vocab_size)
  if hf_path:  # the checkpoint (not here) would be loaded in the config's dtypes
    mcfg = dataclasses.replace(mcfg, dtype=cfg.model.dtype, param_dtype=cfg.model.param_dtype)
  return mcfg


def widths(cfg: Experiment) -> tuple[int, int, int | None]:
  """(P prompt tokens, R response tokens, the task vocabulary or None)."""
  response = cfg.sampling.max_new_tokens
  if cfg.strategy.enabled and cfg.strategy.num_previews > 1:
    response += cfg.strategy.max_preview_tokens
  if cfg.data.task == "countdown":
    from grpo_jax.data import CountdownTask  # noqa: PLC0415

    task = CountdownTask(cfg.data.num_numbers, cfg.data.max_number, cfg.data.max_target, 0)
    return task.prompt_len, response, len(task.tokenizer)
  return cfg.data.max_prompt_tokens, response, None


def plan(cfg: Experiment, num_devices: int | None = None, target: str = "auto", hardware=None):
  """The memory plan of ``cfg`` on its mesh (``-1`` axes take ``num_devices``; default: the
  product of the explicit axes, or ``jax.device_count()``) on ``target``'s chips
  (``memory.TARGET_CHOICES``; "auto": the local backend's), or on ``hardware`` (a
  ``memory.Hardware``) when given."""
  cfg = autofit.first_candidate(cfg)  # an auto key: the value it tries first
  sizes = [cfg.mesh.data, cfg.mesh.fsdp, cfg.mesh.tensor]
  if num_devices is None:
    num_devices = math.prod(sizes) if -1 not in sizes else jax.device_count()
  shape = shard_lib.mesh_shape(cfg.mesh, num_devices)
  dp = shape[0] * shape[1]
  rows = cfg.sampling.prompts_per_step * cfg.sampling.group_size
  if rows % dp:
    raise ValueError(f"B·G = {rows} rows do not split over data·fsdp = {dp} devices")
  prompt, response, vocab = widths(cfg)
  mcfg = model_config(cfg, vocab)
  micro = cfg.loss.micro_batch_size or rows // max(1, cfg.loss.num_minibatches)
  work = memory_plan.Workload(
    prompts=cfg.sampling.prompts_per_step,
    group_size=cfg.sampling.group_size,
    prompt_tokens=prompt,
    response_tokens=response,
    micro_batch_rows=max(1, micro // dp),
    reference=uses_reference(cfg),
    remat="full" if cfg.model.remat != "none" else "none",
    vocab_chunk=cfg.model.logps_vocab_chunk,
    micro_batches=max(1, rows // max(1, cfg.loss.num_minibatches) // micro),
    scanned=cfg.model.scan_layers,
    lora=LoraSpec.from_config(cfg.model.lora),
    sample_rules=cfg.mesh.sample_rules,
    lora_unmerged=cfg.model.lora.sampler == "unmerged",
  )
  if hardware is not None:
    return DryRunPlan(shape, mcfg, hardware, work, memory_plan.plan(mcfg, shape, work, hardware))
  hw, name = memory_plan.hardware(target, num_devices)
  how = "detected" if target == "auto" else "given"
  hw = dataclasses.replace(hw, name=f"{hw.name}, {num_devices} devices; --target {name}, {how}")
  return DryRunPlan(shape, mcfg, hw, work, memory_plan.plan(mcfg, shape, work, hw))


def format_plan(p: DryRunPlan) -> str:
  gib = 2**30
  lines = [
    f"mesh (data, fsdp, tensor) = {p.mesh_shape}, {math.prod(p.mesh_shape)} devices "
    f"({p.hardware.name})",
    f"model: {p.model.family}, {p.num_params / 1e6:,.1f} M params, {p.model.param_dtype}",
    f"batch: N = {p.workload.rows} rows x L = {p.workload.seq} tokens, "
    f"{p.workload.micro_batch_rows} rows per device per micro-batch",
    "per device (GiB):",
  ]
  for key in memory_plan.BYTE_KEYS:
    lines.append(f"  {key:<15}{p.bytes[key] / gib:8.2f}")
  lines.append(f"fits in 90% of {p.hardware.hbm_bytes / gib:.1f} GiB: {p.bytes['fits']}")
  lines.append(f"projected step: {p.bytes['step_s']:.0f} s (grpo_jax.planning.memory roofline)")
  return "\n".join(lines)


def report(cfg: Experiment, num_devices: int | None = None, target: str = "auto") -> str:
  """The plan of ``cfg`` as ``launch.py --dry_run [--target]`` prints it."""
  return format_plan(plan(cfg, num_devices, target))


__all__ = ["DryRunPlan", "format_plan", "model_config", "plan", "report", "widths"]
