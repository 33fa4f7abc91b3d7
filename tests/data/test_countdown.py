"""Countdown: checker, problem stream, train/eval split, prompts, decoding, warm-start batches."""

import itertools
from collections import Counter

import ml_collections
import numpy as np
import pytest

from grpo_jax.data import CountdownTask, Problem
from grpo_jax.rewards import countdown_reward, evaluate, plan_of


@pytest.fixture(scope="module")
def task():
  return CountdownTask()


@pytest.mark.parametrize(
  "completion, expected",
  [
    ("*-;8*9-3", 1.0),  # valid
    ("*-;9*8-3", 1.0),  # any order
    ("*-;3-8*9", 0.0),  # -69
    ("*-;8*9+3", 0.0),  # wrong value
    ("*-;8*9-8", 0.0),  # reused digit, 3 missing
    ("*-;8*9", 0.0),  # missing digit
    ("*-;8*9-3+0", 0.0),  # extra number
    ("*--;8*9-3-1+1", 0.0),  # extra digits that cancel
    ("++;8*9-3", 1.0),  # the plan disagrees with the expression: still fine
    (";8*9-3", 1.0),  # empty plan
    ("garbage;8*9-3", 1.0),  # the plan is free text
    ("8*9-3", 0.0),  # no delimiter
    ("*-;8*9-3;", 0.0),  # trailing junk after the expression
    ("*-;8*9-03", 0.0),  # leading zero
    ("*-;8**9-3", 0.0),  # doubled operator
    ("*-;-3+8*9", 0.0),  # unary minus
    ("*-;8*9-3-", 0.0),  # dangling operator
    ("*-;(8*9)-3", 0.0),  # parentheses are not part of the grammar
    ("*-;(8*9-3", 0.0),  # unbalanced parenthesis
    ("*-;72/8*9", 0.0),  # division character
    ("*-;8 * 9 - 3", 0.0),  # inner spaces
    ("*-; 8*9-3 ", 1.0),  # surrounding whitespace is ignored
    ("*-;8*9-\u0663", 0.0),  # a non-ASCII digit
    ("", 0.0),
    (";", 0.0),
    ("abc", 0.0),
  ],
)
def test_reward_hand_cases(completion, expected):
  assert countdown_reward((3, 8, 9), 69, completion) == expected


def test_reward_precedence_and_repeated_numbers():
  assert countdown_reward((2, 3, 4), 14, ";2+3*4") == 1.0  # not (2+3)*4 = 20
  assert countdown_reward((2, 3, 4), 20, ";2+3*4") == 0.0
  assert countdown_reward((9, 4, 3), 2, ";9-4-3") == 1.0  # left-assoc, not 9-(4-3) = 8
  assert countdown_reward((5, 5, 2), 23, ";5*5-2") == 1.0
  assert countdown_reward((5, 5, 2), 23, ";5*5-5") == 0.0  # multiset, not set


def test_reward_never_raises():
  rng = np.random.default_rng(0)
  alphabet = list("0123456789+-*;=,:()/ x\n\u0663") + ["<eos>", "9" * 50]
  for _ in range(2000):
    text = "".join(rng.choice(alphabet, size=rng.integers(0, 14)))
    assert countdown_reward((3, 8, 9), 69, text) in (0.0, 1.0)
  assert countdown_reward((3, 8, 9), 69, None) == 0.0
  assert countdown_reward((3, 8, 9), 69, ";" + "9" * 5000 + "*9") == 0.0


def test_evaluate_matches_python():
  for numbers in itertools.product(range(1, 10), repeat=3):
    for ops in itertools.product("+-*", repeat=2):
      expr = f"{numbers[0]}{ops[0]}{numbers[1]}{ops[1]}{numbers[2]}"
      assert evaluate(numbers, "".join(ops)) == eval(expr)  # independent reference


def test_solutions_complete_and_correct(task):
  for p in task.train_problems(0, 300):
    expected = set()
    for order in itertools.permutations(p.numbers):
      for ops in itertools.product("+-*", repeat=2):
        expr = f"{order[0]}{ops[0]}{order[1]}{ops[1]}{order[2]}"
        if eval(expr) == p.target:
          expected.add(("".join(ops), expr))
    sols = task.solutions(p)
    assert len(sols) == len(set(sols)) and set(sols) == expected and sols
    for plan, expr in sols:
      assert task.reward(p, f"{plan}{task.delimiter}{expr}") == 1.0
      assert task.plan_of(f"{plan}{task.delimiter}{expr}") == plan


def test_problems_in_range_and_solvable(task):
  for p in task.train_problems(1000, 500) + task.eval_problems():
    assert len(p.numbers) == 3 and all(1 <= n <= 9 for n in p.numbers)
    assert 0 <= p.target <= 99
    assert task.solutions(p)


def test_train_eval_disjoint(task):
  evals = task.eval_problems()
  assert len(evals) == 200
  eval_keys = {p.key for p in evals}
  assert len(eval_keys) == 200  # eval problems are distinct
  assert [p.index for p in evals] == list(range(200))
  train_keys = {p.key for p in task.train_problems(0, 5000)}
  assert not train_keys & eval_keys
  assert len(train_keys) > 500  # the stream covers many problems, not a few repeats
  assert task.eval_problems(10) == evals[:10]
  with pytest.raises(ValueError):
    task.eval_problems(201)


def test_deterministic_by_seed_and_independent_of_batching(task):
  same = CountdownTask(seed=0)
  other = CountdownTask(seed=1)
  assert same.train_problems(0, 100) == task.train_problems(0, 100)
  assert same.eval_problems() == task.eval_problems()
  assert other.train_problems(0, 100) != task.train_problems(0, 100)
  assert {p.key for p in other.eval_problems()} != {p.key for p in task.eval_problems()}
  whole = task.train_problems(0, 50)
  assert task.train_problems(20, 30) == whole[20:]
  assert [p.index for p in whole] == list(range(50))
  far = task.train_problems(10**9, 3)  # the stream is unbounded
  assert [p.index for p in far] == [10**9, 10**9 + 1, 10**9 + 2]


def test_from_config():
  cfg = ml_collections.ConfigDict(
    {"seed": 3, "data": {"num_numbers": 3, "max_number": 6, "max_target": 50, "eval_size": 40}}
  )
  t = CountdownTask.from_config(cfg)
  assert (t.seed, t.max_number, t.max_target, len(t.eval_problems())) == (3, 6, 50, 40)
  assert all(max(p.numbers) <= 6 and p.target <= 50 for p in t.train_problems(0, 200))


def test_prompts_fixed_length(task):
  problems = task.train_problems(0, 400) + task.eval_problems()
  prompts_BxP, mask_BxP = task.encode_prompts(problems)
  assert prompts_BxP.shape == (600, task.prompt_len) and prompts_BxP.dtype == np.int32
  assert mask_BxP.shape == prompts_BxP.shape and mask_BxP.all()
  assert task.prompt_len == 9
  assert task.prompt_text(Problem((3, 8, 9), 7, 0)) == "07=3,8,9:"
  for p, row in zip(problems[:20], prompts_BxP):
    assert task.tokenizer.encode(task.prompt_text(p)) == row.tolist()
  assert not (prompts_BxP == task.pad_id).any()


def test_decode_strips_eos_and_pad(task):
  enc = lambda s: task.tokenizer(s)["input_ids"]
  eos, pad = task.eos_id, task.pad_id
  tokens_NxT = np.array(
    [
      enc("*-;8*9-3") + [eos, pad, pad, pad],
      enc("++;1+2") + [eos] + enc("+3") + [pad] * 3,  # junk after eos is dropped
      enc("+*;1+2*3+4+5"),  # truncated: no eos
      [pad] * 12,
    ]
  )
  mask_NxT = np.array([[1] * 9 + [0] * 3, [1] * 9 + [0] * 3, [1] * 12, [0] * 12])
  assert task.decode(tokens_NxT, mask_NxT) == ["*-;8*9-3", "++;1+2", "+*;1+2*3+4+5", ""]
  assert task.decode(np.array([[len(task.tokenizer) + 5, eos]]), np.ones((1, 2))) == ["<unk>"]


def test_rewards_vectorised(task):
  problems = [Problem((3, 8, 9), 69, 0), Problem((2, 3, 4), 14, 1)]
  rewards_N, metrics = task.rewards(problems, ["*-;8*9-3", "*+;2*3+4"])
  assert metrics == {} and rewards_N.dtype == np.float32 and rewards_N.tolist() == [1.0, 0.0]
  with pytest.raises(ValueError):
    task.rewards(problems, ["x"])


def test_sft_batch_lines_up(task):
  tokens_BxL, input_mask_BxL, mask_BxL = task.sft_batch(100, 64, np.random.default_rng(0))
  length = task.prompt_len + task.completion_len
  assert tokens_BxL.shape == mask_BxL.shape == (64, length) and task.completion_len == 9
  problems = task.train_problems(100, 64)
  np.testing.assert_array_equal(tokens_BxL[:, : task.prompt_len], task.encode_prompts(problems)[0])
  np.testing.assert_array_equal(input_mask_BxL, tokens_BxL != task.pad_id)  # pad is distinct
  assert not mask_BxL[:, : task.prompt_len].any()
  completions = task.decode(tokens_BxL[:, task.prompt_len :], mask_BxL[:, task.prompt_len :])
  assert task.rewards(problems, completions).rewards_N.tolist() == [1.0] * 64
  for tokens, mask, text in zip(tokens_BxL, mask_BxL, completions):
    (on,) = np.nonzero(mask)
    assert on.tolist() == list(range(task.prompt_len, task.prompt_len + len(text) + 1))
    assert tokens[on[-1]] == task.eos_id  # eos is the last supervised token
    assert (tokens[on[-1] + 1 :] == task.pad_id).all()
    assert task.eos_id not in tokens[: on[-1]].tolist()
  again, _, _ = task.sft_batch(100, 64, np.random.default_rng(0))
  np.testing.assert_array_equal(again, tokens_BxL)


def test_strategies_differ(task):
  patterns = task.patterns()
  assert len(patterns) == 9 and task.describe_pattern("*-") == "a*b-c"
  assert plan_of("*-;8*9-3") == "*-" and plan_of("8*9-3") == "" and task.plan_of(";1") == ""
  problems = task.train_problems(0, 2000)
  solvable = Counter(plan for p in problems for plan in {s[0] for s in task.solutions(p)})
  freq = {plan: solvable[plan] / len(problems) for plan in patterns}
  assert all(f > 0.01 for f in freq.values())  # every plan is sometimes right
  assert max(freq.values()) - min(freq.values()) > 0.15  # ... with clearly different rates
  # Many problems admit more than one plan, so a preview carries real choice.
  multi = np.mean([len({s[0] for s in task.solutions(p)}) > 1 for p in problems])
  assert multi > 0.3
  tokens_BxL, _, mask_BxL = task.sft_batch(0, 256, np.random.default_rng(1))
  completions = task.decode(tokens_BxL, mask_BxL)
  assert len({task.plan_of(c) for c in completions}) >= 6


def test_answer_of_is_the_expression_after_the_plan():
  task = CountdownTask(eval_size=4)
  assert task.answer_of("*-;8*9-3") == "8*9-3"
  assert task.answer_of("8*9-3") is None and task.answer_of("*-;") is None
