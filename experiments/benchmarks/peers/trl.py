"""TRL's ``GRPOTrainer`` (``pip install -e .[bench]``) on ``step.py``'s work: the same checkpoint,
prompts and reward (``workload``), timed between the trainer's step callbacks."""

from __future__ import annotations

import json
import tempfile
import time

from experiments.benchmarks import common as bc
from experiments.benchmarks.workload import prompts_of, reward_of


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
