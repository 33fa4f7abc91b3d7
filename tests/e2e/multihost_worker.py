"""The real launcher with a reward that has signal for an untrained tiny model (1 for completions
of even length), so multi-host tests compare runs whose updates are not all zero.

Each process also counts the work it does: the rows it hands to the mesh
(``sharding.shard_batch``: sampling, warm-start and update batches) and the completions it
grades, and appends them to ``<workdir>/work.<process>.jsonl`` at exit. Summed over the
processes of a job they equal one process's count when the work is split, not repeated."""

import atexit
import json
import pathlib
import sys

import jax
import numpy as np

from grpo_jax import data
from grpo_jax import sharding as shard_lib

WORK = {"mesh_rows": 0, "graded_rows": 0}


def length_parity_rewards(self, problems, completions):
  WORK["graded_rows"] += len(completions)
  return np.asarray([float(len(c) % 2 == 0) for c in completions], np.float32), {}


def counted(shard_batch):
  def wrapper(batch, mesh):
    WORK["mesh_rows"] += len(jax.tree.leaves(batch)[0])  # a dict or an UpdateBatch
    return shard_batch(batch, mesh)

  return wrapper


def write_work(argv):
  workdir = pathlib.Path(argv[argv.index("--workdir") + 1])
  ids = [a.split("=", 1)[1] for a in argv if a.startswith("--process_id=")]
  if workdir.is_dir():
    with (workdir / f"work.{ids[0] if ids else 0}.jsonl").open("a") as f:
      f.write(json.dumps(WORK) + "\n")


if __name__ == "__main__":
  data.CountdownTask.rewards = length_parity_rewards
  shard_lib.shard_batch = counted(shard_lib.shard_batch)
  atexit.register(write_work, sys.argv[1:])
  from grpo_jax.runs import launcher

  sys.exit(launcher.main(sys.argv[1:]))
