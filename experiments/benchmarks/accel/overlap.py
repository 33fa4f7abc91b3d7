"""The ``overlap`` section of ``accelerator.py``: the RL loop on-policy against one-step
off-policy overlap (``rollout.off_policy_steps = 1``: the next batch is sampled in a host thread,
by the parameters before the update, while the update runs on the same device).

Both runs go through ``overlap.run`` (the loop, its step-time medians after the first two
steps) with ``configs/tiny_test.py``'s task and the decoder at a shape of ``MODELS`` (random
weights, bf16 compute over float32 masters, every layer rematerialised). The task's tokenizer
is character-level while the vocabulary is the model's: most sampled ids are no character and
decode to nothing, so every reward is 0, which leaves the sampling and the update as much work
as any other batch of those shapes. The run directories (with the final checkpoint of the
masters and the optimizer state) go under ``/dev/shm`` where it holds them.
"""

from __future__ import annotations

import dataclasses
import pathlib
import shutil
import tempfile

from experiments.benchmarks import overlap as bench_overlap
from experiments.benchmarks.accel.device import MODELS

TINY = str(pathlib.Path(__file__).resolve().parents[3] / "configs/tiny_test.py")
# The fields of the ``model`` config group that give a random init the shape of a MODELS entry
# (``ModelConfig.from_config`` reads exactly these; the Qwen3 shapes need no other).
SHAPE = (
  "vocab_size", "hidden_dim", "num_layers", "num_heads", "num_kv_heads", "head_dim", "mlp_dim",
  "rope_theta", "norm_eps", "tie_embeddings", "dtype", "param_dtype", "family",
)  # fmt: skip


def overlap_overrides(o: dict, vocab_chunk: int) -> list[str]:
  """Config overrides of ``configs/tiny_test.py`` for section settings ``o``: one-stage GRPO at
  B ``prompts`` × G ``group`` with up to ``new_tokens`` new tokens (random weights over the real
  vocabulary almost never draw the task's end token, so rows run to the end)."""
  m = MODELS[o["model"]]
  return [f"model.{f}={getattr(m, f)}" for f in SHAPE] + [
    "model.remat=full",
    f"model.logps_vocab_chunk={vocab_chunk}",
    f"sampling.prompts_per_step={o['prompts']}",
    f"sampling.group_size={o['group']}",
    f"sampling.max_new_tokens={o['new_tokens']}",
    "strategy.enabled=false",
    "advantage.baseline=group",
    "hadw.enabled=false",
    "loss.share_prompt=true",
    "loss.kl_coef=0.0",
    "optimizer.warmup_steps=0",
    "optimizer.learning_rate=1e-6",
    "logging.tensorboard=false",
  ]


def state_bytes(o: dict) -> int:
  """The final checkpoint: float32 masters and AdamW's two moments."""
  return 12 * MODELS[o["model"]].num_params


def workdir_root(o: dict) -> str | None:
  """``/dev/shm`` where it holds both runs' checkpoints twice over, else the default."""
  shm = pathlib.Path("/dev/shm")
  if shm.is_dir() and shutil.disk_usage(shm).free > 4 * state_bytes(o):
    return str(shm)
  return None


def check_shape(o: dict, overrides: list[str]) -> None:
  """Raises unless the loop's config builds exactly the decoder of ``MODELS[o["model"]]``."""
  from grpo_jax.config import files as config_file
  from grpo_jax.models.build import policy_config

  built = policy_config(config_file.load(TINY, overrides).model)
  want = dataclasses.replace(
    MODELS[o["model"]], remat="full", max_position_embeddings=built.max_position_embeddings
  )
  if built != want:
    raise ValueError(f"the loop's decoder {built} is not {o['model']}'s {want}")


def overlap_run(o: dict, vocab_chunk: int) -> list[dict]:
  """One row per mode (on-policy first) with the step-time medians; the overlap row also
  carries ``speedup``, on-policy step time over the overlap's."""
  overrides = overlap_overrides(o, vocab_chunk)
  check_shape(o, overrides)
  rows = []
  with tempfile.TemporaryDirectory(dir=workdir_root(o)) as tmp:
    for mode in (0, 1):
      times = bench_overlap.run(mode, o["steps"], TINY, overrides, f"{tmp}/off{mode}")
      rows.append({"model": o["model"], "off_policy_steps": mode, **times})
      shutil.rmtree(f"{tmp}/off{mode}", ignore_errors=True)
  rows[1]["speedup"] = rows[0]["time/step_s"] / rows[1]["time/step_s"]
  return rows
