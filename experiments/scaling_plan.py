"""Paper-scale memory and step-time plan: Qwen3-8B-Base and Olmo3-7B-Base, G = 16 rollouts of
4k tokens, over an abstract TPU v5p-64 and an 8×H100 mesh (nothing is allocated).

  python experiments/scaling_plan.py [--mfu 0.4] [--prompts 32]

Prints the table recorded in docs/scaling.md (grpo_jax.planning.memory has the formulas).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from grpo_jax.models import PRESETS
from grpo_jax.planning import memory as mp
from grpo_jax.rundir import tables

MESHES = {
  mp.TPU_V5P_64.name: (mp.TPU_V5P_64, [(1, 32, 1), (4, 8, 1), (2, 8, 2), (1, 8, 4)]),
  mp.H100_X8.name: (mp.H100_X8, [(1, 8, 1), (1, 4, 2), (1, 2, 4), (1, 1, 8)]),
}


def main(argv):
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--mfu", type=float, default=0.4)
  parser.add_argument("--prompts", type=int, default=32)
  args = parser.parse_args(argv)
  rows = []
  for name in ("qwen3_8b_base", "olmo3_7b_base"):
    model = PRESETS[name]
    for hw, meshes in MESHES.values():
      for mesh in meshes:
        work = mp.Workload(prompts=args.prompts)
        result = mp.plan(model, mesh, work, hw, args.mfu)
        # Too big a KV cache: sample the N rows in sequential chunks until it fits.
        while not result["fits"] and work.sample_chunks < 64:
          work = dataclasses.replace(work, sample_chunks=work.sample_chunks * 2)
          result = mp.plan(model, mesh, work, hw, args.mfu)
        label = name if work.sample_chunks == 1 else f"{name} (sample in {work.sample_chunks})"
        rows.append(mp.plan_cells(label, mesh, result, hw))
  print(tables.markdown(mp.TABLE_COLUMNS, rows))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
