"""Paper-scale memory and step-time plan over an abstract mesh: nothing is allocated.

The train state is built with ``jax.eval_shape`` and placed on a ``jax.sharding.AbstractMesh``
by the logical-axis rules (``grpo_jax.sharding.rules``), so params / optimizer / reference /
sampler-copy bytes per device are exact (Σ_leaves shard numel · itemsize; the reference and
the sampler's weights with their matrices in the compute dtype, ``models.compute_params``). The
rest are formulas (per device; N rows = B·G, P prompt + R response tokens, L = P + R,
dp = data·fsdp, tp = tensor, b = micro-batch rows per device):

  kv_cache    = 2 · layers · ⌈N_chunk / dp⌉ · L · Hk/tp · Dh · itemsize      (sampler)
  gradients   = params · (2 + [micro-batches > 1] + [scanned layers])       (this micro-batch's,
                the optimizer's update, an accumulator, a scanned backward's stacked copy)
  LoRA        (``Workload.lora``, METHODS §9): params = the adapters' float32 masters + the
                frozen base in the compute dtype; optimizer moments and gradients of the
                adapters only; no reference (the base is it); the sampler's copy is the
                merged tree, always a new one (``train.run.Setup.weights``), or unmerged the
                adapters in the compute dtype, plus the base only where the sampler's layout
                moves it
  activations = layers · b · L · D · itemsize                              (remat full: layer
                inputs saved) + b · L · (3 · H/tp · L · 4 + 3 · F/tp · itemsize) (one layer's
                recomputed working set: f32 attention scores, probabilities and their
                gradient; MLP) + b · L · V_chunk · 4 · 2                  (logits + softmax)
  flops       = 6 · P_count · N · L (update) + 2 · P_count · N · L (reference, if KL)
                + 2 · P_count · N · R (sampling) + attention terms 12 · layers · N · L² · H·Dh/2
  time        = update_flops / (chips · peak · MFU) + decode steps · (weights/tp + kv per
                device) / HBM bandwidth (decoding is bandwidth bound; roofline; weights in
                the compute dtype)
"""

from __future__ import annotations

import dataclasses
import math
import os

import jax
import numpy as np

from grpo_jax import sharding as shard_lib
from grpo_jax.models import lora as lora_lib
from grpo_jax.models.hf_io import abstract_params
from grpo_jax.models.model_config import ModelConfig
from grpo_jax.models.transformer import compute_params
from grpo_jax.sharding import rules as rules_lib


@dataclasses.dataclass(frozen=True)
class Hardware:
  name: str
  chips: int
  hbm_bytes: float  # per chip
  peak_flops: float  # bf16 dense, per chip
  hbm_bandwidth: float  # bytes/s per chip


# Published per-chip numbers: TPU v5p (95 GiB HBM2e, 459 TFLOP/s bf16, 2.76 TB/s); v5p-64 is
# 64 TensorCores = 32 chips (one JAX device each). H100 SXM (80 GB, 989 TFLOP/s, 3.35 TB/s).
TPU_V5P_64 = Hardware("TPU v5p-64", 32, 95 * 2**30, 459e12, 2.765e12)
H100_X8 = Hardware("8×H100-80GB", 8, 80e9, 989e12, 3.35e12)
# TPU v5e (16 GiB HBM2, 197 TFLOP/s bf16, 819 GB/s) and v6e / Trillium (32 GiB, 918 TFLOP/s,
# 1.64 TB/s), 8 chips a host.
TPU_V5E_8 = Hardware("TPU v5e-8", 8, 16 * 2**30, 197e12, 0.819e12)
TPU_V6E_8 = Hardware("TPU v6e-8", 8, 32 * 2**30, 918e12, 1.64e12)


def cpu_host(num_devices: int = 1) -> Hardware:
  """This host as the target: its RAM shared by ``num_devices`` devices (the simulated devices
  of ``--xla_force_host_platform_device_count``), nominal FLOP/s and bandwidth (1e11, 2e10 per
  device: a rough figure for a few x86 cores, not a measurement)."""
  ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  return Hardware(
    f"CPU host ({ram / 2**30:.0f} GiB RAM)", num_devices, ram / num_devices, 1e11, 2e10
  )


# ``--target`` names (``launch.py --dry_run``); "auto" detects the local backend (``detect``).
TARGETS = {"v5p-64": TPU_V5P_64, "v5e-8": TPU_V5E_8, "v6e-8": TPU_V6E_8, "h100-8": H100_X8}
TARGET_CHOICES = ("auto", *TARGETS, "cpu")


def detect(device_kind: str, platform: str) -> str:
  """The ``TARGETS`` name (or ``"cpu"``) for a JAX device's ``device_kind`` and ``platform``;
  a TPU or GPU this module has no numbers for is a ValueError asking for ``--target``."""
  kind = device_kind.lower()
  if platform == "cpu":
    return "cpu"
  for marker, name in (("v5p", "v5p-64"), ("v5 lite", "v5e-8"), ("v5e", "v5e-8"), ("v6", "v6e-8")):
    if marker in kind:
      return name
  if "h100" in kind:
    return "h100-8"
  raise ValueError(
    f"no hardware numbers for device {device_kind!r}; pass --target {TARGET_CHOICES}"
  )


def hardware(target: str, num_devices: int) -> tuple[Hardware, str]:
  """``(per-chip numbers for num_devices chips, the target name)``; ``target = "auto"``
  detects the local backend."""
  if target == "auto":
    device = jax.devices()[0]
    target = detect(device.device_kind, device.platform)
  if target == "cpu":
    return cpu_host(num_devices), target
  if target not in TARGETS:
    raise ValueError(f"--target {target!r} is not one of {TARGET_CHOICES}")
  return dataclasses.replace(TARGETS[target], chips=num_devices), target


@dataclasses.dataclass(frozen=True)
class Workload:
  prompts: int = 32  # B
  group_size: int = 16  # G
  prompt_tokens: int = 512  # P
  response_tokens: int = 4096  # R
  micro_batch_rows: int = 1  # b, per device, in the update
  reference: bool = True  # KL reference model kept
  remat: str = "full"  # full | none
  vocab_chunk: int = 8192  # chunked log-probs; 0 = full vocabulary at once
  sample_chunks: int = 1  # the sampler runs the N rows in this many sequential chunks
  micro_batches: int = 1  # per optimizer step: > 1 keeps a gradient accumulator
  scanned: bool = False  # model.scan_layers: the scan's backward stacks the layers' gradients
  lora: lora_lib.LoraSpec | None = None  # model.lora: adapters trained on a frozen base
  sample_rules: str = "sample"  # mesh.sample_rules: the sampler copy's layout
  lora_unmerged: bool = False  # model.lora.sampler = unmerged: the base itself, adapters beside

  @property
  def rows(self) -> int:
    return self.prompts * self.group_size

  @property
  def seq(self) -> int:
    return self.prompt_tokens + self.response_tokens


def _device_bytes(shapes, shardings) -> int:
  total = 0
  for x, s in zip(jax.tree.leaves(shapes), jax.tree.leaves(shardings)):
    total += math.prod(s.shard_shape(x.shape)) * np.dtype(x.dtype).itemsize
  return total


def plan(model: ModelConfig, mesh_shape, work: Workload, hw: Hardware, mfu: float = 0.4) -> dict:
  """Per-device bytes (dict of ints) and projected seconds of one RL step."""
  import optax  # noqa: PLC0415

  data, fsdp, tensor = mesh_shape
  mesh = shard_lib.abstract_mesh(mesh_shape)
  _, params = abstract_params(model)
  train = lambda t: rules_lib.tree_shardings(t, rules_lib.TRAIN, mesh)
  # What the reference model keeps and the sampler reads: matrices in the compute dtype.
  cast = jax.eval_shape(lambda p: compute_params(p, model.dtype), params)
  cast_train = _device_bytes(cast, train(cast))
  cast_sample = rules_lib.tree_shardings(cast, rules_lib.PRESETS[work.sample_rules], mesh)
  trained, frozen = params, 0  # the optimizer's masters; LoRA: the adapters, beside the base
  if work.lora is not None:
    spec, key = work.lora, jax.random.key(0)
    trained = jax.eval_shape(
      lambda p: lora_lib.init_adapters(p, spec.rank, spec.targets, key), params
    )
    frozen = cast_train
  opt = jax.eval_shape(optax.adamw(1e-6).init, trained)
  p_bytes = _device_bytes(trained, train(trained))
  narrowed = cast_train < _device_bytes(params, train(params))
  new_copy = narrowed or fsdp > 1 or work.lora is not None
  sampler_bytes = _device_bytes(cast, cast_sample) if new_copy else 0
  if work.lora is not None and work.lora_unmerged:
    specs = lambda sh: [x.spec for x in jax.tree.leaves(sh)]
    moved = specs(cast_sample) != specs(train(cast))  # the base re-laid out for the sampler
    adapters = jax.eval_shape(lambda a: compute_params(a, model.dtype), trained)
    sample_rules = rules_lib.PRESETS[work.sample_rules]
    sampler_bytes = (sampler_bytes if moved else 0) + _device_bytes(
      adapters, rules_lib.tree_shardings(adapters, sample_rules, mesh)
    )
  itemsize = np.dtype(model.dtype).itemsize
  dp = data * fsdp
  kv_tp = tensor if model.num_kv_heads % tensor == 0 else 1
  rows_per_device = math.ceil(work.rows / work.sample_chunks / dp)
  kv = 2 * model.num_layers * rows_per_device * work.seq * model.num_kv_heads // kv_tp
  kv *= model.head_dim * itemsize
  b, L, D = work.micro_batch_rows, work.seq, model.hidden_dim
  heads_tp = tensor if model.num_heads % tensor == 0 else 1
  # Attention: f32 scores, their probabilities and, in the backward, their gradient.
  working = (
    b * L * (3 * model.num_heads // heads_tp * L * 4 + 3 * model.mlp_dim // tensor * itemsize)
  )
  if work.remat == "full":
    saved = model.num_layers * b * L * D * itemsize
  else:  # every layer keeps its working set plus q, k, v, o and the MLP input/output
    saved = model.num_layers * (working + 6 * b * L * D * itemsize)
  vocab = work.vocab_chunk or model.vocab_size
  vocab_tp = tensor if vocab % tensor == 0 else 1
  logits = 2 * b * L * vocab // vocab_tp * 4
  out = {
    "params": p_bytes + frozen,
    "optimizer": _device_bytes(opt, train(opt)),
    # This micro-batch's gradients and the optimizer's update; an accumulator over micro-batches;
    # a scanned backward's stacked layer gradients (compiled: Qwen3-8B on v5p-128, docs/scaling.md).
    "gradients": p_bytes * (2 + (work.micro_batches > 1) + work.scanned),
    "reference": cast_train if work.reference and work.lora is None else 0,
    # The sampler's copy: the masters cast to the compute dtype, then moved to the sampler
    # layout (``sampling.weights``); none when that is the masters themselves. LoRA: the merge.
    "sampler_params": sampler_bytes,
    "kv_cache": kv,
    "activations": saved + working + logits,
  }
  # The sampler copy and KV cache live during rollouts; gradients and activations during the
  # update. Peak = state + the larger of the two phases.
  state = out["params"] + out["optimizer"] + out["reference"]
  rollout_peak = out["sampler_params"] + out["kv_cache"]
  update_peak = out["gradients"] + out["activations"]
  out["peak"] = state + max(rollout_peak, update_peak)
  out["fits"] = out["peak"] <= 0.9 * hw.hbm_bytes
  out.update(step_time(model, work, hw, mesh_shape, mfu))
  return out


def step_time(model: ModelConfig, work: Workload, hw: Hardware, mesh_shape, mfu: float) -> dict:
  """FLOP-count projection (training at ``mfu``) and a bandwidth roofline for decoding."""
  data, fsdp, tensor = mesh_shape
  n_params = model.num_params
  N, L, R = work.rows, work.seq, work.response_tokens
  attn = 2 * model.num_layers * N * L * L * model.num_heads * model.head_dim  # causal QK+PV
  fwd = 2 * n_params * N * L + attn
  update = 3 * fwd + (fwd if work.reference else 0)
  train_s = update / (hw.chips * hw.peak_flops * mfu)
  itemsize = min(np.dtype(model.param_dtype).itemsize, np.dtype(model.dtype).itemsize)
  weights = n_params * itemsize / tensor  # the sampler's compute-dtype copy
  kv_token = 2 * model.num_layers * model.num_kv_heads * model.head_dim
  kv_token *= np.dtype(model.dtype).itemsize
  rows = math.ceil(N / work.sample_chunks / (data * fsdp))
  # Each decode step reads the local weights and, on average, half-full KV caches.
  per_step = (weights + rows * kv_token * (work.prompt_tokens + R / 2) / max(1, tensor)) / (
    hw.hbm_bandwidth
  )
  sample_s = work.sample_chunks * R * per_step
  return {
    "update_flops": update,
    "update_s": train_s,
    "sample_s": sample_s,
    "step_s": train_s + sample_s,
  }


# The per-device byte entries of a plan, in the order tables print them.
BYTE_KEYS = (
  "params",
  "optimizer",
  "gradients",
  "reference",
  "sampler_params",
  "kv_cache",
  "activations",
  "peak",
)


TABLE_COLUMNS = (
  "model", "hardware", "data×fsdp×tensor", "params", "optimizer", "grads", "reference",
  "sampler copy", "KV cache", "activations", "peak (GiB/device)", "fits", "update s",
  "sample s", "step s",
)  # fmt: skip


def plan_cells(name: str, mesh_shape, result: dict, hw: Hardware) -> list[str]:
  """One plan's row of a :data:`TABLE_COLUMNS` table (``rundir.tables.markdown``)."""
  gib = lambda v: f"{v / 2**30:7.1f}"
  mesh = "×".join(map(str, mesh_shape))
  times = [f"{result[k]:.0f}" for k in ("update_s", "sample_s", "step_s")]
  fits = "yes" if result["fits"] else "no"
  return [name, hw.name, mesh, *(gib(result[k]) for k in BYTE_KEYS), fits, *times]
