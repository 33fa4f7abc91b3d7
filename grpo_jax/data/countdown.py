"""Countdown-N, the built-in verifiable CPU task.

A problem is N numbers in 1..max_number and a target in 0..max_target reachable by some
expression that uses each number exactly once with ``+ - *`` under standard precedence (grammar
and checker: :mod:`grpo_jax.rewards.countdown`). Prompt and completion, for the defaults:

  prompt      ``69=3,8,9:``   target zero-padded, then the numbers: always P = 9 tokens, so one
                              jitted decode serves every prompt.
  completion  ``*-;8*9-3``    ``<plan>;<expression>`` then EOS (T <= 9 tokens); the plan is the
                              operator pattern (``*-`` for ``a*b-c``), i.e. the solution strategy.

Strategies: the 3^(N-1) patterns differ in how often they can hit a target (``++`` can only reach
small targets, ``**`` only products, ``--`` rarely stays non-negative), so plans have genuinely
different success rates -- the strategy-conditioned sampler conditions rollouts on a plan.

Problem stream (deterministic in (seed, index), independent of batch boundaries): the numbers are
i.i.d. uniform, the target uniform over the values in 0..max_target the numbers can reach (so a
target with a single solution is as likely as one with ten). The eval split is the first
``eval_size`` distinct (sorted numbers, target) keys of a separate stream; training draws that hit
an eval key are redrawn, so train and eval never share a key.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from grpo_jax.data.tokenizer import CharTokenizer
from grpo_jax.rewards import countdown as grammar
from grpo_jax.rewards.graded import Graded

_MASK64 = (1 << 64) - 1
_TRAIN_STREAM, _EVAL_STREAM = 1, 2
_MAX_ATTEMPTS = 1000


def _splitmix64(x: int) -> int:
  """One step of SplitMix64: a fast, platform-independent 64-bit mix for counter-based draws."""
  x = (x + 0x9E3779B97F4A7C15) & _MASK64
  x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
  x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
  return x ^ (x >> 31)


def _draws(count: int, *keys: int) -> list[int]:
  state = 0
  for k in keys:
    state = _splitmix64(state ^ (k & _MASK64))
  out = []
  for _ in range(count):
    state = _splitmix64(state)
    out.append(state)
  return out


@dataclasses.dataclass(frozen=True)
class Problem:
  numbers: tuple[int, ...]
  target: int
  index: int

  @property
  def key(self) -> tuple[tuple[int, ...], int]:
    """Identity for the train/eval split: the numbers as a multiset and the target."""
    return tuple(sorted(self.numbers)), self.target


class CountdownTask:
  """Problems, prompts, rewards and supervised warm-start batches of Countdown-N."""

  votes = True  # the expression is the answer: evaluation reports maj@k

  delimiter = grammar.DELIMITER

  def __init__(self, num_numbers=3, max_number=9, max_target=99, eval_size=200, seed=0):
    if num_numbers < 2 or max_number < 1 or max_target < 0 or eval_size < 0:
      raise ValueError("need num_numbers >= 2, max_number >= 1, max_target >= 0, eval_size >= 0")
    self.num_numbers, self.max_number, self.max_target = num_numbers, max_number, max_target
    self.eval_size, self.seed = eval_size, seed
    self.tokenizer = CharTokenizer()
    self.pad_id: int = self.tokenizer.pad_token_id
    self.eos_id: int = self.tokenizer.eos_token_id
    self.stop_ids: tuple[int, ...] = (self.eos_id,)
    self.load_metrics: dict[str, float] = {}  # every problem is generated, none dropped
    vocab = self.tokenizer.get_vocab()
    self._char_to_id = {c: i for c, i in vocab.items() if len(c) == 1}
    self._id_to_text = np.array([""] * len(vocab), dtype=object)
    for tok, i in vocab.items():
      self._id_to_text[i] = tok if len(tok) == 1 else ""
    self._id_to_text[self.tokenizer.unk_token_id] = self.tokenizer.unk_token
    self._tables: dict[tuple[int, ...], dict[int, list[tuple[str, str]]]] = {}
    self._target_width = len(str(max_target))
    self._number_width = len(str(max_number))
    self.prompt_len: int = len(self.prompt_text(Problem((1,) * num_numbers, 0, 0)))
    # plan + delimiter + numbers + operators + eos
    self.completion_len: int = 2 * (num_numbers - 1) + 2 + num_numbers * self._number_width
    self._eval = self._make_eval_split()
    self._eval_keys = frozenset(p.key for p in self._eval)

  @classmethod
  def from_config(cls, cfg) -> CountdownTask:
    d = cfg.data
    return cls(d.num_numbers, d.max_number, d.max_target, d.eval_size, cfg.seed)

  # -- problems ---------------------------------------------------------------------------------

  def _table(self, numbers) -> dict[int, list[tuple[str, str]]]:
    """target -> sorted (plan, expression) solutions, for targets in 0..max_target."""
    key = tuple(sorted(numbers))
    if key not in self._tables:
      values = grammar.enumerate_expressions(key)
      self._tables[key] = {v: s for v, s in values.items() if 0 <= v <= self.max_target}
    return self._tables[key]

  def _draw(self, stream: int, index: int) -> Problem:
    for attempt in range(_MAX_ATTEMPTS):
      *digits, pick = _draws(self.num_numbers + 1, self.seed, stream, index, attempt)
      numbers = tuple(1 + d % self.max_number for d in digits)
      targets = sorted(self._table(numbers))
      if not targets:
        continue
      problem = Problem(numbers, targets[pick % len(targets)], index)
      if stream == _EVAL_STREAM or problem.key not in self._eval_keys:
        return problem
    raise RuntimeError(f"no solvable non-eval problem after {_MAX_ATTEMPTS} draws; check data.*")

  def _make_eval_split(self) -> list[Problem]:
    problems, seen = [], set()
    for j in range(100 * self.eval_size + 1000):
      if len(problems) == self.eval_size:
        break
      p = self._draw(_EVAL_STREAM, j)
      if p.key not in seen:
        seen.add(p.key)
        problems.append(Problem(p.numbers, p.target, len(problems)))
    if len(problems) < self.eval_size:
      raise ValueError(f"only {len(problems)} distinct problems found; lower data.eval_size")
    return problems

  def train_problems(self, start: int, count: int) -> list[Problem]:
    """Training problems ``start .. start+count-1`` of an unbounded, deterministic stream."""
    return [self._draw(_TRAIN_STREAM, i) for i in range(start, start + count)]

  def eval_problems(self, count: int | None = None) -> list[Problem]:
    """The first ``count`` (default all ``eval_size``) held-out problems."""
    count = self.eval_size if count is None else count
    if count > self.eval_size:
      raise ValueError(f"asked for {count} eval problems; data.eval_size is {self.eval_size}")
    return list(self._eval[:count])

  def benchmarks(self, count: int | None = None) -> dict[str, list[Problem]]:
    """Named evaluation sets: here the one held-out split."""
    return {"countdown": self.eval_problems(count)}

  def solutions(self, p: Problem) -> list[tuple[str, str]]:
    """Every valid (plan, expression) answer, sorted."""
    return list(self._table(p.numbers).get(p.target, []))

  # -- strategies -------------------------------------------------------------------------------

  def patterns(self) -> list[str]:
    """All plans (operator patterns), e.g. ``['++', '+-', '+*', '-+', ...]`` for N = 3."""
    return grammar.all_patterns(self.num_numbers)

  @staticmethod
  def describe_pattern(plan: str) -> str:
    return grammar.describe_pattern(plan)

  def plan_of(self, completion: str) -> str:
    return grammar.plan_of(completion, self.delimiter)

  def answer_of(self, completion: str) -> str | None:
    """The final answer for majority voting: the expression after the plan (None if none)."""
    parts = grammar.split_completion(completion, self.delimiter)
    return None if parts is None or not parts[1].strip() else parts[1].strip()

  # -- text and tokens --------------------------------------------------------------------------

  def prompt_text(self, p: Problem) -> str:
    numbers = ",".join(f"{n:0{self._number_width}d}" for n in p.numbers)
    return f"{p.target:0{self._target_width}d}={numbers}:"

  def _encode(self, text: str) -> list[int]:
    return [self._char_to_id[c] for c in text]

  def encode_prompts(self, problems) -> tuple[np.ndarray, np.ndarray]:
    """int32 ``tokens_BxP`` prompt ids and their ``mask_BxP`` (all ones: every prompt has
    length P)."""
    prompts_BxP = np.array([self._encode(self.prompt_text(p)) for p in problems], np.int32)
    prompts_BxP = prompts_BxP.reshape(len(problems), self.prompt_len)
    return prompts_BxP, np.ones_like(prompts_BxP)

  def decode(self, tokens_NxT: np.ndarray, mask_NxT: np.ndarray) -> list[str]:
    """Completion texts: tokens under the mask, cut at the first EOS, pad/EOS removed."""
    tokens_NxT, mask_NxT = np.asarray(tokens_NxT), np.asarray(mask_NxT).astype(bool)
    vocab = len(self._id_to_text)
    texts = []
    for ids, keep in zip(tokens_NxT, mask_NxT):
      ids = ids[keep]
      eos = np.flatnonzero(ids == self.eos_id)
      ids = ids[: eos[0]] if eos.size else ids
      # Ids beyond the vocabulary (a model vocab padded for speed) read as <unk>.
      ids = np.where((ids >= 0) & (ids < vocab), ids, self.tokenizer.unk_token_id)
      texts.append("".join(self._id_to_text[ids]))
    return texts

  # -- rewards ----------------------------------------------------------------------------------

  def reward(self, p: Problem, completion: str) -> float:
    return grammar.countdown_reward(p.numbers, p.target, completion, self.delimiter)

  def rewards(self, problems, completions: list[str]) -> Graded:
    """float32 ``[N]``; ``problems[i]`` grades ``completions[i]`` (no per-call metrics)."""
    if len(problems) != len(completions):
      raise ValueError(f"{len(problems)} problems but {len(completions)} completions")
    rewards_N = np.array([self.reward(p, c) for p, c in zip(problems, completions)], np.float32)
    return Graded(rewards_N, {})

  # -- supervised warm start --------------------------------------------------------------------

  def sft_batch(self, start: int, count: int, rng: np.random.Generator):
    """Teacher-forcing batch of training problems ``start .. start+count-1``.

    Each reference completion ``<plan>;<expression><eos>`` is drawn uniformly from the problem's
    valid (plan, expression) solutions, so several plans appear for the same problem.
    Returns int32 ``tokens_BxL`` (prompt, completion, eos, right-padded with pad to
    L = prompt_len + completion_len), int32 ``input_mask_BxL`` (1 on prompt, completion and eos)
    and int32 ``loss_mask_BxL`` (1 on completion tokens and eos).
    """
    length = self.prompt_len + self.completion_len
    tokens_BxL = np.full((count, length), self.pad_id, np.int32)
    input_mask_BxL = np.zeros((count, length), np.int32)
    loss_mask_BxL = np.zeros((count, length), np.int32)
    for b, p in enumerate(self.train_problems(start, count)):
      options = self.solutions(p)
      plan, expression = options[rng.integers(len(options))]
      completion = self._encode(f"{plan}{self.delimiter}{expression}") + [self.eos_id]
      ids = self._encode(self.prompt_text(p)) + completion
      tokens_BxL[b, : len(ids)] = ids
      input_mask_BxL[b, : len(ids)] = 1
      loss_mask_BxL[b, self.prompt_len : len(ids)] = 1
    return tokens_BxL, input_mask_BxL, loss_mask_BxL


__all__ = ["CountdownTask", "Problem"]
