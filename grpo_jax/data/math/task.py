"""Math datasets as an RL/eval task: the same interface as the built-in countdown task.

Prompts are the papers' templates (``data.template``), wrapped in the checkpoint's chat template
(``data.chat_template``, :mod:`grpo_jax.data.hf_tokenizer`), tokenized with the model's tokenizer
and LEFT-padded to ``data.max_prompt_tokens`` (one static shape for the jitted sampler and
update; longer prompts are dropped at load time and counted). Prompt masks come from the
token counts, never from a pad id: a chat tokenizer may pad with its end-of-turn token, which
its prompts contain. Generation stops on every end token the checkpoint declares
(``stop_ids``). Rewards come from ``rewards.math`` (our
extraction + exact fast path + math-verify in hard-killed workers); its counters (timeouts,
parse failures, ...) come back with each call's rewards (``Graded``) for the step metrics.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from grpo_jax.data import hf_tokenizer
from grpo_jax.data.math.load import load_math_dataset
from grpo_jax.data.math.templates import format_prompt
from grpo_jax.rewards.graded import Graded

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class MathOptions:
  """How a math task builds prompts and grades answers (``MathTask.from_config`` fills it from
  ``data.*``): template, prompt width, reward timeout and workers, chat template, stop ids."""

  template: str = "dapo"
  max_prompt_tokens: int = 512
  seed: int = 0
  timeout_s: float = 5.0
  num_workers: int = 0  # math-verify processes; 0 = one per host core
  chat_template: str | None = None  # Jinja text, or None for raw prompts
  stop_ids: tuple[int, ...] = ()
  completion_len: int = 0  # T of the supervised warm start

  @classmethod
  def from_config(cls, cfg, tokenizer) -> MathOptions:
    """The options ``data.*``, ``seed`` and ``sampling.max_new_tokens`` set for ``tokenizer``."""
    d = cfg.data
    return cls(
      template=d.template,
      max_prompt_tokens=d.max_prompt_tokens,
      seed=cfg.seed,
      timeout_s=d.reward_timeout_s,
      num_workers=d.reward_workers,
      chat_template=hf_tokenizer.resolve_chat_template(tokenizer, d.chat_template),
      stop_ids=hf_tokenizer.stop_token_ids(cfg.model.hf_path, tokenizer),
      completion_len=cfg.sampling.max_new_tokens,
    )


class MathTask:
  """Rows ``{id, problem, answer, meta}`` → fixed-width prompt tokens and verified rewards."""

  votes = True  # final answers are extracted and compared: evaluation reports maj@k

  def __init__(
    self,
    tokenizer,
    train_rows: list[dict],
    eval_rows: dict[str, list[dict]],
    options: MathOptions | None = None,
    **changes,
  ):
    """``changes``: fields of :class:`MathOptions` to change, e.g. ``template="hadw"``."""
    o = dataclasses.replace(options or MathOptions(), **changes)
    self.tokenizer = tokenizer
    self.template = o.template
    self.chat_template = o.chat_template  # Jinja text, or None for raw prompts
    self.completion_len = int(o.completion_len)  # T of the supervised warm start
    self.prompt_len = int(o.max_prompt_tokens)
    self.seed = o.seed
    self.timeout_s = o.timeout_s
    self.num_workers = o.num_workers
    self.eos_id = int(tokenizer.eos_token_id)
    pad = tokenizer.pad_token_id
    self.pad_id = int(self.eos_id if pad is None else pad)
    self.stop_ids = tuple(o.stop_ids) or (self.eos_id,)
    self.dropped_too_long = 0
    self.train_pool = self._fit(train_rows)  # every training row that fits
    self.train_rows = self.train_pool  # the rows the stream draws from (restrict_train)
    self.eval_sets = {name: self._fit(rows) for name, rows in eval_rows.items()}

  @classmethod
  def from_config(cls, cfg, tokenizer) -> MathTask:
    """Loads ``data.train_set`` (its first ``data.train_limit`` rows, when set) and
    ``data.eval_sets`` (catalogue names; local paths in ``data.train_path`` /
    ``data.eval_paths`` when given)."""
    d = cfg.data
    weights = d.level_weights or None  # the generated sets' levels, train and held out
    limit = d.train_limit or None
    train, _ = load_math_dataset(
      d.train_set, d.train_path or None, limit=limit, level_weights=weights
    )
    paths = dict(zip(d.eval_sets, d.eval_paths)) if d.eval_paths else {}
    evals = {
      name: load_math_dataset(name, paths.get(name), level_weights=weights)[0]
      for name in d.eval_sets
    }
    return cls(tokenizer, train, evals, MathOptions.from_config(cfg, tokenizer))

  @property
  def load_metrics(self) -> dict[str, float]:
    """Step metrics about the data: prompts dropped at load for their length."""
    return {"data/dropped_too_long": float(self.dropped_too_long)}

  def prompt_text(self, row: dict) -> str:
    """The user message (before any chat template): the row's identity in presample files."""
    return format_prompt(row["problem"], self.template)

  def _fit(self, rows: list[dict]) -> list[dict]:
    texts = [self.prompt_text(row) for row in rows]
    kept = []
    for row, ids in zip(
      rows, hf_tokenizer.encode_prompts(self.tokenizer, texts, self.chat_template)
    ):
      if 0 < len(ids) <= self.prompt_len:
        kept.append({**row, "input_ids": ids})
      else:
        self._drop(row, len(ids))
    if len(kept) < len(rows):
      log.warning(
        "dropped %d of %d prompts longer than data.max_prompt_tokens=%d",
        len(rows) - len(kept),
        len(rows),
        self.prompt_len,
      )
    return kept

  def _drop(self, row: dict, num_tokens: int) -> None:
    """A prompt of ``num_tokens`` tokens does not fit ``data.max_prompt_tokens``: counted."""
    del row, num_tokens
    self.dropped_too_long += 1

  def restrict_train(self, ids) -> None:
    """Draws the training stream from the pool's rows whose id is in ``ids`` only (the
    pass-rate band, ``grpo_jax.data.pass_rates``); the pool itself is kept for re-profiles."""
    ids = set(ids)
    self.train_rows = [row for row in self.train_pool if row["id"] in ids]

  def train_problems(self, start: int, count: int) -> list[dict]:
    """The training stream: a fresh seeded permutation per epoch, index → row deterministic."""
    if not self.train_rows:
      raise ValueError("no training rows fit data.max_prompt_tokens")
    n = len(self.train_rows)
    out = []
    for index in range(start, start + count):
      epoch, pos = divmod(index, n)
      order = np.random.default_rng([self.seed, epoch]).permutation(n)
      out.append({**self.train_rows[order[pos]], "index": index})  # its stream position
    return out

  def eval_problems(self, count: int | None = None, name: str | None = None) -> list[dict]:
    name = next(iter(self.eval_sets)) if name is None else name
    rows = self.eval_sets[name]
    return rows if count is None else rows[:count]

  def benchmarks(self, count: int | None = None) -> dict[str, list[dict]]:
    """Every evaluation set (``data.eval_sets``), each cut to ``count`` problems."""
    return {name: self.eval_problems(count, name) for name in self.eval_sets}

  def encode_prompts(self, rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """int32 ``tokens_BxP`` left-padded with ``pad_id`` and int32 ``mask_BxP`` (1 = token)."""
    tokens_BxP = np.full((len(rows), self.prompt_len), self.pad_id, np.int32)
    mask_BxP = np.zeros((len(rows), self.prompt_len), np.int32)
    for i, row in enumerate(rows):
      ids = row["input_ids"]
      tokens_BxP[i, self.prompt_len - len(ids) :] = ids
      mask_BxP[i, self.prompt_len - len(ids) :] = 1
    return tokens_BxP, mask_BxP

  def _solution_ids(self, row: dict) -> list[int]:
    """The reference solution as the model would write it: the assistant turn's text, then
    the end token (the chat template's end of turn is the tokenizer's EOS)."""
    ids = self.tokenizer(row["solution"], add_special_tokens=False)["input_ids"]
    return list(ids) + [self.eos_id]

  def sft_batch(self, start: int, count: int, rng: np.random.Generator):
    """Teacher-forcing batch from the training stream at ``start``: rows whose reference
    solution (+ EOS) fits ``completion_len`` tokens, in stream order. Returns int32
    ``tokens_BxL`` ([left-padded prompt | solution, EOS, right padding], L = P + T),
    ``input_mask_BxL`` and ``loss_mask_BxL`` (1 on solution tokens and EOS)."""
    del rng  # one reference solution per problem
    if not self.train_rows or "solution" not in self.train_rows[0]:
      raise ValueError("the training set has no reference solutions for a warm start")
    P, T = self.prompt_len, self.completion_len
    tokens_BxL = np.full((count, P + T), self.pad_id, np.int32)
    input_mask_BxL = np.zeros((count, P + T), np.int32)
    loss_mask_BxL = np.zeros((count, P + T), np.int32)
    b, index = 0, start
    while b < count:
      if index - start > 100 * count:
        raise ValueError(f"no reference solution fits sampling.max_new_tokens = {T} tokens")
      (row,) = self.train_problems(index, 1)
      index += 1
      solution = self._solution_ids(row)
      if len(solution) > T:
        continue
      tokens_BxP, mask_BxP = self.encode_prompts([row])
      tokens_BxL[b, :P], input_mask_BxL[b, :P] = tokens_BxP[0], mask_BxP[0]
      tokens_BxL[b, P : P + len(solution)] = solution
      input_mask_BxL[b, P : P + len(solution)] = 1
      loss_mask_BxL[b, P : P + len(solution)] = 1
      b += 1
    return tokens_BxL, input_mask_BxL, loss_mask_BxL

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

  def rewards(self, rows: list[dict], completions: list[str]) -> Graded:
    """The verified rewards, with the grader's counters of this call."""
    from grpo_jax.rewards.math import score_batch

    rewards_N, counts = score_batch(
      completions,
      [r["answer"] for r in rows],
      timeout_s=self.timeout_s,
      num_workers=self.num_workers,
    )
    return Graded(rewards_N, {k: float(v) for k, v in counts.items()})
