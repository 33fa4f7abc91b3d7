"""One full RL step of grpo_jax (sample → grade → update) against TRL's ``GRPOTrainer``.

Same checkpoint (``bench_common``), same work: 8 prompts of 32 random tokens × 8 completions, 64 new
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
(``bench_decode_bound.rl_step_bound``), and the best ratio to TRL it allows.

``--peer tunix`` (``pip install -e .[tunix]``) compares with Google Tunix's ``GRPOLearner``
instead, on a Llama-architecture ``--model``, as shipped and with two of its bugs patched (RoPE
θ, pad-derived masks), each β of ``--kl_coefs`` in turn; ``peer_tunix`` runs it and its
docstring names what differs in the work (printed with the results too). It reports each side's
rollout, update and step, best and median over the steps after the first, the ratios (best over
best, and the median of each Tunix step over our next one) and a parity check: the largest
|logit| difference between Tunix's model and ours on the same tokens.

  python experiments/bench_step.py                    # tiny + small, ours + TRL twice, ~8 min
  python experiments/bench_step.py --sizes tiny --cpu_devices 2 --bound
  python experiments/bench_step.py --model real --peer tunix --kl_coefs 0,0.04
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import bench_common as bc
import bench_decode_bound as bound_lib
import jax
import numpy as np
import peer_tunix

from grpo_jax import config as config_lib
from grpo_jax import models
from grpo_jax import sharding as shard_lib
from grpo_jax.rewards.graded import Graded
from grpo_jax.rollout.one_stage import OneStageRollout, Policy, SampleSettings
from grpo_jax.train.checkpoint import Checkpointer
from grpo_jax.train.microbatch import num_parts, row_blocks
from grpo_jax.train.optimizer import make_optimizer
from grpo_jax.train.state import init_state
from grpo_jax.train.update import make_update_step, prompt_share


def reward_of(text: str) -> float:
  """Share of completion words that end in an even digit ("t12" of the toy vocabulary, "48" of
  the real model's text): cheap, deterministic, varies per row."""
  words = text.split()
  return sum(w[-1] in "02468" for w in words) / max(len(words), 1)


def prompts_of(name: str, n: int, P: int, seed: int = 0) -> dict:
  """``n`` prompts for checkpoint ``name``: ``prompts_BxP``, ``mask_BxP``, ``pad_id`` and
  ``texts`` (what TRL tokenizes back into the same ids). The toy checkpoints: P random tokens
  (seed ``seed``); any other model: the arithmetic task's chat prompts (``seed`` picks which
  ``n``), left-padded to its prompt slots."""
  if name in ("tiny", "small"):
    prompts_BxP = bc.random_prompts(n, P, bc.SIZES[name]["vocab"], seed)
    texts = [" ".join(f"t{i}" for i in p) for p in prompts_BxP]
    return dict(prompts_BxP=prompts_BxP, mask_BxP=np.ones_like(prompts_BxP), pad_id=bc.PAD_ID,
                texts=texts)  # fmt: skip
  return bc.chat_prompts(name, n, start=seed * n)


class BenchTask:
  """The task interface ``OneStageRollout`` needs: fixed prompts (``prompts_of``), HF-tokenizer
  decoding, the reward above. ``eos_id = -1``: no sampled token ends a row (no early stop)."""

  votes = False  # no answers to vote on

  def __init__(self, tokenizer, prompts: dict):
    self.tokenizer, self.prompts_BxP, self.mask_BxP = (
      tokenizer,
      prompts["prompts_BxP"],
      prompts["mask_BxP"],
    )
    self.pad_id, self.eos_id, self.prompt_len = prompts["pad_id"], -1, self.prompts_BxP.shape[1]
    self.stop_ids = (self.eos_id,)
    self.load_metrics = {}  # nothing to report

  def encode_prompts(self, problems):
    rows = np.asarray(problems)
    return self.prompts_BxP[rows], self.mask_BxP[rows]

  def decode(self, tokens_NxT, mask_NxT):
    return self.tokenizer.batch_decode(
      np.where(mask_NxT > 0, tokens_NxT, self.pad_id), skip_special_tokens=True
    )

  def rewards(self, problems, completions) -> Graded:
    return Graded(np.array([reward_of(c) for c in completions], np.float32), {})


def bench_config(B: int, G: int, T: int, micro: int = 0, kl_coef: float = 0.0):
  cfg = config_lib.base_config()
  cfg.loss.kl_coef = kl_coef  # β of the KL penalty to the initial policy (TRL's ``beta``)
  cfg.sampling.prompts_per_step, cfg.sampling.group_size, cfg.sampling.max_new_tokens = B, G, T
  cfg.loss.micro_batch_size = micro
  cfg.loss.share_prompt = True
  cfg.optimizer.warmup_steps = 0
  cfg.optimizer.learning_rate = 1e-6
  return cfg


def rows_per_prompt(cfg, N: int) -> int:
  """Rows per prompt pass of the update of N rows under ``cfg`` (1 = every row its own)."""
  k = num_parts(N, int(cfg.loss.micro_batch_size), "micro_batch_size")
  return prompt_share(cfg, N, k, row_blocks(N, k, jax.device_count()))


def update_flops(name: str, N: int, P: int, T: int, share: int = 1) -> float:
  """3 × forward of the work done: the prompt once per ``share`` rows (its causal pairs too),
  every row's completion over its whole context, the completion positions unembedded."""
  f = bc.flops_of(name)
  L = P + T
  prompt_pairs = bc.causal_pairs(0, P)
  completion_pairs = bc.causal_pairs(P, L) - prompt_pairs
  pairs = N / share * prompt_pairs + N * completion_pairs
  return 3 * f.forward(N / share * P + N * T, N * T, pairs)


class OursSteps:
  """Our RL step on one model, set up once (checkpoint, optimizer state, compiled update).
  Each call runs and times one step, rollout + update, then its breakdown pieces apart (not
  part of the step): grading (decode + rewards on the host; sampling = rollout − grading), one
  log-prob forward pass and a checkpoint save. ``summary`` takes the best of steps 2 onward
  (step 1 compiles); ``close`` ends the checkpointer."""

  def __init__(
    self, name: str, B: int, G: int, P: int, T: int, counter, micro: int, kl_coef: float = 0.0
  ):
    self.hf = hf = models.load_hf(bc.model_dir(name), dtype="float32")
    prompts = prompts_of(name, B, P)
    P = prompts["prompts_BxP"].shape[1]  # the chat prompts' slots
    self.name, self.B, self.G, self.P, self.T, self.counter = name, B, G, P, T, counter
    self.cfg = cfg = bench_config(B, G, T, micro, kl_coef)
    self.mesh = mesh = bc.mesh()
    optimizer = make_optimizer(cfg.optimizer)
    state = init_state(hf.params, optimizer, cfg)
    shardings = jax.tree.map(lambda _: shard_lib.replicated(mesh), state)
    self.state = jax.device_put(state, shardings)
    self.update = make_update_step(hf.graphdef, optimizer, cfg, mesh, shardings, prompt_len=P)
    self.logps_fn = jax.jit(lambda p, t, m: models.token_logps(hf.graphdef, p, t, m))
    self.task = BenchTask(hf.tokenizer, prompts)
    self.settings = SampleSettings(max_new_tokens=T)
    self.rollout = OneStageRollout(cfg, self.task)
    self.ckpt_dir = tempfile.TemporaryDirectory(prefix="bench_ckpt_")
    self.ckpt = Checkpointer(self.ckpt_dir.name, every=1, keep=1)
    self.per_step = []

  def __call__(self) -> dict:
    step, B, G, T, task = len(self.per_step), self.B, self.G, self.T, self.task
    before = self.counter.count
    rng = jax.random.fold_in(jax.random.key(0), step)
    t0 = time.perf_counter()
    policy = Policy(self.hf.graphdef, self.state["params"], self.mesh, self.settings)
    batch = self.rollout(policy, list(range(B)), rng).device_batch()
    t_roll = time.perf_counter() - t0
    t_up = time.perf_counter()
    self.state, metrics = self.update(self.state, batch)
    jax.block_until_ready(metrics)
    self.kl = float(np.asarray(metrics.get("loss/kl", np.nan)).mean())
    t_up = time.perf_counter() - t_up
    total = time.perf_counter() - t0
    assert batch.completion_mask_NxT.sum() == B * G * T  # no early stop
    compiles = self.counter.count - before
    t_rew = time.perf_counter()
    T_cols = batch.completion_mask_NxT.shape[1]
    texts = task.decode(batch.tokens_NxL[:, -T_cols:], batch.completion_mask_NxT)
    task.rewards(list(range(len(texts))), texts)
    t_rew = time.perf_counter() - t_rew
    tokens_NxL, mask_NxL = batch.tokens_NxL, batch.input_mask_NxL
    t_lp = time.perf_counter()
    self.logps_fn(self.state["params"], tokens_NxL, mask_NxL).block_until_ready()
    t_lp = time.perf_counter() - t_lp
    t_ck = time.perf_counter()
    self.ckpt.save(step, self.state)
    self.ckpt.wait()
    t_ck = time.perf_counter() - t_ck
    self.per_step.append(
      {
        "step": step + 1,
        "total_s": total,
        "rollout_s": t_roll,
        "sampling_s": max(t_roll - t_rew, 0.0),
        "rewards_s": t_rew,
        "logprobs_s": t_lp,
        "update_s": t_up,
        "checkpoint_s": t_ck,
        "compiles": compiles,
      }
    )
    print(json.dumps({"model": self.name, "ours": self.per_step[-1]}), flush=True)
    return self.per_step[-1]

  def close(self):
    self.ckpt.close()
    self.ckpt_dir.cleanup()

  def summary(self, ceiling: float) -> dict:
    warm = self.per_step[1:] or self.per_step
    best = {k: min(s[k] for s in warm) for k in warm[0] if k.endswith("_s")}
    N = self.B * self.G
    rows_share = rows_per_prompt(self.cfg, N)
    flops = update_flops(self.name, N, self.P, self.T, rows_share)
    return {
      "model": os.path.basename(self.name.rstrip("/")),
      "P": self.P,
      "T": self.T,
      "kl_coef": float(self.cfg.loss.kl_coef),
      "kl_last": self.kl,  # the last update's KL to the reference (0 at β = 0 or unused)
      "step_s": best["total_s"],
      **{k: v for k, v in best.items() if k != "total_s"},
      "compiles_by_step": [s["compiles"] for s in self.per_step],
      "rows_per_prompt": rows_share,
      "update_mfu_pct": 100 * flops / best["update_s"] / 1e9 / ceiling,
      "step_flops_pct": 100 * (flops / 3 * 4) / best["total_s"] / 1e9 / ceiling,
    }


def paired_ratios(trl_runs: list[dict]) -> list[float]:
  """TRL's step time / ours of the step run right after it, for every TRL step but each run's
  first (torch warms up on it, as ours compiles on its own first step)."""
  return [t / o for r in trl_runs for t, o in list(zip(r["trl_steps"], r["ours_after"]))[1:]]


def trl(
  name: str,
  B: int,
  G: int,
  P: int,
  T: int,
  steps: int,
  micro: int = 0,
  between=None,
  kl_coef: float = 0.0,
) -> dict:
  """TRL ``GRPOTrainer`` on the same checkpoint and work; returns per-step times. ``micro``
  rows per backward pass (0 = all B·G): gradient accumulation over B·G / micro passes, one
  generation of all B·G completions per step, as ours. ``between``: an ``OursSteps``, one of
  whose steps runs after each TRL step (outside TRL's timed interval), so that both sides'
  steps alternate through the same minutes of this shared machine; their totals are returned
  as ``ours_after``. ``kl_coef``: TRL's ``beta``."""
  import datasets
  import transformers
  from trl import GRPOConfig, GRPOTrainer

  path = bc.model_dir(name)
  tok = transformers.AutoTokenizer.from_pretrained(path)
  # Plain-text prompts (the chat template already applied to the real model's): TRL tokenizes
  # them into the same ids as ours.
  ds = datasets.Dataset.from_dict({"prompt": prompts_of(name, B * steps, P, seed=1)["texts"]})

  def reward(completions, **kwargs):
    return [reward_of(c) for c in completions]

  times, ours_after = [], []

  class Timer(transformers.TrainerCallback):
    def on_step_begin(self, args, state, control, **kw):
      self.t0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
      times.append(time.perf_counter() - self.t0)
      if between is not None:
        ours_after.append(between()["total_s"])

  rows_per_pass = micro or B * G
  out_dir = tempfile.TemporaryDirectory(prefix="bench_trl_")  # save_strategy "no": nothing kept
  args = GRPOConfig(
    output_dir=out_dir.name,
    per_device_train_batch_size=rows_per_pass,
    gradient_accumulation_steps=B * G // rows_per_pass,
    num_generations=G,
    beta=kl_coef,
    max_completion_length=T,
    generation_kwargs={"min_new_tokens": T},  # no early stop, as ours
    temperature=1.0,
    top_k=0,
    top_p=1.0,
    learning_rate=1e-6,
    max_steps=steps,
    bf16=False,
    fp16=False,
    use_cpu=True,
    report_to="none",
    save_strategy="no",
    logging_steps=1,
    shuffle_dataset=False,
    dataloader_num_workers=0,
  )
  trainer = GRPOTrainer(
    model=path,
    reward_funcs=reward,
    args=args,
    train_dataset=ds,
    processing_class=tok,
    callbacks=[Timer()],
  )
  with out_dir:
    trainer.train()
  print(json.dumps({"model": name, "trl_micro": micro, "trl_step_s": times}), flush=True)
  assert len(times) == steps, (len(times), steps)
  # No compilation on the torch side: every step counts, the least disturbed one wins.
  out = {"model": name, "trl_micro": micro, "trl_step_s": min(times), "trl_steps": times}
  return {**out, "ours_after": ours_after} if between is not None else out


PEER_VARIANTS = ("shipped", "patched")
TUNIX_KEYS = ("step_s", "rollout_s", "update_s", "sampling_s", "ref_logps_s")


def median(values) -> float:
  return float(np.median(list(values)))


def tunix_row(name: str, ours: OursSteps, micro: int, steps: int, ceiling: float) -> dict:
  """``peer_tunix.run`` as shipped, then patched, each step followed by one of ``ours`` (its
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
    help="the other side: TRL's GRPOTrainer or Tunix's GRPOLearner (peer_tunix; needs --model)",
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
    help="also measure the step's bound (bench_decode_bound.rl_step_bound) in the same run",
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
    print("\nWhat differs in the work (peer_tunix):", *peer_tunix.differences(), sep="\n- ")
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
