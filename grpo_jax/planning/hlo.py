"""What a compiled program does, read from its optimized HLO text (``compiled.as_text()``).

XLA's ``cost_analysis()`` counts the body of a ``while`` loop once, whatever its trip count, so
a micro-batched update or a decode loop reports one iteration's FLOPs. This module parses the
optimized, SPMD-partitioned HLO module (per device) and weighs every computation by the times
it runs:

  runs(entry) = 1;  runs(c) = Σ over the instructions that call c of runs(caller) · trips
  trips = the loop's trip count for a ``while`` body and condition, 1 / n for each of a
  conditional's n branches (one runs), 1 for any other call

A loop's trip count is read from its condition: ``compare(counter, constant(n)),
direction=LT`` gives n. A condition that also tests data (the sampler's "every row has
stopped") has n as an upper bound and is marked ``bounded``; one without such a compare counts
once and is marked ``unknown``.

From the weighted instructions:
  - matmul FLOPs: 2 · |output| · |contracted| for every ``dot`` and ``convolution`` (the TPU
    compiler writes matmuls as convolutions with ``dim_labels``);
  - collectives by kind (all-gather, reduce-scatter, all-reduce, all-to-all, collective-permute),
    count and bytes (the result's bytes per device; asynchronous pairs counted at their
    ``-done``), split into those inside a loop and those outside.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re

COLLECTIVES = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")

_DTYPE_BYTES = {
  "pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "s32": 4, "u32": 4,
  "s64": 8, "u64": 8, "f8e4m3fn": 1, "f8e5m2": 1, "bf16": 2, "f16": 2, "f32": 4, "f64": 8,
  "c64": 8, "c128": 16, "token": 0,
}  # fmt: skip
_ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,]*)\]")
_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\((.*)\)\s*->\s*.*\{\s*$")
_CALLED = re.compile(
  r"\b(calls|to_apply|body|condition|true_computation|false_computation)=%([\w.\-]+)"
)
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")


@dataclasses.dataclass(frozen=True)
class Instruction:
  name: str
  type: str  # the result type: ``bf16[8,128]{1,0}`` or a tuple ``(s32[], f32[4])``
  opcode: str
  operands: tuple[str, ...]  # operand names, without the ``%``
  attrs: str  # everything after the operand list
  args: str = ""  # the operand list as written (a constant's value)

  @property
  def bytes(self) -> float:
    return type_bytes(self.type)


@dataclasses.dataclass
class Computation:
  name: str
  entry: bool
  params: dict  # parameter name -> type
  instructions: list

  def types(self) -> dict:
    return {**self.params, **{i.name: i.type for i in self.instructions}}


def type_bytes(type_str: str) -> float:
  """Bytes of an HLO type (a tuple's elements summed; layouts and tiling ignored)."""
  total = 0.0
  for dtype, dims in _ARRAY.findall(type_str):
    if dtype in _DTYPE_BYTES:
      total += _DTYPE_BYTES[dtype] * math.prod(int(d) for d in dims.split(",") if d)
  return total


def array_dims(type_str: str) -> tuple[int, ...]:
  """The dimensions of an HLO array type (the first array in the string)."""
  m = _ARRAY.search(type_str)
  return tuple(int(d) for d in m.group(2).split(",") if d) if m else ()


def _split_type(rest: str) -> tuple[str, str]:
  """``rest`` = "<type> <opcode>(…" → (type, the remainder from the opcode on)."""
  if rest.startswith("("):
    depth = 0
    for i, ch in enumerate(rest):
      depth += {"(": 1, ")": -1}.get(ch, 0)
      if depth == 0:
        return rest[: i + 1], rest[i + 1 :].lstrip()
  head, _, tail = rest.partition(" ")
  return head, tail


def _operands(text: str) -> tuple[str, str]:
  """``text`` = "(op, op), attrs" → (the operand list, attrs)."""
  depth = 0
  for i, ch in enumerate(text):
    depth += {"(": 1, ")": -1, "{": 1, "}": -1}.get(ch, 0)
    if depth == 0:
      return text[1:i], text[i + 1 :]
  return text, ""


def parse_instruction(line: str) -> Instruction | None:
  line = line.strip()
  if line.startswith("ROOT "):
    line = line[5:]
  if not line.startswith("%") or " = " not in line:
    return None
  name, rest = line[1:].split(" = ", 1)
  type_str, rest = _split_type(rest)
  opcode, paren, after = rest.partition("(")
  if not paren:
    return None
  args, attrs = _operands("(" + after)
  operands = tuple(re.findall(r"%([\w.\-]+)", args))
  return Instruction(name.strip(), type_str, opcode.strip(), operands, attrs, args)


def _params(header_args: str) -> dict:
  out = {}
  for m in re.finditer(r"([\w.\-]+):\s*", header_args):
    start = m.end()
    type_str, _ = _split_type(header_args[start:] + " ")
    out[m.group(1)] = type_str.rstrip(",")
  return out


def parse_module(text: str) -> dict[str, Computation]:
  """The computations of an HLO module's text, by name."""
  comps, current = {}, None
  for line in text.splitlines():
    if current is None:
      m = _HEADER.match(line.strip())
      if m and not line.startswith(" "):
        current = Computation(m.group(2), bool(m.group(1)), _params(m.group(3)), [])
      continue
    if line.strip() == "}":
      comps[current.name] = current
      current = None
      continue
    inst = parse_instruction(line)
    if inst is not None:
      current.instructions.append(inst)
  return comps


@dataclasses.dataclass(frozen=True)
class Loop:
  body: str
  trips: int
  how: str  # exact | bounded | unknown


def _constants(comp: Computation) -> dict:
  return {
    i.name: int(i.args)
    for i in comp.instructions
    if i.opcode == "constant" and re.fullmatch(r"\s*-?\d+\s*", i.args)
  }


def _less_than_bound(inst: Instruction, consts: dict, comps: dict) -> int | None:
  """n of ``… < n`` (n a constant): a ``compare(...), direction=LT``, or one inside a fusion
  (XLA:CPU's ``wrapped_compare``; a decode loop's fused ``t + 1 < n and not all done``), its
  parameters mapped to the fusion's operands."""
  if inst.opcode == "compare":
    if "direction=LT" not in inst.attrs:
      return None
    return next((consts[o] for o in inst.operands if o in consts), None)
  if inst.opcode != "fusion":
    return None
  called = [comps[n] for k, n in callees(inst) if k == "calls" and n in comps]
  if not called:
    return None
  inner = called[0]
  outer = {
    i.name: inst.operands[int(i.args)] for i in inner.instructions if i.opcode == "parameter"
  }
  values = {**_constants(inner), **{p: consts[o] for p, o in outer.items() if o in consts}}
  for i in inner.instructions:  # the compare may sit under an and (a bounded loop)
    if i.opcode == "compare" and "direction=LT" in i.attrs:
      bound = next((values[o] for o in i.operands if o in values), None)
      if bound is not None:
        return bound
  return None


def _wraps_compare(inst: Instruction, comps: dict) -> bool:
  """Whether a fusion computes nothing but its compare (its root is the compare)."""
  called = [comps[n] for k, n in callees(inst) if k == "calls" and n in comps]
  return bool(called) and called[0].instructions[-1].opcode == "compare"


def trip_count(cond: Computation, comps: dict | None = None) -> tuple[int, str]:
  """(n, how) of a while condition (module doc)."""
  consts = _constants(cond)
  root = cond.instructions[-1] if cond.instructions else None
  for inst in cond.instructions:
    bound = _less_than_bound(inst, consts, comps or {})
    if bound is not None:
      exact = inst is root and (inst.opcode == "compare" or _wraps_compare(inst, comps or {}))
      return max(1, bound), "exact" if exact else "bounded"
  return 1, "unknown"


def callees(inst: Instruction) -> list[tuple[str, str]]:
  out = [(kind, name) for kind, name in _CALLED.findall(inst.attrs)]
  for group in _BRANCHES.findall(inst.attrs):
    out += [("branch", n) for n in re.findall(r"%([\w.\-]+)", group)]
  return out


def run_counts(comps: dict[str, Computation]) -> tuple[dict[str, float], dict[str, int], list]:
  """(runs per computation, loop depth per computation, the loops) over the call graph."""
  entry = next(c for c in comps.values() if c.entry)
  runs, depth, loops = {entry.name: 1.0}, {entry.name: 0}, []
  order = [entry.name]
  i = 0
  while i < len(order):  # callers before callees: HLO's call graph is a DAG
    comp = comps[order[i]]
    i += 1
    for inst in comp.instructions:
      calls = callees(inst)
      trips, how = 1, ""
      if inst.opcode == "while":
        cond = dict((k, n) for k, n in calls).get("condition")
        trips, how = trip_count(comps[cond], comps) if cond in comps else (1, "unknown")
        body = dict((k, n) for k, n in calls).get("body", "")
        loops.append(Loop(body, trips, how))
      for kind, name in calls:
        if name not in comps:
          continue
        mult = trips if kind in ("body", "condition") else 1
        if kind in ("branch", "true_computation", "false_computation"):
          # A conditional runs one of its branches: each counts 1/n of the runs (exact when
          # they cost the same, as a scanned model's sliding and full layers do).
          mult = 1 / max(1, sum(k in ("branch", "true_computation", "false_computation")
                                for k, _ in calls))  # fmt: skip
        runs[name] = runs.get(name, 0.0) + runs[comp.name] * mult
        inner = depth[comp.name] + (1 if kind in ("body", "condition") else 0)
        depth[name] = max(depth.get(name, 0), inner)
        if name not in order:
          order.append(name)
  return runs, depth, loops


def matmul_flops(inst: Instruction, types: dict) -> float:
  """2 · |output| · |contracted| of a dot or convolution (0 for any other instruction)."""
  out = math.prod(array_dims(inst.type))
  if inst.opcode == "dot":
    lhs = array_dims(types.get(inst.operands[0], ""))
    m = re.search(r"lhs_contracting_dims=\{([0-9,]*)\}", inst.attrs)
    dims = [int(d) for d in m.group(1).split(",") if d] if m else []
    return 2.0 * out * math.prod(lhs[d] for d in dims if d < len(lhs))
  if inst.opcode == "convolution":
    m = re.search(r"dim_labels=(\w+)_(\w+)->", inst.attrs)
    if not m or len(inst.operands) < 2:
      return 0.0
    lhs_labels, rhs_labels = m.group(1), m.group(2)
    lhs = array_dims(types.get(inst.operands[0], ""))
    rhs = array_dims(types.get(inst.operands[1], ""))
    if len(rhs) != len(rhs_labels) or len(lhs) != len(lhs_labels):
      return 0.0
    features = rhs[rhs_labels.index("i")]
    spatial = sorted(c for c in lhs_labels if c.isdigit())
    inputs = [lhs[lhs_labels.index(c)] for c in spatial]
    taps = math.prod(real_taps(w, n) for w, n in zip(_windows(inst.attrs, len(spatial)), inputs))
    # Per output element: the kernel's input features times the window taps on real input.
    return 2.0 * out * features * taps
  return 0.0


@dataclasses.dataclass(frozen=True)
class Window:
  """One spatial dimension of a convolution's ``window={...}``."""

  size: int = 1
  stride: int = 1
  pad_low: int = 0
  pad_high: int = 0
  lhs_dilate: int = 1
  rhs_dilate: int = 1


def _windows(attrs: str, ndim: int) -> list[Window]:
  m = re.search(r"window=\{([^}]*)\}", attrs)
  fields = dict(kv.split("=", 1) for kv in m.group(1).split()) if m else {}
  out = []
  for d in range(ndim):
    pick = lambda key, default, d=d: int(fields[key].split("x")[d]) if key in fields else default
    pad = fields["pad"].split("x")[d].split("_") if "pad" in fields else ("0", "0")
    out.append(
      Window(
        size=pick("size", 1),
        stride=pick("stride", 1),
        pad_low=int(pad[0]),
        pad_high=int(pad[1]),
        lhs_dilate=pick("lhs_dilate", 1),
        rhs_dilate=pick("rhs_dilate", 1),
      )
    )
  return out


@functools.lru_cache(maxsize=4096)
def real_taps(w: Window, size: int) -> float:
  """The mean number of a window's taps that land on real input (not padding, not a hole of
  the input's dilation) over the output positions: the TPU compiler writes batched matmuls as
  convolutions whose windows mostly land on such holes."""
  dilated = (size - 1) * w.lhs_dilate + 1
  span = (w.size - 1) * w.rhs_dilate + 1
  outputs = (dilated + w.pad_low + w.pad_high - span) // w.stride + 1
  if outputs <= 0:
    return 0.0
  hits = 0
  for o in range(outputs):
    for j in range(w.size):
      pos = o * w.stride + j * w.rhs_dilate - w.pad_low
      hits += 0 <= pos < dilated and pos % w.lhs_dilate == 0
  return hits / outputs


# Instructions that move or re-type an array without computing on it.
_PASS_THROUGH = {
  "get-tuple-element", "bitcast", "copy", "convert", "reshape", "transpose", "copy-start",
  "copy-done", "all-gather-start", "all-gather-done", "tuple", "optimization-barrier",
  "dynamic-slice", "slice",  # one layer's weights out of a stacked (scanned) parameter
}  # fmt: skip


def _reads_parameter(comps: dict, comp: Computation, name: str, depth: int = 0) -> bool:
  """Whether the array ``name`` in ``comp`` is a parameter of ``comp`` (an argument, or a
  loop's carried state) moved or re-typed, not computed: a gathered weight, not an
  activation."""
  insts = {i.name: i for i in comp.instructions}
  while name in insts and depth < 64:
    inst, depth = insts[name], depth + 1
    if inst.opcode == "parameter":
      return True
    if inst.opcode == "fusion":
      called = [comps[n] for k, n in callees(inst) if k == "calls" and n in comps]
      if not called or any(
        i.opcode not in _PASS_THROUGH | {"parameter"} for i in called[0].instructions
      ):
        return False
    elif inst.opcode not in _PASS_THROUGH or not inst.operands:
      return False
    name = inst.operands[0]
  return name in comp.params


def _collective_kind(opcode: str) -> str | None:
  if opcode.endswith("-start"):
    return None  # counted at its -done
  base = opcode.removesuffix("-done")
  return base if base in COLLECTIVES else None


@dataclasses.dataclass(frozen=True)
class HloStats:
  matmul_flops: float  # per device, loops weighed by their trip counts
  matmul_flops_once: float  # the same, every computation counted once (cost_analysis' view)
  collectives: dict  # kind -> {count, bytes, loop_count, loop_bytes} (weighed by runs)
  loops: tuple  # Loop per while
  # (kind, result type, runs, inside a loop, of a parameter) of each collective instruction;
  # "of a parameter": its operand is an argument or loop-carried state moved, not computed.
  instances: tuple

  def to_dict(self) -> dict:
    return {
      "matmul_flops": self.matmul_flops,
      "matmul_flops_once": self.matmul_flops_once,
      "collectives": self.collectives,
      "loops": [dataclasses.asdict(lp) for lp in self.loops],
    }

  def gathers(self, shapes: set, in_loop: bool | None = None) -> list[str]:
    """The all-gathers of a parameter (an argument or loop-carried state) whose result has one
    of ``shapes`` (dimension tuples, size-1 dimensions dropped and sorted: see
    :func:`shape_key`); ``in_loop`` True / False: only those inside / outside a loop body."""
    out = []
    for kind, type_str, _, loop, weight in self.instances:
      if kind != "all-gather" or not weight or (in_loop is not None and loop != in_loop):
        continue
      if shape_key(array_dims(type_str)) in shapes:
        out.append(type_str)
    return out


def shape_key(dims) -> tuple[int, ...]:
  """Dimensions compared up to order and size-1 axes (a gathered kernel may be reshaped)."""
  return tuple(sorted(int(d) for d in dims if d != 1))


def analyze(module: str | dict[str, Computation]) -> HloStats:
  """The weighted matmul FLOPs and collectives of an optimized HLO module (module doc): its
  text, or its computations as ``parse_module`` gives them (parsed once for several readers)."""
  comps = parse_module(module) if isinstance(module, str) else module
  runs, depth, loops = run_counts(comps)
  flops = once = 0.0
  coll = {
    k: {"count": 0.0, "bytes": 0.0, "loop_count": 0.0, "loop_bytes": 0.0} for k in COLLECTIVES
  }
  instances = []
  for comp in comps.values():
    n = runs.get(comp.name, 0.0)
    if n == 0:
      continue
    types = comp.types()
    for inst in comp.instructions:
      f = matmul_flops(inst, types)
      flops, once = flops + n * f, once + f
      kind = _collective_kind(inst.opcode)
      if kind is None:
        continue
      entry = coll[kind]
      entry["count"] += n
      entry["bytes"] += n * inst.bytes
      loop = depth.get(comp.name, 0) > 0
      if loop:
        entry["loop_count"] += n
        entry["loop_bytes"] += n * inst.bytes
      weight = bool(inst.operands) and _reads_parameter(comps, comp, inst.operands[0])
      instances.append((kind, inst.type.split("{")[0], n, loop, weight))
  return HloStats(flops, once, coll, tuple(loops), tuple(instances))


__all__ = [
  "COLLECTIVES",
  "Computation",
  "HloStats",
  "Instruction",
  "analyze",
  "array_dims",
  "callees",
  "shape_key",
  "parse_module",
  "run_counts",
  "type_bytes",
]
