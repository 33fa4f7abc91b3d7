"""``launch.py --mode=compile``: every program of one RL step compiled for a target (a TPU slice
from a CPU host, or this host's devices), with XLA's own memory and cost.

Per program (``grpo_jax.planning.programs``), per device:
  - lower and compile seconds;
  - ``memory_analysis()``: argument, output, alias, temporary and generated-code bytes;
  - ``cost_analysis()``: FLOPs and bytes accessed, which count a loop's body once, and
    ``grpo_jax.planning.hlo``'s matmul FLOPs and collectives weighed by their loops' trip counts;
  - the model's own FLOPs (``programs``: 2 · matmul params per token per forward pass, causal
    attention, 3 passes a training step, the forward only for sampling) and the compiled
    program's weighted matmul FLOPs against it;
  - the roofline seconds max(FLOPs / peak, bytes / HBM bandwidth), XLA's bytes scaled by the
    loops' trip counts as the program's own traffic weighs them (``grpo_jax.planning.hlo_bytes``:
    each computation's bytes times its runs, over the same counted once).

The step's peak per device is the resident train state (params, optimizer moments, reference,
anchor: the update's state argument) plus the largest extra of any program the loop runs:
arguments + outputs + temporaries − aliased bytes, less the state for the update, which takes it
donated, and less the resident buffers another program reads as they are (LoRA's unmerged
sampler: the frozen base). It "fits" at ≤ 90% of the chip's HBM.

The rollout's time is read from the decode step compiled on its own: T steps, each reading the
weights and a full KV cache once (an upper bound: the sampler's cache grows in doubling
buckets), plus the prefill's roofline.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time

import jax
import numpy as np
from etils import epath

from grpo_jax import sharding as shard_lib
from grpo_jax.config.experiment import Experiment
from grpo_jax.planning import hlo, hlo_bytes, programs
from grpo_jax.planning.memory import Hardware
from grpo_jax.rundir import names, read
from grpo_jax.rundir import write as write_lib
from grpo_jax.train import fit

FIT_FRACTION = 0.9
MEMORY_KEYS = ("argument", "output", "alias", "temp", "code")


class CompileError(RuntimeError):
  """A program failed to lower or compile: names the program and carries XLA's message."""


@dataclasses.dataclass
class Record:
  """One compiled program's numbers (per device)."""

  name: str
  analysis: bool
  lower_s: float
  compile_s: float
  memory: dict  # MEMORY_KEYS -> bytes
  xla_flops: float  # cost_analysis: loop bodies once
  xla_bytes: float
  hlo: hlo.HloStats
  traffic: hlo_bytes.Traffic  # the HLO's own memory traffic, loops weighed and counted once
  model_flops: float
  tokens: int
  resident: bool
  decode_steps: int = 0
  param_gathers: tuple = ()  # all-gathers of a parameter's shape (inside loops: in_loop)
  param_gathers_in_loop: tuple = ()
  shared: float = 0.0  # argument bytes that are the resident state's own buffers

  @property
  def loop_factor(self) -> float:
    """How many times the loop-weighted memory traffic exceeds the once-counted (1 loop-free)."""
    return self.traffic.loop_factor

  @property
  def flops(self) -> float:
    """The compiled program's matmul FLOPs with every loop weighed by its trip count (the
    element-wise rest, a few percent, is left out: cost_analysis counts it with loop bodies
    once, and which of it sits in a loop is not known)."""
    return self.hlo.matmul_flops

  @property
  def bytes_accessed(self) -> float:
    return self.xla_bytes * self.loop_factor

  def extra(self, state_bytes: float) -> float:
    m = self.memory
    extra = m["argument"] + m["output"] + m["temp"] - m["alias"]
    return extra - (state_bytes if self.resident else self.shared)

  def roofline_s(self, hw: Hardware) -> float:
    return max(self.flops / hw.peak_flops, self.bytes_accessed / hw.hbm_bandwidth)

  def to_dict(self, hw: Hardware, state_bytes: float) -> dict:
    return {
      "name": self.name,
      "analysis_only": self.analysis,
      "lower_s": self.lower_s,
      "compile_s": self.compile_s,
      "memory_bytes": self.memory,
      "extra_bytes": self.extra(state_bytes),
      "xla_cost_analysis": {"flops": self.xla_flops, "bytes_accessed": self.xla_bytes},
      "flops": self.flops,
      "bytes_accessed": self.bytes_accessed,
      "bytes_loop_factor": self.loop_factor,
      "model_flops": self.model_flops,
      "flops_ratio": self.flops / self.model_flops if self.model_flops else None,
      "roofline_s": self.roofline_s(hw),
      "tokens": self.tokens,
      "hlo": self.hlo.to_dict(),
      "param_gathers": list(self.param_gathers),
      "param_gathers_in_loop": list(self.param_gathers_in_loop),
    }


def param_shapes(params, mesh) -> set:
  """Shape keys (``hlo.shape_key``) of every parameter matrix, whole and split along any one
  dimension by any mesh axis (a gather's result may be either)."""
  out = set()
  sizes = [n for n in dict(mesh.shape).values() if n > 1]
  for x in jax.tree.leaves(params):
    if len(x.shape) < 2:
      continue
    out.add(hlo.shape_key(x.shape))
    for i, d in enumerate(x.shape):
      for n in sizes:
        if d % n == 0:
          out.add(hlo.shape_key((*x.shape[:i], d // n, *x.shape[i + 1 :])))
  return out


def _no_persistent_cache(mesh):
  """Off for a TPU topology compiled from another host: its executables cannot be loaded back
  here (jax warns on every read), so caching them only costs disk. Unchanged otherwise."""
  if mesh.devices.flat[0].platform != "tpu" or jax.default_backend() == "tpu":
    return contextlib.nullcontext()
  from jax._src import config as jax_config  # noqa: PLC0415 (no public switch in jax 0.10)

  return jax_config.enable_compilation_cache(False)


def compile_one(p: programs.Program, mesh, gather_shapes: set, where: str):
  """(compiled, lowered, Record) of one program; a failure is a CompileError naming it."""
  try:
    with jax.set_mesh(mesh), _no_persistent_cache(mesh):
      t0 = time.perf_counter()
      lowered = p.fn.lower(*p.args, **p.kwargs)
      t1 = time.perf_counter()
      compiled = lowered.compile()
      t2 = time.perf_counter()
  except Exception as e:  # XLA raises its own types; the message is what matters
    raise CompileError(f"program '{p.name}' failed to compile for {where}:\n{e}") from e
  memory = fit.memory_bytes(compiled)
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, list | tuple) else cost
  module = hlo.parse_module(compiled.as_text())  # parsed once for both readers
  stats = hlo.analyze(module)
  record = Record(
    name=p.name,
    analysis=p.analysis,
    lower_s=t1 - t0,
    compile_s=t2 - t1,
    memory=memory,
    xla_flops=float(cost.get("flops", 0.0)),
    xla_bytes=float(cost.get("bytes accessed", 0.0)),
    hlo=stats,
    traffic=hlo_bytes.traffic(module),
    model_flops=p.model_flops,
    tokens=p.tokens,
    resident=p.resident,
    decode_steps=p.decode_steps,
    param_gathers=tuple(stats.gathers(gather_shapes)),
    param_gathers_in_loop=tuple(stats.gathers(gather_shapes, in_loop=True)),
    shared=p.shared,
  )
  return compiled, lowered, record


def state_bytes(state) -> float:
  """Per-device bytes of an abstract state (ShapeDtypeStructs with shardings)."""
  total = 0.0
  for x in jax.tree.leaves(state):
    total += math.prod(x.sharding.shard_shape(x.shape)) * np.dtype(x.dtype).itemsize
  return total


@dataclasses.dataclass
class Report:
  config: str
  target: str
  hardware: Hardware
  mesh_shape: tuple
  records: list
  state_bytes: float
  rollout_s: float  # the step's sampling, from the decode step and prefill
  sample_rows: int
  new_tokens: int
  formula: dict = dataclasses.field(default_factory=dict)  # name -> (formula, compiled) bytes
  config_hash: str = ""  # ``config.files.content_hash``: --dry_run reads a matching report

  @property
  def loop_records(self) -> list:
    return [r for r in self.records if not r.analysis]

  @property
  def peak_bytes(self) -> float:
    extras = [r.extra(self.state_bytes) for r in self.loop_records]
    return self.state_bytes + max(extras, default=0.0)

  @property
  def fits(self) -> bool:
    return self.peak_bytes <= FIT_FRACTION * self.hardware.hbm_bytes

  def record(self, name: str) -> Record | None:
    return next((r for r in self.records if r.name == name), None)

  def step_s(self, mfu: float | None = None) -> float:
    """The step's roofline: the update's (or its model FLOPs at ``mfu``) plus the rollout's."""
    update = self.record("update")
    hw = self.hardware
    if mfu is None:
      train = update.roofline_s(hw)
    else:
      train = update.model_flops / (hw.peak_flops * mfu)
    return train + self.rollout_s

  def tokens_per_s_per_chip(self, mfu: float) -> float:
    """Sampled tokens (B·G·T) per second per chip at a step time of :meth:`step_s` (mfu)."""
    return self.sample_rows * self.new_tokens / self.step_s(mfu) / self.hardware.chips

  def decode(self) -> dict:
    """One decoded token (the decode step at a full cache): the bytes XLA's cost analysis reads
    against the weights and KV cache it holds (its arguments), and the collectives the
    sampler's decode loops run, by kind, with the weight gathers among them."""
    step = self.record("decode_step")
    samplers = [r for r in self.loop_records if r.name.startswith("sample")]
    if step is None or not samplers:
      return {}
    loops = {k: 0.0 for k in hlo.COLLECTIVES}
    for r in samplers:
      for k in hlo.COLLECTIVES:
        loops[k] += r.hlo.collectives[k]["loop_count"]
    return {
      "bytes_per_token": step.xla_bytes,
      "weights_and_kv_bytes": step.memory["argument"],
      "loop_collectives": loops,
      "weight_gathers_in_loops": sum(len(r.param_gathers_in_loop) for r in samplers),
    }

  def to_dict(self, mfu: float = 0.4) -> dict:
    hw = self.hardware
    return {
      "config": self.config,
      "config_hash": self.config_hash,
      "target": self.target,
      "hardware": dataclasses.asdict(hw),
      "mesh": dict(zip(shard_lib.AXES, self.mesh_shape)),
      "state_bytes": self.state_bytes,
      "peak_bytes": self.peak_bytes,
      "fits": self.fits,
      "fit_fraction": FIT_FRACTION,
      "rollout_s": self.rollout_s,
      "sample_rows": self.sample_rows,
      "new_tokens": self.new_tokens,
      "step_roofline_s": self.step_s(),
      "mfu": mfu,
      f"step_s_at_mfu_{mfu}": self.step_s(mfu),
      f"sampled_tokens_per_s_per_chip_at_mfu_{mfu}": self.tokens_per_s_per_chip(mfu),
      "decode": self.decode(),
      "formula_vs_compiled": {
        k: {"formula": f, "compiled": c, "ratio": c / f if f else None}
        for k, (f, c) in self.formula.items()
      },
      "programs": [r.to_dict(hw, self.state_bytes) for r in self.records],
    }


def decode_step_s(step: Record, hw: Hardware) -> float:
  """One decode step's roofline: its matmul FLOPs, or reading what it holds (the weights and
  the full KV cache, its arguments) once. XLA's bytes accessed count the cache's one-slot,
  in-place write as the whole cache (about twice the arguments), so they are not used here."""
  return max(step.flops / hw.peak_flops, step.memory["argument"] / hw.hbm_bandwidth)


def rollout_seconds(records: dict, s: programs.Shapes, hw: Hardware) -> float:
  """M + T decode steps at the full-cache decode step's roofline (an upper bound: the cache
  grows in doubling buckets) plus the prefill's roofline."""
  step, prefill = records.get("decode_step"), records.get("prefill")
  if step is None:
    return 0.0
  steps = s.preview + s.new_tokens
  return steps * decode_step_s(step, hw) + (prefill.roofline_s(hw) if prefill else 0.0)


def compile_step(
  cfg: Experiment, mesh, hw: Hardware, where: str, log=print, config_name: str = ""
) -> Report:
  """Compiles every program of one RL step of ``cfg`` on ``mesh`` (module doc)."""
  s = programs.shapes(cfg, mesh)
  gather_shapes = param_shapes(s.params, mesh)
  records = {}

  def run(p: programs.Program):
    compiled, lowered, rec = compile_one(p, mesh, gather_shapes, where)
    records[p.name] = rec
    log(
      f"  {p.name:<22} compiled in {rec.compile_s:6.1f} s (lowered {rec.lower_s:5.1f} s), "
      f"temp {rec.memory['temp'] / 2**30:7.2f} GiB, args {rec.memory['argument'] / 2**30:7.2f} GiB"
    )
    return compiled, lowered

  for p in programs.step_programs(s):
    run(p)
  cache_bytes = 0.0
  if cfg.sampling.engine == "jax":
    rows = cfg.sampling.prompts_per_step * cfg.sampling.group_size
    slots = s.prompt + s.preview + s.new_tokens
    wide = dataclasses.replace(s, prompt=s.prompt + s.preview)
    compiled, lowered = run(programs.prefill_program(wide, rows, slots))
    cache_shapes = lowered.out_info[1]
    cache = programs.abstract(cache_shapes, compiled.output_shardings[1])
    cache_bytes = state_bytes(cache)
    run(programs.decode_step_program(s, rows, cache))
  _, state, _ = programs.train_state(s)
  rows = cfg.sampling.prompts_per_step * cfg.sampling.group_size
  resident = state_bytes(state)
  formula = formula_check(cfg, mesh, hw, records, resident, cache_bytes)
  return Report(
    config=config_name,
    target=where,
    hardware=hw,
    mesh_shape=tuple(mesh.devices.shape),
    records=list(records.values()),
    state_bytes=resident,
    rollout_s=rollout_seconds(records, s, hw),
    sample_rows=rows,
    new_tokens=s.new_tokens,
    formula=formula,
  )


def formula_check(
  cfg: Experiment, mesh, hw: Hardware, records: dict, resident: float, cache: float
) -> dict:
  """``--dry_run``'s formulas (``planning.memory``) beside the compiled numbers, per device:
  {name: (formula bytes, compiled bytes)}."""
  from grpo_jax.planning import dry_run  # noqa: PLC0415

  plan = dry_run.plan(cfg, mesh.size, hardware=hw).bytes
  out = {"resident state": (plan["params"] + plan["optimizer"] + plan["reference"], resident)}
  if "reshard" in records:
    out["sampler copy"] = (plan["sampler_params"], records["reshard"].memory["output"])
  if cache:
    out["KV cache"] = (plan["kv_cache"], cache)
  update = records["update"]
  out["update temporaries"] = (plan["gradients"] + plan["activations"], update.memory["temp"])
  extras = [r.extra(resident) for r in records.values() if not r.analysis]
  out["step peak"] = (plan["peak"], resident + max(extras))
  return out


def _gib(b: float) -> str:
  return f"{b / 2**30:.2f}"


def markdown(report: Report) -> str:
  """The report as Markdown: a summary line, one row per program, its collectives."""
  hw = report.hardware
  mesh = "×".join(map(str, report.mesh_shape))
  lines = [
    f"**{report.config or 'config'}** on {hw.name} (mesh data×fsdp×tensor = {mesh}): "
    f"resident state {_gib(report.state_bytes)} GiB, step peak {_gib(report.peak_bytes)} GiB "
    f"of {_gib(hw.hbm_bytes)} GiB per chip: **{'fits' if report.fits else 'does not fit'}** "
    f"(≤ {FIT_FRACTION:.0%}); step roofline {report.step_s():.1f} s "
    f"(rollout {report.rollout_s:.1f} s), {report.tokens_per_s_per_chip(0.4):,.0f} sampled "
    "tokens/s/chip at 40% MFU",
    "",
    "| program | compile s | args GiB | out GiB | temp GiB | extra GiB | HLO TFLOP | model "
    "TFLOP | ratio | roofline s | all-gather | reduce-scatter | all-reduce | all-to-all | "
    "permute | param gathers in loops |",
    "|---|" + "---:|" * 14 + "---|",
  ]
  for r in report.records:
    m = r.memory
    # A loop that stops on data (the decoder's "every row stopped") counts at its bound.
    bound = "≤ " if any(lp.how != "exact" for lp in r.hlo.loops) else ""
    ratio = f"{bound}{r.flops / r.model_flops:.2f}" if r.model_flops else "–"
    coll = [
      f"{int(c['count'])} / {_gib(c['bytes'])}"
      for c in (r.hlo.collectives[k] for k in hlo.COLLECTIVES)
    ]
    name = f"{r.name} (analysis)" if r.analysis else r.name
    lines.append(
      f"| {name} | {r.compile_s:.1f} | {_gib(m['argument'])} | {_gib(m['output'])} | "
      f"{_gib(m['temp'])} | {_gib(r.extra(report.state_bytes))} | {r.flops / 1e12:.3g} | "
      f"{r.model_flops / 1e12:.3g} | {ratio} | {r.roofline_s(hw):.3g} | "
      + " | ".join(coll)
      + f" | {len(r.param_gathers_in_loop)} |"
    )
  lines.append("")
  lines.append(
    "Collectives: count / GiB per device, loops weighed by their trip counts (a decode loop at "
    "its bound: ≤). Parameter gathers in loops: all-gathers of a weight inside a loop body "
    "(the update's micro-batch loop under FSDP gathers each layer's weights; a decode loop "
    "should gather none)."
  )
  d = report.decode()
  if d:
    loops = ", ".join(f"{k} {int(v)}" for k, v in d["loop_collectives"].items() if v)
    lines += [
      "",
      f"Decode: {_gib(d['bytes_per_token'])} GiB read per decoded token (XLA) against "
      f"{_gib(d['weights_and_kv_bytes'])} GiB of weights + KV cache at a full cache; collectives "
      f"in the decode loops: {loops or 'none'}; weight gathers there: "
      f"{d['weight_gathers_in_loops']}.",
    ]
  if report.formula:
    lines += ["", "| per device | --dry_run formula GiB | compiled GiB | compiled / formula |",
              "|---|---:|---:|---:|"]  # fmt: skip
    for k, (f, c) in report.formula.items():
      ratio = f"{c / f:.2f}" if f else "–"
      lines.append(f"| {k} | {_gib(f)} | {_gib(c)} | {ratio} |")
  return "\n".join(lines)


def write(report: Report, out_dir) -> tuple:
  """``compiled.json`` and ``compiled.md`` under ``out_dir`` (``<workdir>/plan``)."""
  return write_lib.compiled_report(out_dir, report.to_dict(), markdown(report))


def compile_config(
  cfg: Experiment, target: str = "auto", topology: str = "", log=print, name: str = ""
):
  """``launch.py --mode=compile``: the :class:`Report` of ``cfg``'s step on ``--target`` (a
  named slice, 'cpu' / 'auto': this host's devices) or ``--topology``. Raises ValueError for an
  unknown target or a mesh the slice cannot hold, RuntimeError without libtpu, CompileError
  naming a program that fails."""
  from grpo_jax.planning import topology as topology_lib  # noqa: PLC0415

  where = topology_lib.resolve(target, topology)
  if where.topology:
    devices = topology_lib.tpu_devices(where.topology)
    hw = dataclasses.replace(where.hardware, chips=len(devices))
  else:
    devices = jax.devices()
    hw = topology_lib.local_hardware(len(devices))
  mesh = shard_lib.make_mesh(cfg.mesh, devices)
  rows = cfg.sampling.prompts_per_step * cfg.sampling.group_size
  if rows % shard_lib.batch_size_multiple(mesh):
    raise ValueError(
      f"B·G = {rows} rows do not split over data·fsdp = {shard_lib.batch_size_multiple(mesh)} "
      f"devices of {where.name}"
    )
  log(f"compiling {name or 'the config'} for {hw.name}, mesh {dict(mesh.shape)}")
  report = compile_step(cfg, mesh, hw, hw.name, log, name)
  return dataclasses.replace(report, config_hash=config_hash(cfg))


def config_hash(cfg: Experiment) -> str:
  from grpo_jax.config import files  # noqa: PLC0415

  return files.content_hash(cfg)


def compiled_beside_plan(workdir, cfg: Experiment) -> str | None:
  """``--dry_run``'s second table: the formulas beside the compiled bytes of
  ``<workdir>/plan/compiled.json`` when that report is of this very config (None otherwise)."""
  path = epath.Path(workdir) / names.PLAN / names.COMPILED_JSON
  data = read.json_file(path)
  if data is None or data.get("config_hash") != config_hash(cfg):
    return None
  lines = [
    f"compiled for {data['target']} ({path}), per device (GiB):",
    f"  {'':<20}{'formula':>10}{'compiled':>10}",
  ]
  for k, v in data["formula_vs_compiled"].items():
    lines.append(f"  {k:<20}{v['formula'] / 2**30:10.2f}{v['compiled'] / 2**30:10.2f}")
  lines.append(f"fits per XLA: {data['fits']}")
  return "\n".join(lines)


__all__ = [
  "CompileError",
  "Record",
  "Report",
  "compile_config",
  "compile_step",
  "markdown",
  "write",
]
