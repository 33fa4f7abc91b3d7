"""Subgroup offsets on Olmo3-7B-Base with DAPO-Math-17K: anchor, α = ±0.5 and the shuffle.

  python experiments/launch.py --config configs/paper_offsets_olmo3_7b.py --sweep \
      --workdir /shared/runs/offsets_olmo --config.model.hf_path=/ckpt/Olmo-3-1025-7B
  python experiments/launch.py --config configs/paper_offsets_olmo3_7b.py --pod \
      --tpu_name my-v5p-256 --workdir /shared/runs/offsets_olmo
  python experiments/launch.py --config configs/paper_offsets_olmo3_7b.py --dry_run

Hardware: TPU v5p-256 (128 chips, 95 GiB HBM, 32 hosts), mesh data 4 × fsdp 8 × tensor 4: OLMo-3-7B
has 32 KV heads (no grouped-query sharing), 4× Qwen3-8B's KV cache per row, so the N = 2048
rows need twice the chips (~40 GiB of KV cache per chip; ``--dry_run``). Everything but model
and mesh is ``paper_offsets_qwen3_8b.py``'s setting (the paper's own values were NOT
available). OLMo-3 alternates three sliding-window (4096)
layers with one full layer, YaRN-scaled (grpo_jax.models presets).

What it should approach (qualitative): as on Qwen3-8B-Base, both offset directions give modest
pass@16 gains over the Strategy-GRPO anchor on AIME24/25/26 and HMMT25, α < 0 the stronger;
shuffled offsets fall below the anchor. The paper ran no coefficient sweep on this model.

Arguments: as ``paper_offsets_qwen3_8b.py`` (``alpha``, ``shuffle``, ``steps``, ``ckpt``).
"""

import pathlib

from grpo_jax.config.files import load_module, parse_arg

_QWEN = load_module(str(pathlib.Path(__file__).with_name("paper_offsets_qwen3_8b.py")))
ARGS = _QWEN.ARGS  # the arguments of the file it extends
CKPT = "/checkpoints/Olmo-3-1025-7B"  # a local copy of allenai/Olmo-3-1025-7B (placeholder)


def get_config(arg=None):
  args = {"ckpt": CKPT, **parse_arg(arg, ARGS)}
  cfg = _QWEN.get_config(",".join(f"{k}={v}" for k, v in args.items()))
  cfg.model.preset = "olmo3_7b_base"
  # TPU v5p-256: 128 chips, one row per data × fsdp device per micro-batch.
  cfg.mesh.data = 4
  cfg.mesh.fsdp = 8
  cfg.mesh.tensor = 4
  cfg.loss.micro_batch_size = cfg.mesh.data * cfg.mesh.fsdp
  return cfg


def sweep(add):
  for alpha, control in (
    (0.0, "none"),
    (-0.5, "none"),
    (0.5, "none"),
    (-0.5, "shuffle"),
    (0.5, "shuffle"),
  ):
    add(**{"advantage.offset_coef": alpha, "advantage.offset_control": control})
