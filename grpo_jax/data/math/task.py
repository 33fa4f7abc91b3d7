"""Math datasets as an RL/eval task: the same interface as the built-in countdown task.

Prompts are the papers' templates (``data.template``) tokenized with the model's tokenizer and
LEFT-padded to ``data.max_prompt_tokens`` (one static shape for the jitted sampler and update;
longer prompts are dropped at load time and counted). Rewards come from ``rewards.math`` (our
extraction + exact fast path + math-verify in hard-killed workers); its counters (timeouts,
parse failures, ...) of the last call are kept in ``last_reward_counts`` for the step metrics.
"""

from __future__ import annotations

import logging

import numpy as np

from grpo_jax.data.math.load import load_math_dataset
from grpo_jax.data.math.templates import format_prompt

log = logging.getLogger(__name__)


class MathTask:
  """Rows ``{id, problem, answer, meta}`` → fixed-width prompt tokens and verified rewards."""

  def __init__(
    self,
    tokenizer,
    train_rows: list[dict],
    eval_rows: dict[str, list[dict]],
    *,
    template: str = "dapo",
    max_prompt_tokens: int = 512,
    seed: int = 0,
    timeout_s: float = 5.0,
    num_workers: int = 2,
  ):
    self.tokenizer = tokenizer
    self.template = template
    self.prompt_len = int(max_prompt_tokens)
    self.seed = seed
    self.timeout_s = timeout_s
    self.num_workers = num_workers
    self.eos_id = int(tokenizer.eos_token_id)
    pad = tokenizer.pad_token_id
    self.pad_id = int(self.eos_id if pad is None else pad)
    self.dropped_too_long = 0
    self.train_rows = self._fit(train_rows)
    self.eval_sets = {name: self._fit(rows) for name, rows in eval_rows.items()}
    self.last_reward_counts: dict[str, int] = {}

  @classmethod
  def from_config(cls, cfg, tokenizer) -> MathTask:
    """Loads ``data.train_set`` and ``data.eval_sets`` (catalogue names; local paths in
    ``data.train_path`` / ``data.eval_paths`` when given)."""
    d = cfg.data
    train, _ = load_math_dataset(d.train_set, d.train_path or None)
    paths = dict(zip(d.eval_sets, d.eval_paths)) if d.eval_paths else {}
    evals = {name: load_math_dataset(name, paths.get(name))[0] for name in d.eval_sets}
    return cls(
      tokenizer,
      train,
      evals,
      template=d.template,
      max_prompt_tokens=d.max_prompt_tokens,
      seed=cfg.seed,
      timeout_s=d.reward_timeout_s,
    )

  def prompt_text(self, row: dict) -> str:
    return format_prompt(row["problem"], self.template)

  def _encode(self, row: dict) -> list[int]:
    return self.tokenizer(self.prompt_text(row), add_special_tokens=False)["input_ids"]

  def _fit(self, rows: list[dict]) -> list[dict]:
    kept = []
    for row in rows:
      ids = self._encode(row)
      if 0 < len(ids) <= self.prompt_len:
        kept.append({**row, "input_ids": ids})
      else:
        self.dropped_too_long += 1
    if len(kept) < len(rows):
      log.warning(
        "dropped %d of %d prompts longer than data.max_prompt_tokens=%d",
        len(rows) - len(kept),
        len(rows),
        self.prompt_len,
      )
    return kept

  def train_problems(self, start: int, count: int) -> list[dict]:
    """The training stream: a fresh seeded permutation per epoch, index → row deterministic."""
    if not self.train_rows:
      raise ValueError("no training rows fit data.max_prompt_tokens")
    n = len(self.train_rows)
    out = []
    for index in range(start, start + count):
      epoch, pos = divmod(index, n)
      order = np.random.default_rng([self.seed, epoch]).permutation(n)
      out.append(self.train_rows[order[pos]])
    return out

  def eval_problems(self, count: int | None = None, name: str | None = None) -> list[dict]:
    name = next(iter(self.eval_sets)) if name is None else name
    rows = self.eval_sets[name]
    return rows if count is None else rows[:count]

  def benchmarks(self, count: int | None = None) -> dict[str, list[dict]]:
    """Every evaluation set (``data.eval_sets``), each cut to ``count`` problems."""
    return {name: self.eval_problems(count, name) for name in self.eval_sets}

  def encode_prompts(self, rows: list[dict]) -> np.ndarray:
    """int32 [B, P], left-padded with ``pad_id``."""
    out = np.full((len(rows), self.prompt_len), self.pad_id, np.int32)
    for i, row in enumerate(rows):
      ids = row["input_ids"]
      out[i, self.prompt_len - len(ids) :] = ids
    return out

  def decode(self, tokens_NxT: np.ndarray, mask_NxT: np.ndarray) -> list[str]:
    return [
      self.tokenizer.decode([int(t) for t, m in zip(row, mrow) if m], skip_special_tokens=True)
      for row, mrow in zip(tokens_NxT, mask_NxT)
    ]

  def answer_of(self, completion: str) -> str | None:
    """The extracted final answer (last box / ``Answer:`` line) for majority voting."""
    from grpo_jax.rewards.math import extract_answer

    answer = extract_answer(completion)
    return None if answer is None else " ".join(answer.split())

  def rewards(self, rows: list[dict], completions: list[str]) -> np.ndarray:
    from grpo_jax.rewards.math import score_batch

    rewards_N, counts = score_batch(
      completions,
      [r["answer"] for r in rows],
      timeout_s=self.timeout_s,
      num_workers=self.num_workers,
    )
    self.last_reward_counts = counts
    return rewards_N
