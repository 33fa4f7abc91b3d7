"""A generated arithmetic set of graded difficulty, with worked solutions (no download).

Levels (``meta["level"]``), all with non-negative integer answers:
  1. single-digit ``a + b``;
  2. two-digit ``a + b`` or ``a - b`` (a ≥ b);
  3. two-digit × one-digit, or three two-digit terms ``a + b - c``;
  4. two-digit × two-digit, or ``(a + b) × c`` / ``a × b + c × d``;
  5. multi-step word problems (two or three operations).

Each row is ``{"id", "problem", "answer", "solution", "level", "kind"}``; ``solution`` is a
short step-by-step text whose last line is ``So the answer is \\boxed{N}.``.

Split: a problem text belongs to the eval split iff crc32(text) % EVAL_MODULUS == 0, so the
train and eval splits never share a problem whatever the seed, size or level mix. Within a
split, problems may repeat (level 1 has only 100 distinct sums).
"""

import itertools
import random
import zlib
from collections.abc import Iterator

LEVELS = (1, 2, 3, 4, 5)
DEFAULT_WEIGHTS = (0.15, 0.2, 0.25, 0.2, 0.2)
DEFAULT_SIZES = {"train": 20_000, "eval": 1_000}
EVAL_MODULUS = 10

_ASK = ("What is {e}?", "Compute {e}.", "Calculate {e}.", "Evaluate {e}.")


def _final(n: int) -> str:
  return f"So the answer is \\boxed{{{n}}}."


def _ask(rng: random.Random, expr: str) -> str:
  return rng.choice(_ASK).format(e=expr)


def _level1(rng):
  a, b = rng.randint(0, 9), rng.randint(0, 9)
  return "add", _ask(rng, f"{a} + {b}"), a + b, [f"{a} + {b} = {a + b}."]


def _level2(rng):
  a, b = rng.randint(10, 99), rng.randint(10, 99)
  if rng.random() < 0.5:
    return "add", _ask(rng, f"{a} + {b}"), a + b, [f"{a} + {b} = {a + b}."]
  a, b = max(a, b), min(a, b)
  return "sub", _ask(rng, f"{a} - {b}"), a - b, [f"{a} - {b} = {a - b}."]


def _times_steps(a: int, b: int) -> list[str]:
  """``a × b`` split on the tens of ``b`` when ``b`` has two digits."""
  if b < 10:
    t, u = divmod(a, 10)
    return [f"{a} × {b} = {10 * t} × {b} + {u} × {b} = {10 * t * b} + {u * b} = {a * b}."]
  t, u = divmod(b, 10)
  return [f"{a} × {b} = {a} × {10 * t} + {a} × {u} = {a * 10 * t} + {a * u} = {a * b}."]


def _level3(rng):
  if rng.random() < 0.5:
    a, b = rng.randint(10, 99), rng.randint(2, 9)
    return "mul", _ask(rng, f"{a} × {b}"), a * b, _times_steps(a, b)
  a, b = rng.randint(10, 99), rng.randint(10, 99)
  c = rng.randint(10, min(99, a + b))
  steps = [f"{a} + {b} = {a + b}.", f"{a + b} - {c} = {a + b - c}."]
  return "add_sub", _ask(rng, f"{a} + {b} - {c}"), a + b - c, steps


def _level4(rng):
  r = rng.random()
  if r < 0.4:
    a, b = rng.randint(10, 99), rng.randint(10, 99)
    return "mul2", _ask(rng, f"{a} × {b}"), a * b, _times_steps(a, b)
  if r < 0.7:
    a, b, c = rng.randint(10, 99), rng.randint(10, 99), rng.randint(2, 9)
    s = a + b
    steps = [f"First the parentheses: {a} + {b} = {s}.", f"Then {s} × {c} = {s * c}."]
    return "paren", _ask(rng, f"({a} + {b}) × {c}"), s * c, steps
  a, b, c, d = rng.randint(10, 99), rng.randint(2, 9), rng.randint(10, 99), rng.randint(2, 9)
  x, y = a * b, c * d
  steps = [f"{a} × {b} = {x}.", f"{c} × {d} = {y}.", f"{x} + {y} = {x + y}."]
  return "mul_add", _ask(rng, f"{a} × {b} + {c} × {d}"), x + y, steps


_NAMES = ("Ava", "Ben", "Chen", "Dana", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jo")
_ITEMS = ("apples", "pencils", "stickers", "marbles", "books", "cookies", "cards", "shells")


def _level5(rng):
  name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
  k = rng.randrange(3)
  if k == 0:
    n, per, gone = rng.randint(3, 12), rng.randint(4, 25), rng.randint(1, 30)
    total = n * per
    gone = min(gone, total)
    problem = (
      f"{name} has {n} boxes with {per} {item} in each box. {name} gives away {gone} {item}. "
      f"How many {item} does {name} have left?"
    )
    steps = [
      f"{name} starts with {n} × {per} = {total} {item}.",
      f"{total} - {gone} = {total - gone}.",
    ]
    return "word_mul_sub", problem, total - gone, steps
  if k == 1:
    c, q = rng.randint(2, 6), rng.randint(3, 20)
    s = c * q
    a = rng.randint(1, s - 1)
    b = s - a
    problem = (
      f"{name} had {a} {item} and bought {b} more. {name} then split them equally among "
      f"{c} friends. How many {item} did each friend get?"
    )
    steps = [f"{name} has {a} + {b} = {s} {item}.", f"{s} ÷ {c} = {s // c}."]
    return "word_add_div", problem, s // c, steps
  price, n, m = rng.randint(2, 15), rng.randint(2, 9), rng.randint(2, 9)
  cost_a, cost_b = price * n, (price + 1) * m
  paid = (cost_a + cost_b) + rng.randint(0, 40)
  problem = (
    f"{name} buys {n} {item} at ${price} each and {m} {item} at ${price + 1} each, and pays "
    f"with ${paid}. How many dollars of change does {name} get?"
  )
  steps = [
    f"{n} × {price} = {cost_a}.",
    f"{m} × {price + 1} = {cost_b}.",
    f"Total cost: {cost_a} + {cost_b} = {cost_a + cost_b}.",
    f"Change: {paid} - {cost_a + cost_b} = {paid - cost_a - cost_b}.",
  ]
  return "word_change", problem, paid - cost_a - cost_b, steps


_MAKERS = {1: _level1, 2: _level2, 3: _level3, 4: _level4, 5: _level5}


def in_eval_split(problem: str) -> bool:
  """True when ``problem`` belongs to the eval split (crc32 bucket, see module docstring)."""
  return zlib.crc32(problem.encode("utf-8")) % EVAL_MODULUS == 0


def generate(
  split: str = "train",
  n: int | None = None,
  seed: int = 0,
  level_weights: tuple[float, ...] | dict[int, float] | None = None,
) -> list[dict]:
  """``n`` arithmetic rows of ``split`` (``"train"`` or ``"eval"``), deterministic in ``seed``:
  :func:`iterate`'s rows as a list.

  Args:
    split: which side of the crc32 split to draw from.
    n: number of rows; default ``DEFAULT_SIZES[split]``.
    seed: RNG seed (train and eval use separate streams of the same seed).
    level_weights: relative frequency of levels 1..5, a 5-tuple or ``{level: weight}``
      (missing levels get 0); default ``DEFAULT_WEIGHTS``.
  """
  return list(iterate(split, n, seed, level_weights))


def iterate(
  split: str = "train",
  n: int | None = None,
  seed: int = 0,
  level_weights: tuple[float, ...] | dict[int, float] | None = None,
) -> Iterator[dict]:
  """The rows of :func:`generate`, each made when it is read: a reader that stops early
  generates no more, and the first rows do not depend on ``n``."""
  if split not in DEFAULT_SIZES:
    raise ValueError(f"split must be one of {sorted(DEFAULT_SIZES)}, got {split!r}")
  w = DEFAULT_WEIGHTS if level_weights is None else level_weights
  if isinstance(w, dict):
    w = tuple(float(w.get(level, 0.0)) for level in LEVELS)
  if len(w) != len(LEVELS) or min(w) < 0 or sum(w) <= 0:
    raise ValueError(f"level_weights must be 5 non-negative weights, got {level_weights!r}")
  return itertools.islice(_rows(split, seed, w), DEFAULT_SIZES[split] if n is None else int(n))


def _rows(split: str, seed: int, weights: tuple[float, ...]) -> Iterator[dict]:
  rng = random.Random(f"arithmetic-{split}-{seed}")
  want_eval = split == "eval"
  count = 0
  while True:
    level = rng.choices(LEVELS, weights=weights)[0]
    kind, problem, answer, steps = _MAKERS[level](rng)
    if in_eval_split(problem) != want_eval:
      continue
    yield {
      "id": f"arithmetic-{split}-{seed}-{count}",
      "problem": problem,
      "answer": str(answer),
      "solution": "\n".join([*steps, _final(answer)]),
      "level": level,
      "kind": kind,
    }
    count += 1
