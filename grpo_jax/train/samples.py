"""A few of each step's rollouts, readable: prompt, completion, extracted answer, reward, ids.

``logging.samples_per_step`` rows per step, spread evenly over the step's real rows (so they
come from different groups), go to ``samples.jsonl`` in the run directory and to TensorBoard
text (``MetricsWriter.write_samples``).
"""

from __future__ import annotations

import numpy as np

from grpo_jax.rundir import tables


def step_samples(batch, task, count: int) -> list[dict]:
  """Records of ``count`` real rows of a step's ``RolloutBatch`` (its ``problems_N`` and
  ``completions_N`` texts). Empty when ``count`` is 0 or the batch carries no texts."""
  if count <= 0 or not batch.problems_N:
    return []
  real_N = np.flatnonzero(batch.group_ids_N >= 0)
  picks = real_N[np.unique(np.linspace(0, len(real_N) - 1, min(count, len(real_N))).astype(int))]
  records = []
  for i in picks.tolist():
    completion, problem = batch.completions_N[i], batch.problems_N[i]
    records.append(
      {
        "problem_id": str(problem["id"]) if isinstance(problem, dict) and "id" in problem else None,
        "prompt": task.prompt_text(problem),
        "completion": completion,
        "answer": task.answer_of(completion),
        "reward": float(batch.rewards_N[i]),
        "accuracy": float(batch.accuracy_N[i]),
        "group": int(batch.group_ids_N[i]),
        "subgroup": int(batch.subgroup_ids_N[i]),
        "truncated": bool(batch.truncated_N[i]),
      }
    )
  return records


def as_markdown(records: list[dict]) -> str:
  """The records as a Markdown table (TensorBoard's text plugin renders it)."""
  cells = lambda r: [
    r["prompt"],
    r["completion"],
    str(r["answer"]),
    f"{r['reward']:.3f}",
    str(r["subgroup"]),
  ]
  escape = lambda s: s.replace("|", "\\|").replace("\n", "<br>")
  header = ["prompt", "completion", "answer", "reward", "subgroup"]
  return tables.markdown(header, ([escape(c) for c in cells(r)] for r in records))


__all__ = ["as_markdown", "step_samples"]
