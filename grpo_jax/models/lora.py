"""Low-rank adapters (LoRA, Hu et al. 2021, arXiv:2106.09685; METHODS §9) over the params pytree.

For a target projection with kernel W (d_in, d_out): W' = W + (α/r)·A·B with A (d_in, r) drawn
as PEFT draws it and B (r, d_out) zero, so W' = W at initialisation. The base params stay frozen;
the adapters are a pytree of their own that mirrors the params' paths, float32 masters:

  params    layers.{i}.self_attn.q_proj.kernel   (d_in, d_out)
  adapters  layers.{i}.self_attn.q_proj.lora_a   (d_in, r)
            layers.{i}.self_attn.q_proj.lora_b   (r, d_out)

Stacked layers (``model.scan_layers``, ``layer_stack.py``): ``layers.self_attn.q_proj.lora_a``
(n, d_in, r). The leaf names are the ones the LoRA-aware ``layers.Linear`` holds, so
:func:`attach` (a deep merge) gives the unmerged model's params, and the sharding rules split A as
its kernel's input axis and B as its output axis, never the rank (``grpo_jax.sharding.rules``).

One policy, three (graphdef, params) views that ``models.forward``, ``token_logps`` and the
sampler take unchanged (:meth:`LoraModel.view`):

  unmerged  x·W + (α/r)·(x·A)·B at each target, W' never formed;
  merged    x·W' with W' = W + (α/r)·A·B in W's dtype (:func:`merge`);
  base      x·W, adapters off: the KL reference, no second copy of the model.

Export: :func:`save_merged` writes a Hugging Face checkpoint of W'; :func:`save_peft` a PEFT
adapter directory (``adapter_config.json``, ``adapter_model.safetensors``), which
:func:`load_peft` reads back (also one PEFT wrote: plain LoRA on these projections).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from grpo_jax.models.build import abstract_graphdef
from grpo_jax.models.hf_io import HFModel, save_hf
from grpo_jax.models.layer_stack import LAYERS, is_stacked
from grpo_jax.models.safetensors_io import CheckpointReader, write_file

# The adaptable projections: config name → (submodule, Hugging Face module name), in HF order.
PROJECTIONS = {
  "q": ("self_attn", "q_proj"),
  "k": ("self_attn", "k_proj"),
  "v": ("self_attn", "v_proj"),
  "o": ("self_attn", "o_proj"),
  "gate": ("mlp", "gate_proj"),
  "up": ("mlp", "up_proj"),
  "down": ("mlp", "down_proj"),
}
# ``model.lora.targets`` names: one projection each, or all_linear = all seven (PEFT's
# "all-linear" on these decoders: every Linear but the output head).
TARGETS = {
  **{name: (proj,) for name, proj in PROJECTIONS.items()},
  "all_linear": tuple(PROJECTIONS.values()),
}
A, B = "lora_a", "lora_b"
MODES = ("unmerged", "merged", "base")
SAMPLERS = ("merged", "unmerged")  # the views a sampler may read (model.lora.sampler)
PEFT_PREFIX = "base_model.model.model."  # PeftModel → ForCausalLM → its ``model``
PEFT_FILE, PEFT_CONFIG = "adapter_model.safetensors", "adapter_config.json"


@dataclasses.dataclass(frozen=True)
class LoraSpec:
  """Rank r, α and the targets (``model.lora`` names) of a set of adapters."""

  rank: int
  alpha: float
  targets: tuple[str, ...] = ("all_linear",)

  def __post_init__(self):
    if self.rank <= 0 or not self.alpha > 0:
      raise ValueError(f"LoRA needs rank > 0 and alpha > 0, got {self.rank}, {self.alpha}")
    modules(self.targets)  # checks the names

  @property
  def scale(self) -> float:
    """α / r, the factor on A·B."""
    return self.alpha / self.rank

  @property
  def modules(self) -> tuple[str, ...]:
    return modules(self.targets)

  @classmethod
  def from_config(cls, lora_cfg) -> LoraSpec | None:
    """The spec of the config group ``model.lora``; None when ``rank`` is 0 (LoRA off)."""
    if not lora_cfg.rank:
      return None
    return cls(int(lora_cfg.rank), float(lora_cfg.alpha), tuple(lora_cfg.targets))


def modules(targets) -> tuple[str, ...]:
  """The Hugging Face module names (``q_proj`` … ``down_proj``, in HF order) of ``targets``."""
  unknown = [t for t in targets if t not in TARGETS]
  if unknown or not targets:
    raise ValueError(f"LoRA targets {tuple(targets)} must be some of {sorted(TARGETS)}")
  chosen = {proj for t in targets for proj in TARGETS[t]}
  return tuple(proj[1] for proj in PROJECTIONS.values() if proj in chosen)


def _key(k):
  return getattr(k, "key", getattr(k, "idx", k))


def target_paths(params: dict, targets) -> list[tuple]:
  """Key paths of the kernels ``targets`` selects, in the params' flattening order:
  ``("layers", i, "self_attn", "q_proj", "kernel")`` (stacked: no ``i``)."""
  modules(targets)  # checks the names
  wanted = {proj for t in targets for proj in TARGETS[t]}
  paths = []
  for kp, _ in jax.tree_util.tree_flatten_with_path(params)[0]:
    path = tuple(_key(k) for k in kp)
    if path[0] == LAYERS and path[-1] == "kernel" and tuple(path[-3:-1]) in wanted:
      paths.append(path)
  return paths


def _match(tree: dict, k):
  """The key of ``tree`` that ``k`` names: a layer index as an int or its string (a checkpoint
  round trip turns int keys into strings), else ``k``."""
  for cand in (k, str(k), int(k) if isinstance(k, str) and k.isdigit() else None):
    if cand is not None and cand in tree:
      return cand
  return k


def _get(tree, path):
  for k in path:
    tree = tree[_match(tree, k)]
  return tree


def _put(tree: dict, path: tuple, value) -> dict:
  """A copy of ``tree`` with ``value`` at ``path`` (new dicts along the path only)."""
  head, *rest = path
  head = _match(tree, head)
  return {**tree, head: _put(tree.get(head, {}), tuple(rest), value) if rest else value}


def _pairs(adapters: dict):
  """(module path, A, B) of every adapted projection."""
  flat = {
    tuple(_key(k) for k in kp): x for kp, x in jax.tree_util.tree_flatten_with_path(adapters)[0]
  }
  for path, a in flat.items():
    if path[-1] == A:
      yield path[:-1], a, flat[(*path[:-1], B)]


def _uniform(key, layer: int, proj: str, shape: tuple[int, ...]) -> jax.Array:
  """A ~ U(−1/√d_in, 1/√d_in), shape (d_in, r): PEFT's ``kaiming_uniform_(a=√5)`` on its
  (r, d_in) weight, whose fan_in is d_in: gain √(2/(1+5)) times √(3/fan_in) = 1/√d_in. One key
  per (layer, projection), so stacked and unrolled layers draw the same numbers."""
  index = [p[1] for p in PROJECTIONS.values()].index(proj)
  key = jax.random.fold_in(jax.random.fold_in(key, layer), index)
  bound = 1.0 / math.sqrt(shape[0])
  return jax.random.uniform(key, shape, jnp.float32, -bound, bound)


def init_adapters(params: dict, rank: int, targets, key: jax.Array) -> dict:
  """Adapters for the kernels ``targets`` selects in ``params``: A random (:func:`_uniform`),
  B zero, both float32, in the params' layout (unrolled or stacked)."""
  stacked = is_stacked(params)
  out: dict = {}
  for path in target_paths(params, targets):
    kernel = _get(params, path)
    d_in, d_out = kernel.shape[-2:]
    proj = path[-2]
    if stacked:
      a = jnp.stack([_uniform(key, i, proj, (d_in, rank)) for i in range(kernel.shape[0])])
    else:
      a = _uniform(key, int(path[1]), proj, (d_in, rank))
    b = jnp.zeros((*kernel.shape[:-2], rank, d_out), jnp.float32)
    out = _put(out, (*path[:-1], A), a)
    out = _put(out, (*path[:-1], B), b)
  return out


def merge(params: dict, adapters: dict, alpha: float, rank: int) -> dict:
  """``params`` with each adapted kernel replaced by W' = W + (α/r)·A·B, summed in float32 and
  cast to W's dtype (the merged export's and a merged sampler's weights)."""
  scale = alpha / rank
  for module, a, b in _pairs(adapters):
    kernel = _get(params, (*module, "kernel"))
    delta = jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)
    merged = (kernel.astype(jnp.float32) + scale * delta).astype(kernel.dtype)
    params = _put(params, (*module, "kernel"), merged)
  return params


def attach(params: dict, adapters: dict) -> dict:
  """The unmerged model's params: ``params`` with the adapter leaves beside their kernels."""
  for module, a, b in _pairs(adapters):
    kernel = _get(params, (*module, "kernel"))
    fits_a = a.shape[:-1] == kernel.shape[:-1]
    fits_b = b.shape[:-2] + b.shape[-1:] == kernel.shape[:-2] + kernel.shape[-1:]
    if not (fits_a and fits_b and a.shape[-1] == b.shape[-2]):
      raise ValueError(
        f"adapter {'.'.join(map(str, module))}: A {a.shape}, B {b.shape} do not fit the kernel "
        f"{kernel.shape}"
      )
    params = _put(_put(params, (*module, A), a), (*module, B), b)
  return params


def detach(params: dict) -> tuple[dict, dict]:
  """(base params, adapters) of attached params: the inverse of :func:`attach`."""
  base, adapters = {}, {}
  for kp, x in jax.tree_util.tree_flatten_with_path(params)[0]:
    path = tuple(_key(k) for k in kp)
    if path[-1] in (A, B):
      adapters = _put(adapters, path, x)
    else:
      base = _put(base, path, x)
  return base, adapters


@dataclasses.dataclass(frozen=True)
class LoraModel:
  """The base graphdef, the unmerged model's graphdef (LoRA-aware ``Linear`` at the targets) and
  the spec; hashable, so it may be a static argument of a jitted function."""

  base: nnx.GraphDef
  graphdef: nnx.GraphDef
  spec: LoraSpec

  def view(self, params: dict, adapters: dict, mode: str = "unmerged") -> tuple:
    """(graphdef, params) of the policy base + adapters (``unmerged`` or ``merged``) or of the
    base alone (``base``, the KL reference); ``params`` are the base's (no adapter leaves)."""
    if mode == "unmerged":
      return self.graphdef, attach(params, adapters)
    if mode == "merged":
      return self.base, merge(params, adapters, self.spec.alpha, self.spec.rank)
    if mode == "base":
      return self.base, params
    raise ValueError(f"LoRA view {mode!r} is not one of {MODES}")


def adapt(graphdef: nnx.GraphDef, params: dict, spec: LoraSpec) -> LoraModel:
  """The :class:`LoraModel` of the base model (``graphdef``, ``params``: only their structure is
  read) with adapters ``spec``."""
  cfg = nnx.merge(graphdef, params).cfg
  adapted = dataclasses.replace(
    cfg, lora_targets=spec.modules, lora_rank=spec.rank, lora_scale=spec.scale
  )
  return LoraModel(graphdef, abstract_graphdef(adapted), spec)


def fingerprint(path, samples: int = 64, block: int = 4096) -> str:
  """A content hash of a checkpoint on disk (a file, or a directory's weight and config files):
  each file's name and size, and ``samples`` blocks of ``block`` bytes spread evenly over it
  (its first and last included). It tells two bases apart without reading an 8B model's 16 GB."""
  path = pathlib.Path(path)
  files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.suffix in SOURCES)
  digest = hashlib.sha256()
  for f in files:
    size = f.stat().st_size
    digest.update(f"{f.name}:{size}".encode())
    with f.open("rb") as fh:
      for offset in np.linspace(0, max(size - block, 0), samples).astype(np.int64):
        fh.seek(int(offset))
        digest.update(fh.read(block))
  return digest.hexdigest()[:16]


# The files of a checkpoint directory that :func:`fingerprint` reads.
SOURCES = (".safetensors", ".bin", ".gguf", ".json")


def save_merged(model: HFModel, adapters: dict, spec: LoraSpec, path, dtype: str | None = None):
  """A Hugging Face checkpoint of the merged weights W' (``save_hf`` of :func:`merge`)."""
  merged = merge(model.params, adapters, spec.alpha, spec.rank)
  return save_hf(dataclasses.replace(model, params=merged), path, dtype=dtype)


def peft_tensors(adapters: dict) -> dict[str, np.ndarray]:
  """PEFT's name → host array, torch layout: ``…q_proj.lora_A.weight`` = Aᵀ (r, d_in),
  ``…lora_B.weight`` = Bᵀ (d_out, r), one per layer (stacked adapters are unstacked)."""
  out = {}
  for module, a, b in _pairs(adapters):
    a, b = np.asarray(jax.device_get(a)), np.asarray(jax.device_get(b))
    layers = range(a.shape[0]) if a.ndim == 3 else [None]
    for i in layers:
      path = (LAYERS, i, *module[1:]) if i is not None else module
      name = PEFT_PREFIX + ".".join(map(str, path))
      a_i, b_i = (a[i], b[i]) if i is not None else (a, b)
      out[f"{name}.lora_A.weight"] = np.ascontiguousarray(a_i.T)
      out[f"{name}.lora_B.weight"] = np.ascontiguousarray(b_i.T)
  return out


def save_peft(adapters: dict, spec: LoraSpec, path, base_model_name_or_path: str = ""):
  """A PEFT adapter directory: ``adapter_config.json`` (``peft_type`` LORA, ``r``,
  ``lora_alpha`` = α, ``target_modules``, ``base_model_name_or_path``) and
  ``adapter_model.safetensors`` (:func:`peft_tensors`, float32), loadable with
  ``peft.PeftModel.from_pretrained(base_model, path)``."""
  path = pathlib.Path(path)
  path.mkdir(parents=True, exist_ok=True)
  tensors = peft_tensors(adapters)
  specs = {name: (x.shape, x.dtype) for name, x in tensors.items()}
  write_file(path / PEFT_FILE, specs, tensors.__getitem__)
  config = {
    "peft_type": "LORA",
    "task_type": "CAUSAL_LM",
    "base_model_name_or_path": base_model_name_or_path,
    "r": spec.rank,
    "lora_alpha": spec.alpha,
    "target_modules": list(spec.modules),
    "lora_dropout": 0.0,
    "bias": "none",
    "fan_in_fan_out": False,
    "use_rslora": False,
    "init_lora_weights": True,
    "inference_mode": True,
  }
  (path / PEFT_CONFIG).write_text(json.dumps(config, indent=2) + "\n")
  return path


def _peft_spec(config: dict, where) -> LoraSpec:
  """The spec of a PEFT ``adapter_config.json``; what this module cannot apply is refused."""
  if config.get("peft_type") != "LORA":
    raise ValueError(f"{where}: peft_type {config.get('peft_type')!r} is not 'LORA'")
  unsupported = [
    k
    for k in ("use_rslora", "use_dora", "fan_in_fan_out", "rank_pattern", "alpha_pattern")
    if config.get(k)
  ]
  if unsupported or config.get("bias", "none") != "none" or config.get("modules_to_save"):
    raise ValueError(f"{where}: LoRA variant not supported ({unsupported or 'bias/modules'})")
  short = {proj[1]: name for name, proj in PROJECTIONS.items()}
  target = config["target_modules"]
  names = tuple(PROJECTIONS) if target == "all-linear" else tuple(target)
  unknown = [m for m in names if m not in short and m not in PROJECTIONS]
  if unknown:
    raise ValueError(f"{where}: target_modules {unknown} are not among {sorted(short)}")
  targets = tuple(sorted({short.get(m, m) for m in names}, key=list(PROJECTIONS).index))
  return LoraSpec(int(config["r"]), float(config["lora_alpha"]), targets)


def load_peft(path, params: dict) -> tuple[LoraSpec, dict]:
  """(spec, adapters) of a PEFT LoRA directory for the base ``params``, in their layout
  (stacked params: stacked adapters): the inverse of :func:`save_peft`. A tensor missing or of
  the wrong shape is named."""
  path = pathlib.Path(path)
  spec = _peft_spec(json.loads((path / PEFT_CONFIG).read_text()), path)
  reader = CheckpointReader(path, (PEFT_FILE,))
  stacked = is_stacked(params)

  def read(layer: int, module: tuple, which: str, shape: tuple) -> np.ndarray:
    name = f"{PEFT_PREFIX}{LAYERS}.{layer}.{'.'.join(module[-2:])}.lora_{which}.weight"
    if name not in reader:
      raise KeyError(f"{path / PEFT_FILE} is missing tensor '{name}'")
    x = reader.read(name).astype(np.float32).T
    if x.shape != shape:
      raise ValueError(f"tensor '{name}' has shape {x.T.shape}, the base implies {shape[::-1]}")
    return x

  adapters: dict = {}
  for kpath in target_paths(params, spec.targets):
    module, kernel = kpath[:-1], _get(params, kpath)
    d_in, d_out = kernel.shape[-2:]
    layers = range(kernel.shape[0]) if stacked else [int(kpath[1])]
    a = [read(i, module, "A", (d_in, spec.rank)) for i in layers]
    b = [read(i, module, "B", (spec.rank, d_out)) for i in layers]
    pick = np.stack if stacked else (lambda xs: xs[0])
    adapters = _put(adapters, (*module, A), jnp.asarray(pick(a)))
    adapters = _put(adapters, (*module, B), jnp.asarray(pick(b)))
  return spec, adapters
