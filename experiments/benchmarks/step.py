"""One full RL step of grpo_jax (sample → grade → update) against TRL's ``GRPOTrainer``.

Same checkpoint (``common``), same work: 8 prompts of 32 random tokens × 8 completions, 64 new
tokens each (no early stop), a cheap host-side reward, the GRPO surrogate with μ = 1, no KL (TRL's
default β = 0), AdamW, fp32 everywhere. Ours goes through the library's own path
(``rollout.one_stage.OneStageRollout`` and ``train.update.make_update_step``), runs each group's
prompt once (the sampler's prefill and ``loss.share_prompt``) and accumulates the gradient over
micro-batches of ``--micro_batch_size`` rows (default 8, whose activations stay in the CPU's
caches); TRL runs each of ``--trl_micro_batch_sizes`` (gradient accumulation or not) and the ratio
is taken against its faster setting. The gradient is the whole batch's either way.

Ours reports the breakdown: sampling, rewards (decode + grade on the host), log-probs (one
extra forward pass — part of a step only with μ > 1 or KL; timed for reference), update,
checkpoint (an orbax save, not part of the step rate: TRL saves every 500 steps by default)
and the XLA compilations of each step (steps 2 onwards must be 0). TRL (``pip install -e
.[bench]``) runs ``--trl_steps`` steps, timed between the trainer's step callbacks. The two
sides alternate: after our first, compiling step, one of ours runs in TRL's step-end callback
after each TRL step (outside TRL's timed interval), so both sample the same minutes of a
machine whose speed drifts; the run reports best over best and the median of each pair's
ratio (TRL's step / our next one; each TRL run's first step, torch's warm-up, left out).
MFU = the update's model FLOPs (3 × forward) / time / the matmul ceiling measured first in
the same run. ``--bound`` adds the step's bound on this machine, measured in the same run
(``decode_bound.rl_step_bound``), and the best ratio to TRL it allows.

``--peer tunix`` (``pip install -e .[tunix]``) compares with Google Tunix's ``GRPOLearner``
instead, on a Llama-architecture ``--model``, as shipped and with two of its bugs patched (RoPE
θ, pad-derived masks), each β of ``--kl_coefs`` in turn; ``peers/tunix.py`` runs it and its
docstring names what differs in the work (printed with the results too). It reports each side's
rollout, update and step, best and median over the steps after the first, the ratios (best over
best, and the median of each Tunix step over our next one) and a parity check: the largest
|logit| difference between Tunix's model and ours on the same tokens.

  python -m experiments.benchmarks.step                    # tiny + small, ours + TRL twice, ~8 min
  python -m experiments.benchmarks.step --sizes tiny --cpu_devices 2 --bound
  python -m experiments.benchmarks.step --model real --peer tunix --kl_coefs 0,0.04
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from experiments.benchmarks import common as bc
from experiments.benchmarks import decode_bound as bound_lib
from experiments.benchmarks.peers import tunix as peer_tunix
from experiments.benchmarks.peers.trl import paired_ratios, trl
from experiments.benchmarks.workload import OursSteps

PEER_VARIANTS = ("shipped", "patched")
TUNIX_KEYS = ("step_s", "rollout_s", "update_s", "sampling_s", "ref_logps_s")


def median(values) -> float:
  return float(np.median(list(values)))


def tunix_row(name: str, ours: OursSteps, micro: int, steps: int, ceiling: float) -> dict:
  """``peers.tunix.run`` as shipped, then patched, each step followed by one of ``ours`` (its
  first, compiling step already run); our summary with each variant's best and median of its
  steps after the first, its ratios to ours and its parity check."""
  work = dict(B=ours.B, G=ours.G, P=ours.P, T=ours.T, kl_coef=float(ours.cfg.loss.kl_coef))
  runs = [peer_tunix.run(bc.model_dir(name), v, work, micro, steps, ours) for v in PEER_VARIANTS]
  ours.close()
  row = ours.summary(ceiling)
  warm = ours.per_step[1:]
  for k in ("total_s", "rollout_s", "update_s"):
    row[k.replace("total", "step").replace("_s", "_median_s")] = median(s[k] for s in warm)
  row.update(tunix_micro_rows=micro * ours.G, differences=peer_tunix.differences(), tunix_runs=runs)
  for run in runs:
    v, tunix = run["variant"], run["steps"][1:]
    for k in TUNIX_KEYS:
      row[f"tunix_{v}_{k}"] = min(s.get(k, 0.0) for s in tunix)
      row[f"tunix_{v}_{k.replace('_s', '_median_s')}"] = median(s.get(k, 0.0) for s in tunix)
    pairs = [t["step_s"] / o for t, o in zip(run["steps"], run["ours_after"])][1:]
    row[f"ratio_vs_tunix_{v}"] = row[f"tunix_{v}_step_s"] / row["step_s"]
    row[f"ratio_paired_median_vs_tunix_{v}"] = median(pairs)
    row[f"tunix_{v}_logits_max_abs_diff"] = run["logits_max_abs_diff"]
    for k in ("masked_prompt_tokens", "masked_completion_tokens", "prompt_ids_match"):
      row[f"tunix_{v}_{k}"] = run["steps"][-1][k]
  return row


def tunix_table(rows: list[dict]) -> str:
  """One line per side and β: ours, then Tunix as shipped and patched."""
  lines = []
  for r in rows:
    base = {"model": r["model"], "kl_coef": r["kl_coef"]}
    lines.append({**base, "side": "grpo_jax", "step_s": r["step_s"],
                  "step_median_s": r["step_median_s"], "rollout_s": r["rollout_s"],
                  "update_s": r["update_s"]})  # fmt: skip
    for v in PEER_VARIANTS:
      t = f"tunix_{v}_"
      lines.append({**base, "side": f"tunix {v}",
                    **{k: r[t + k] for k in ("step_s", "step_median_s", "rollout_s", "update_s")},
                    "ratio": r[f"ratio_vs_tunix_{v}"],
                    "ratio_paired_median": r[f"ratio_paired_median_vs_tunix_{v}"],
                    "logits_max_abs_diff": r[t + "logits_max_abs_diff"],
                    "masked_prompt_tokens": r[t + "masked_prompt_tokens"],
                    "masked_completion_tokens": r[t + "masked_completion_tokens"]})  # fmt: skip
  cols = ["model", "kl_coef", "side", "step_s", "step_median_s", "rollout_s", "update_s", "ratio"]
  cols += ["ratio_paired_median", "logits_max_abs_diff", "masked_prompt_tokens"]
  return bc.fmt_table(lines, cols + ["masked_completion_tokens"])


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--sizes", default="tiny,small", help="toy checkpoints (ignored with --model)")
  ap.add_argument(
    "--model", default="", help="real | a HF directory: its tokenizer and the chat prompts"
  )
  ap.add_argument(
    "--kl_coef", type=float, default=0.0, help="β: our loss.kl_coef and TRL's beta (0 = no KL)"
  )
  ap.add_argument("--kl_coefs", default="", help="several β, run in turn (overrides --kl_coef)")
  ap.add_argument(
    "--peer",
    choices=("trl", "tunix"),
    default="trl",
    help="the other side: TRL's GRPOTrainer or Tunix's GRPOLearner (peers/tunix.py; needs --model)",
  )
  ap.add_argument(
    "--tunix_micro_batch",
    type=int,
    default=1,
    help="Tunix's train_micro_batch_size, in prompts of --group rows (1 = 8 rows, as ours)",
  )
  ap.add_argument(
    "--tunix_steps", type=int, default=3, help="Tunix steps per variant and β (the first compiles)"
  )
  ap.add_argument("--prompts", type=int, default=8)
  ap.add_argument("--group", type=int, default=8)
  ap.add_argument("--prompt_len", type=int, default=32)
  ap.add_argument("--new_tokens", type=int, default=64)
  ap.add_argument(
    "--steps", type=int, default=3, help="our steps (at least 1 + each TRL step, interleaved)"
  )
  ap.add_argument("--trl_steps", type=int, default=3, help="0 skips TRL")
  ap.add_argument(
    "--micro_batch_size",
    type=int,
    default=8,
    help="rows per gradient-accumulation chunk of our update (loss.micro_batch_size); 0 = all",
  )
  ap.add_argument(
    "--trl_micro_batch_sizes",
    default="0,8",
    help="TRL's per-device train batch sizes to run (0 = all rows, no accumulation); the "
    "ratio is taken against the fastest",
  )
  ap.add_argument(
    "--bound",
    action="store_true",
    help="also measure the step's bound (decode_bound.rl_step_bound) in the same run",
  )
  ap.add_argument("--torch_threads", type=int, default=1, help="0 = torch's default")
  ap.add_argument("--cpu_devices", type=int, default=0, help="0 = jax's default (one)")
  ap.add_argument("--json", default="")
  args = ap.parse_args()

  bc.set_cpu_devices(args.cpu_devices)
  counter = bc.CompileCounter()
  info = bc.machine()
  info["torch_threads"] = bc.set_torch_threads(args.torch_threads)
  info["ceiling"] = bc.matmul_ceiling()
  if args.bound:
    info["read_gb_s"] = bound_lib.read_bandwidth_gb_s()
  print(json.dumps(info), flush=True)
  ceiling = info["ceiling"]["gflops"]
  B, G, P, T = args.prompts, args.group, args.prompt_len, args.new_tokens
  micro, trl_micros = args.micro_batch_size, args.trl_micro_batch_sizes.split(",")
  rows = []
  names = [args.model] if args.model else filter(None, args.sizes.split(","))
  kl_coefs = [float(k) for k in args.kl_coefs.split(",")] if args.kl_coefs else [args.kl_coef]
  assert args.peer != "tunix" or args.model, "--peer tunix runs on a Llama-architecture --model"
  for name, kl_coef in [(bc.register(n), k) for n in names for k in kl_coefs]:
    steps = OursSteps(name, B, G, P, T, counter, micro, kl_coef)
    steps()  # compiles
    if args.peer == "tunix":
      rows.append(tunix_row(name, steps, args.tunix_micro_batch, args.tunix_steps, ceiling))
      print(json.dumps({k: v for k, v in rows[-1].items() if k != "tunix_runs"}), flush=True)
      continue
    row = {}
    if args.bound:  # the same step at this machine's bound, measured next (before torch runs)
      row = bound_lib.rl_step_bound(name, B * G, steps.P, T, micro, info["read_gb_s"], ceiling, G)
    runs = None
    if args.trl_steps:
      try:
        runs = [trl(name, B, G, P, T, args.trl_steps, int(m), steps, kl_coef) for m in trl_micros]
      except ImportError as e:
        print(f"TRL comparison skipped ({e}); install the bench extra: pip install -e .[bench]")
    for _ in range(args.steps - len(steps.per_step)):  # without TRL (or short of --steps)
      steps()
    steps.close()
    row = {**row, **steps.summary(ceiling)}
    if runs:
      # Judged against TRL's faster setting; every setting's steps are kept.
      fastest = min(runs, key=lambda r: r["trl_step_s"])
      row.update(fastest, trl_runs=runs, ratio_vs_trl=fastest["trl_step_s"] / row["step_s"])
      pairs = paired_ratios(runs)
      if pairs:
        row.update(ratio_pairs=pairs, ratio_paired_median=float(np.median(pairs)))
    if args.bound:
      row["step_pct_of_bound"] = 100 * row["step_bound_s"] / row["step_s"]
      if runs:
        row["ratio_bound_vs_trl"] = row["trl_step_s"] / row["step_bound_s"]
    rows.append(row)
    print(json.dumps(row), flush=True)
  info["ceiling_end"] = bc.matmul_ceiling(sizes=(1024,))
  print(f"\nceiling {ceiling:.1f} GFLOP/s (end of run: {info['ceiling_end']['gflops']:.1f})")
  if args.peer == "tunix":
    print(tunix_table(rows))
    print("\nWhat differs in the work (peers/tunix.py):", *peer_tunix.differences(), sep="\n- ")
    if args.json:
      with open(args.json, "w") as f:
        json.dump({"machine": info, "step": rows}, f, indent=2, default=str)
    return
  cols = [
    "model",
    "step_s",
    "trl_step_s",
    "trl_micro",
    "ratio_vs_trl",
    "ratio_paired_median",
    "sampling_s",
    "rewards_s",
    "logprobs_s",
    "update_s",
    "checkpoint_s",
    "compiles_by_step",
    "update_mfu_pct",
  ]
  print(bc.fmt_table(rows, cols))
  if args.bound:
    print()
    bound_cols = ["model", "devices", "sampling_bound_s", "update_gemms_s", "step_bound_s"]
    bound_cols += ["step_s", "step_pct_of_bound", "trl_step_s", "ratio_bound_vs_trl"]
    print(bc.fmt_table(rows, bound_cols))
  if args.json:
    with open(args.json, "w") as f:
      json.dump({"machine": info, "step": rows}, f, indent=2, default=str)


if __name__ == "__main__":
  main()
