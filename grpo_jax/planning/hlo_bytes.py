"""The memory traffic of a compiled program, weighed by its loops, from its optimized HLO text.

XLA's ``cost_analysis()`` counts "bytes accessed" with every loop body once. Scaling that by
the loops' weighted matmul FLOPs over the once-counted ones is right only where bytes sit in the
loops as FLOPs do; a loop of few FLOPs and many bytes (or the reverse) moves the estimate the
wrong way. This module counts each computation's traffic itself and weighs it by the times the
computation runs (``grpo_jax.planning.hlo.run_counts``):

  traffic(c) = Σ over c's instructions of the bytes it reads and writes in memory
  weighted = Σ_c runs(c) · traffic(c),   once = Σ_c traffic(c)

over the computations that hold the program's control flow (the entry, loop bodies and
conditions, conditional branches, called computations), not a fusion's inside (its values stay
on chip) or a reduction's combiner. Per instruction: its result's bytes plus its operands',
where an operand a fusion only slices counts the slices' bytes (a scanned layer reads its own
layer of the stacked weights), and an in-place ``dynamic-update-slice`` (alone or at a fusion's
root) writes its update, not the buffer. Tuples, parameters, bitcasts, constants and the control
instructions themselves move nothing.

``weighted / once`` is the program's loop factor for bytes: :mod:`grpo_jax.planning.compiled`
scales XLA's once-counted bytes by it.
"""

from __future__ import annotations

import dataclasses

from grpo_jax.planning import hlo

_FREE = {
  "parameter", "get-tuple-element", "tuple", "constant", "bitcast", "while", "conditional",
  "call", "after-all", "opt-barrier", "partition-id", "replica-id", "iota",
}  # fmt: skip
_CONTROL = ("body", "condition", "branch", "true_computation", "false_computation")
_SLICES = {"dynamic-slice", "slice", "gather"}


@dataclasses.dataclass(frozen=True)
class Traffic:
  weighted: float  # bytes, every computation weighed by its runs
  once: float  # bytes, every control-flow computation counted once

  @property
  def loop_factor(self) -> float:
    return self.weighted / self.once if self.once else 1.0


def control_computations(comps: dict[str, hlo.Computation]) -> set[str]:
  """The entry and every computation reached from it as a loop body or condition, a branch or
  the target of a ``call``: the ones whose instructions move memory."""
  entry = next(c.name for c in comps.values() if c.entry)
  seen, todo = {entry}, [entry]
  while todo:
    for inst in comps[todo.pop()].instructions:
      for kind, name in hlo.callees(inst):
        control = kind in _CONTROL or (inst.opcode == "call" and kind == "to_apply")
        if control and name in comps and name not in seen:
          seen.add(name)
          todo.append(name)
  return seen


def _fused(inst: hlo.Instruction, comps: dict) -> hlo.Computation | None:
  if inst.opcode != "fusion":
    return None
  called = [n for k, n in hlo.callees(inst) if k == "calls" and n in comps]
  return comps[called[0]] if called else None


def _users(comp: hlo.Computation) -> dict[str, list]:
  out: dict[str, list] = {}
  for i in comp.instructions:
    for o in i.operands:
      out.setdefault(o, []).append(i)
  return out


def _read(comp: hlo.Computation, name: str, full: float, comps: dict, depth: int = 0) -> float:
  """The bytes ``comp`` reads of its value ``name`` (``full`` bytes): the slices it takes where
  every use slices it (through bitcasts and nested fusions' parameters), else all of it."""
  total = 0.0
  for u in _users(comp).get(name, []):
    inner = _fused(u, comps)
    if u.opcode in _SLICES and u.operands[0] == name:
      total += u.bytes
    elif u.opcode == "bitcast":
      total += _read(comp, u.name, full, comps, depth + 1)
    elif inner is not None and depth < 8:
      params = {int(i.args): i.name for i in inner.instructions if i.opcode == "parameter"}
      for k, o in enumerate(u.operands):
        if o == name and k in params:
          total += _read(inner, params[k], full, comps, depth + 1)
    else:
      return full
  return min(total, full)


def _outputs(fused: hlo.Computation) -> list[hlo.Instruction]:
  """The values a fusion writes: its root, or each element of a multi-output fusion's tuple."""
  insts = {i.name: i for i in fused.instructions}
  root = fused.instructions[-1]
  if root.opcode != "tuple":
    return [root]
  return [insts[o] for o in root.operands if o in insts]


def _fusion_bytes(inst: hlo.Instruction, types: dict, fused: hlo.Computation, comps: dict):
  """A fusion's operands as it reads them (:func:`_read`) plus what it writes (an output that
  is a dynamic-update-slice of a parameter: the update, and that parameter is not read)."""
  inner = fused.types()
  written, in_place = 0.0, set()
  for out in _outputs(fused):
    if out.opcode == "dynamic-update-slice" and len(out.operands) > 1:
      in_place.add(out.operands[0])
      written += hlo.type_bytes(inner.get(out.operands[1], ""))
    else:
      written += out.bytes
  read = 0.0
  for i in fused.instructions:
    if i.opcode != "parameter" or i.name in in_place or not i.args.strip().isdigit():
      continue
    k = int(i.args)
    operand = inst.operands[k] if k < len(inst.operands) else None
    full = hlo.type_bytes(types.get(operand, i.type))
    read += _read(fused, i.name, full, comps)
  return read + written


def instruction_bytes(inst: hlo.Instruction, types: dict, comps: dict) -> float:
  """The bytes one top-level instruction reads and writes (module doc)."""
  if inst.opcode in _FREE or inst.opcode.endswith("-start"):
    return 0.0
  fused = _fused(inst, comps)
  if fused is not None:
    return _fusion_bytes(inst, types, fused, comps)
  if inst.opcode == "dynamic-update-slice" and len(inst.operands) > 1:
    return 2 * hlo.type_bytes(types.get(inst.operands[1], ""))
  if inst.opcode in _SLICES:
    return 2 * inst.bytes
  operands = sum(hlo.type_bytes(types.get(o, "")) for o in inst.operands)
  return operands + inst.bytes


def traffic(module: str | dict[str, hlo.Computation]) -> Traffic:
  """The weighted and once-counted memory traffic of an optimized HLO module (module doc): its
  text or its parsed computations (``hlo.parse_module``)."""
  comps = hlo.parse_module(module) if isinstance(module, str) else module
  runs, _, _ = hlo.run_counts(comps)
  weighted = once = 0.0
  for name in control_computations(comps):
    comp = comps[name]
    types = comp.types()
    b = sum(instruction_bytes(i, types, comps) for i in comp.instructions)
    weighted, once = weighted + runs.get(name, 0.0) * b, once + b
  return Traffic(weighted, once)


__all__ = ["Traffic", "control_computations", "instruction_bytes", "traffic"]
