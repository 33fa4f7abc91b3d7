"""The update of a config compiled under every ``model.remat`` policy for a target: XLA's
temporary bytes, FLOPs and compile seconds per policy (docs/scaling.md, "Remat policies").

  JAX_PLATFORMS=cpu python experiments/compile_remat.py --config configs/paper_hadw_qwen3_8b.py \
      --target v5p-128 [--policies none,full] [--config.key=value ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from grpo_jax import sharding as shard_lib
from grpo_jax.config import files
from grpo_jax.config.groups_run import Model
from grpo_jax.planning import compiled, programs, topology
from grpo_jax.rundir import tables

# Every policy model.remat names ("auto" picks one of them at load).
REMAT = next(f for f in dataclasses.fields(Model) if f.name == "remat").metadata["choices"]
POLICIES = tuple(p for p in REMAT if p != "auto")


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--config", required=True)
  parser.add_argument("--target", default="v5p-128")
  parser.add_argument("--topology", default="")
  parser.add_argument("--policies", default=",".join(POLICIES))
  overrides = [a[len("--config.") :] for a in argv if a.startswith("--config.")]
  args = parser.parse_args([a for a in argv if not a.startswith("--config.")])
  where = topology.resolve(args.target, args.topology)
  devices = topology.tpu_devices(where.topology)
  rows = []
  for policy in args.policies.split(","):
    cfg = files.load(args.config, [*overrides, f"model.remat={policy}"])
    mesh = shard_lib.make_mesh(cfg.mesh, devices)
    s = programs.shapes(cfg, mesh)
    rec = compiled.compile_one(programs.update_program(s), mesh, set(), where.name)[2]
    gib = rec.memory["temp"] / 2**30
    ratio = rec.flops / rec.model_flops
    rows.append(
      [policy, f"{gib:.2f}", f"{rec.flops / 1e12:.1f}", f"{ratio:.2f}", f"{rec.compile_s:.0f}"]
    )
    print(f"{policy}: temp {gib:.2f} GiB, {ratio:.2f}x the model's FLOPs", flush=True)
  head = ["model.remat", "temp GiB / chip", "HLO TFLOP / chip", "× model FLOPs", "compile s"]
  print(f"\nupdate of {args.config} on {where.hardware.name}\n")
  print(tables.markdown(head, rows))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
