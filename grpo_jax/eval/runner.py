"""Held-out evaluation: n samples per problem, graded, summarised as pass@k with CIs (METHODS §6).

ONE loop for every rollout kind (``grpo_jax.rollout.registry.ROLLOUTS``): problems are processed
in fixed-size chunks (the last one padded and trimmed) so every chunk hits the same compiled
sampler; the kind supplies the "sample and grade a chunk" step (``eval_sample``: one-stage, or
two-stage with fresh previews for ``eval.with_strategy``). Besides the summary,
``eval/<benchmark>_step<k>_problems.jsonl`` holds one line per problem (extracted answers,
correctness, a few completions).
"""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
from tqdm.auto import tqdm

from grpo_jax.eval import benchmarks as bench_lib
from grpo_jax.eval import passk
from grpo_jax.rundir import write
from grpo_jax.sampling.policy import Policy, SampleSettings
from grpo_jax.sharding import distributed


@dataclasses.dataclass(frozen=True)
class EvalLoop:
  """n = ``num_samples`` samples per problem from ``rollout.eval_sample``, ``chunk_problems``
  problems per sampler call; pass@k for the ``ks`` that are <= n."""

  rollout: object  # a rollout kind (``grpo_jax.rollout.registry.ROLLOUTS``)
  num_samples: int
  chunk_problems: int
  ks: tuple[int, ...] = (1,)
  progress: bool = True  # a bar per call; False on processes other than 0 (train.console)

  @classmethod
  def from_config(cls, rollout, eval_cfg, chunk_problems: int, progress: bool = True):
    return cls(rollout, eval_cfg.num_samples, chunk_problems, eval_cfg.ks, progress)

  def sample_and_grade(self, policy: Policy, problems, rng, desc: str = "eval") -> dict:
    """Per-problem arrays ``correct_PxN``, ``lengths_PxN``, ``truncated_PxN`` and the texts
    (``completions``, P·N). Chunk i samples with ``fold_in(rng, i)``.

    Multi-host: each process samples and grades the problems of each chunk whose rows its
    devices hold (``distributed.problem_share``), so the sampler sees the one-process chunk;
    the graded rows are gathered, and every process returns the same arrays."""
    n, size = self.num_samples, self.chunk_problems
    correct, lengths, truncated, texts = [], [], [], []
    starts = range(0, len(problems), size)
    bar = tqdm(starts, disable=not self.progress, desc=desc, leave=False)
    p0, p1 = distributed.problem_share(policy.mesh, size, n)
    for i, start in enumerate(bar):
      chunk = list(problems[start : start + size])
      real = len(chunk)
      chunk += [chunk[-1]] * (size - real)  # one compiled shape for every chunk
      batch = self.rollout.eval_sample(policy, chunk[p0:p1], n, jax.random.fold_in(rng, i))
      keys = ("rewards_N", "lengths_N", "truncated_N")
      rows_N = distributed.gather_rows({k: getattr(batch, k) for k in keys})
      rows = real * n
      correct.append(rows_N["rewards_N"][:rows].reshape(real, n) > 0.5)
      lengths.append(rows_N["lengths_N"][:rows].reshape(real, n))
      truncated.append(rows_N["truncated_N"][:rows].reshape(real, n))
      texts.extend(distributed.gather_objects(batch.completions_N)[:rows])
    return {
      "correct_PxN": np.concatenate(correct),
      "lengths_PxN": np.concatenate(lengths),
      "truncated_PxN": np.concatenate(truncated),
      "completions": texts,
    }

  def evaluate(self, policy: Policy, problems, rng, desc: str = "eval") -> dict:
    """pass@k (unbiased estimator), maj@k when the rollout kind votes, lengths, truncation,
    per-problem records, by-level pass@k when the problems have levels, and the sampling
    settings (``policy.settings``)."""
    task = self.rollout.task
    out = self.sample_and_grade(policy, problems, rng, desc)
    ks = tuple(k for k in self.ks if k <= self.num_samples)
    answers_PxN = np.array([task.answer_of(c) for c in out["completions"]], dtype=object)
    answers_PxN = answers_PxN.reshape(out["correct_PxN"].shape)
    summary = passk.summarize(
      out["correct_PxN"],
      ks,
      answers_PxN=answers_PxN if self.rollout.majority_vote else None,
      lengths_PxN=out["lengths_PxN"],
      truncated_PxN=out["truncated_PxN"],
    )
    summary["per_problem"] = per_problem(task, problems, out, answers_PxN)
    levels = bench_lib.levels_of(problems)
    if levels is not None:
      summary["by_level"] = bench_lib.by_level(out["correct_PxN"], levels, ks)
    s = policy.settings
    summary["sampling"] = {
      "temperature": s.temperature,
      "top_p": s.top_p,
      "n": self.num_samples,
      "max_new_tokens": s.max_new_tokens,
      **self.rollout.eval_sampling_info(),
    }
    return summary

  def evaluate_benchmarks(self, policy: Policy, benchmarks: dict, rng, workdir=None, step=0):
    """Evaluates ``{result name: problems}``; with a ``workdir`` (multi-host: process 0's)
    writes ``eval/<name>_step<step>.json`` (+ ``_problems.jsonl``) and refreshes
    ``eval/summary.md``. Returns ``{result name: summary}``."""
    results = {}
    for name, problems in benchmarks.items():
      result = self.evaluate(policy, problems, rng, desc=f"eval {name}")
      records = result.pop("per_problem")
      if workdir is not None:
        bench_lib.write_result(workdir, name, step, result)
        write.eval_problems(workdir, name, step, records)
      results[name] = result
    return results


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


def eval_policy(
  graphdef, params, mesh, eval_cfg, max_new_tokens: int, decode_slots: int = 0
) -> Policy:
  """The policy with evaluation's sample settings (no top-k); ``decode_slots``: the run's
  continuous batching (``sampling.decode_slots``)."""
  settings = SampleSettings(max_new_tokens, eval_cfg.temperature, 0, eval_cfg.top_p, decode_slots)
  return Policy(graphdef, params, mesh, settings)


def benchmark_sets(task, eval_cfg, with_strategy: bool) -> dict:
  """``{result name: problems}``: every benchmark of the task, or with ``with_strategy`` the
  first one as ``<name>_with_strategy`` (two-stage evaluation)."""
  sets = task.benchmarks(eval_cfg.num_problems)
  if with_strategy:
    first = next(iter(sets))
    sets = {f"{first}_with_strategy": task.eval_problems(eval_cfg.num_problems)}
  return {bench_lib.result_name(name, eval_cfg): problems for name, problems in sets.items()}


__all__ = ["EvalLoop", "benchmark_sets", "eval_policy", "per_problem"]
