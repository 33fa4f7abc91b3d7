"""Held-out evaluation: n samples per problem, graded, summarised as pass@k with CIs (METHODS §6).

Problems are processed in fixed-size chunks (the last one padded and trimmed) so every chunk hits
the same compiled sampler. Besides the summary, ``eval/<benchmark>_step<k>_problems.jsonl``
holds one line per problem (extracted answers, correctness, a few completions).
"""

from __future__ import annotations

import json

import jax
import numpy as np
from tqdm.auto import tqdm

from grpo_jax.eval import benchmarks as bench_lib
from grpo_jax.eval import passk
from grpo_jax.sampling.generate import SampleSettings, generate


def sample_and_grade(
  graphdef,
  params,
  task,
  problems,
  num_samples: int,
  rng,
  settings: SampleSettings,
  mesh,
  chunk_problems: int,
  progress: bool = True,
  desc: str = "eval",
):
  """Returns per-problem arrays ``correct_PxN``, ``lengths_PxN``, ``truncated_PxN`` and texts."""
  num = len(problems)
  correct, lengths, truncated, texts = [], [], [], []
  starts = range(0, num, chunk_problems)
  for i, start in enumerate(tqdm(starts, desc=desc, disable=not progress, leave=False)):
    chunk = list(problems[start : start + chunk_problems])
    real = len(chunk)
    chunk += [chunk[-1]] * (chunk_problems - real)
    prompts_BxP, mask_BxP = task.encode_prompts(chunk)
    gen = generate(
      graphdef,
      params,
      task,
      np.repeat(prompts_BxP, num_samples, axis=0),
      np.repeat(mask_BxP, num_samples, axis=0),
      jax.random.fold_in(rng, i),
      settings,
      mesh,
      num_samples,
    )
    rows = real * num_samples
    problems_N = [p for p in chunk[:real] for _ in range(num_samples)]
    rewards_N = np.asarray(task.rewards(problems_N, gen["completions"][:rows]))
    correct.append(rewards_N.reshape(real, num_samples) > 0.5)
    lengths.append(gen["mask_NxT"][:rows].sum(1).reshape(real, num_samples))
    truncated.append(gen["truncated_N"][:rows].reshape(real, num_samples))
    texts.extend(gen["completions"][:rows])
  return {
    "correct_PxN": np.concatenate(correct),
    "lengths_PxN": np.concatenate(lengths),
    "truncated_PxN": np.concatenate(truncated),
    "completions": texts,
  }


def per_problem(task, problems, out: dict, answers_PxN, num_texts: int = 2) -> list[dict]:
  """One record per problem: its prompt and gold, every sample's extracted answer and
  correctness, and the first ``num_texts`` completions."""
  n = out["correct_PxN"].shape[1]
  records = []
  for p, problem in enumerate(problems):
    gold = problem.get("answer") if isinstance(problem, dict) else getattr(problem, "target", None)
    records.append(
      {
        "prompt": task.prompt_text(problem),
        "gold": None if gold is None else str(gold),
        "answers": [None if a is None else str(a) for a in answers_PxN[p]],
        "correct": [bool(c) for c in out["correct_PxN"][p]],
        "completions": out["completions"][p * n : p * n + num_texts],
      }
    )
  return records


def evaluate(
  graphdef,
  params,
  task,
  problems,
  eval_cfg,
  max_new_tokens: int,
  rng,
  mesh,
  chunk_problems: int,
  progress: bool = True,
  desc: str = "eval",
) -> dict:
  """pass@k for ``eval_cfg.ks`` (unbiased estimator, n = ``eval_cfg.num_samples``) and friends."""
  settings = SampleSettings(max_new_tokens, eval_cfg.temperature, 0, eval_cfg.top_p)
  out = sample_and_grade(
    graphdef,
    params,
    task,
    problems,
    eval_cfg.num_samples,
    rng,
    settings,
    mesh,
    chunk_problems,
    progress,
    desc,
  )
  ks = tuple(k for k in eval_cfg.ks if k <= eval_cfg.num_samples)
  answers_PxN = np.array([task.answer_of(c) for c in out["completions"]], dtype=object)
  answers_PxN = answers_PxN.reshape(out["correct_PxN"].shape)
  summary = passk.summarize(
    out["correct_PxN"],
    ks,
    answers_PxN=answers_PxN,
    lengths_PxN=out["lengths_PxN"],
    truncated_PxN=out["truncated_PxN"],
  )
  summary["per_problem"] = per_problem(task, problems, out, answers_PxN)
  levels = bench_lib.levels_of(problems)
  if levels is not None:
    summary["by_level"] = bench_lib.by_level(out["correct_PxN"], levels, ks)
  summary["sampling"] = {
    "temperature": eval_cfg.temperature,
    "top_p": eval_cfg.top_p,
    "n": eval_cfg.num_samples,
    "max_new_tokens": max_new_tokens,
  }
  return summary


def evaluate_benchmarks(
  graphdef,
  params,
  task,
  eval_cfg,
  max_new_tokens: int,
  rng,
  mesh,
  chunk_problems: int,
  workdir,
  step: int,
  progress: bool = True,
  write: bool = True,
) -> dict:
  """Evaluates every benchmark of the task, writing ``eval/<benchmark>_step<step>.json`` and
  refreshing ``eval/summary.md``. Returns ``{benchmark: result}``."""
  results = {}
  for name, problems in task.benchmarks(eval_cfg.num_problems).items():
    result = evaluate(
      graphdef,
      params,
      task,
      problems,
      eval_cfg,
      max_new_tokens,
      rng,
      mesh,
      chunk_problems,
      progress,
      desc=f"eval {name}",
    )
    records = result.pop("per_problem")
    if write:  # multi-host: every process evaluates, process 0 writes
      path = bench_lib.write_result(workdir, bench_lib.result_name(name, eval_cfg), step, result)
      with path.with_name(path.stem + "_problems.jsonl").open("w") as f:
        f.writelines(json.dumps(r, sort_keys=True) + "\n" for r in records)
    results[name] = result
  return results
