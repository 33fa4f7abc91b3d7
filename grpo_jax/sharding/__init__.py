"""Device mesh, logical-axis rules and placement of parameters, state and batches.

``mesh``: the ``data × fsdp × tensor`` mesh, shardings of the train state from the rules, and
batch rows split over the batch axes; ``rules``: logical-axis rule presets (train | sample |
replicated) and the activation constraints the model applies.
"""

from grpo_jax.sharding import rules
from grpo_jax.sharding.mesh import (
  AXES,
  BATCH_AXES,
  abstract_mesh,
  activate,
  batch_sharding,
  batch_size_multiple,
  init_sharded,
  local_rows,
  make_mesh,
  mesh_shape,
  place,
  process_row_blocks,
  process_rows,
  replicate,
  replicated,
  reshard,
  rules_for,
  shard_batch,
  shard_bytes,
  split_axes,
  state_shardings,
  under_mesh,
)

__all__ = [
  "AXES",
  "BATCH_AXES",
  "abstract_mesh",
  "activate",
  "batch_sharding",
  "batch_size_multiple",
  "init_sharded",
  "local_rows",
  "make_mesh",
  "mesh_shape",
  "place",
  "process_row_blocks",
  "process_rows",
  "replicate",
  "replicated",
  "reshard",
  "rules",
  "rules_for",
  "shard_batch",
  "shard_bytes",
  "split_axes",
  "state_shardings",
  "under_mesh",
]
