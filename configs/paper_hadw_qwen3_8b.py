"""HA-DW (arXiv 2601.08521) on Qwen3-8B-Base with MATH: GRPO / GSPO / DAPO ± HA-DW (Table 1).

  python experiments/launch.py --config configs/paper_hadw_qwen3_8b.py:algo=dapo,hadw=1 \
      --config.model.hf_path=/ckpt/Qwen3-8B-Base --workdir /shared/runs/hadw8b_dapo
  python experiments/launch.py --config configs/paper_hadw_qwen3_8b.py --sweep \
      --workdir /shared/runs/hadw8b --config.model.hf_path=/ckpt/Qwen3-8B-Base
  python experiments/launch.py --config configs/paper_hadw_qwen3_8b.py --pod \
      --tpu_name my-v5p-128 --workdir /shared/runs/hadw8b
  python experiments/launch.py --config configs/paper_hadw_qwen3_8b.py --dry_run

Hardware: TPU v5p-128 (64 chips, 95 GiB HBM, 16 hosts), mesh data 2 × fsdp 8 × tensor 4 (the
paper: 8 A100s with verl). Every setting as ``paper_hadw_qwen3_4b.py`` (MATH, 256 × 8, 1024 / 4096
tokens, lr 1e-6, 3 epochs GRPO/GSPO, 9 DAPO, λ = 1.3 — λ for this model is NOT SPECIFIED in
the paper; 1.3 is its Qwen3-4B value); only the checkpoint differs.

Paper numbers to approach (Table 1, accuracy %: MATH500 / AIME25 / AMC23 / Minerva /
OlympiadBench / mean; no seeds or error bars):

  GRPO   78.8 / 20.4 / 64.2 / 38.2 / 46.4 / 49.6   + HA-DW 80.0 / 22.9 / 72.8 / 39.7 / 47.1 / 52.5
  GSPO   78.6 / 21.7 / 67.0 / 37.9 / 45.9 / 50.2   + HA-DW 80.2 / 22.1 / 66.5 / 41.9 / 47.6 / 51.7
  DAPO   79.2 / 20.4 / 67.5 / 39.3 / 47.2 / 50.7   + HA-DW 82.8 / 23.3 / 70.0 / 40.8 / 50.0 / 53.4

Arguments: as ``paper_hadw_qwen3_4b.py`` (``algo``, ``hadw``, ``lam``, ``anchor``, ``c``, ``G``,
``epochs``, ``ckpt``, ``eval``: avg16 at T = 1 for AIME25/AMC23, or greedy for the other three).
"""

import pathlib

from grpo_jax.config.files import load_module, parse_arg

_4B = load_module(str(pathlib.Path(__file__).with_name("paper_hadw_qwen3_4b.py")))
ARGS = _4B.ARGS  # the arguments of the file it extends
CKPT = "/checkpoints/Qwen3-8B-Base"  # a local copy of Qwen/Qwen3-8B-Base (placeholder)


def get_config(arg=None):
  args = {"ckpt": CKPT, **parse_arg(arg, ARGS)}
  cfg = _4B.get_config(",".join(f"{k}={v}" for k, v in args.items()))
  cfg.model.preset = "qwen3_8b_base"
  return cfg


def sweep(add):
  for algo in ("grpo", "gspo", "dapo"):
    for hadw in (0, 1):
      add(arg=f"algo={algo},hadw={hadw}")
