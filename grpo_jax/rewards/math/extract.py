"""Final-answer extraction from a model completion (METHODS §6).

Rule, in order, on the text after the last ``</think>`` (if any):

1. the last ``\\boxed{...}`` / ``\\fbox{...}`` (whitespace allowed before ``{``), found by brace
   matching; ``\\boxed 5`` (no braces) reads one token. If that last box never closes (a
   truncated completion), there is no answer: an earlier, abandoned box must not win.
2. else the last ``Answer: ...`` line of the DAPO format (``**Answer:** 5``, ``Final answer: 5``,
   an empty ``Answer:`` followed by the answer on the next line).
3. else nothing. There is deliberately no "last number in the text" fallback: it rewards
   truncated or hedged outputs whose last number happens to equal the gold.

Only the single last box is taken, so a self-corrected "\\boxed{5} ... redo ... \\boxed{7}"
answers 7 (raw math-verify merges nearby boxes into the set {5, 7}).
"""

import re

# Longest answer we hand on (a 5000-digit integer fits); longer is rambling, not an answer.
MAX_ANSWER_CHARS = 10_000

_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
# Bounded gaps keep the scan linear on long runs of whitespace.
_ANSWER_RE = re.compile(r"answer[ \t]{0,3}(?:\*\*|__)?[ \t]{0,3}[:：]", re.IGNORECASE)
_THINK_END = "</think>"


def match_brace(text: str, open_pos: int) -> int:
  """Index of the ``}`` closing the ``{`` at ``open_pos``, or -1 if it never closes.

  Escaped braces (``\\{``, ``\\}``) do not count, so ``\\boxed{\\{1,2\\}}`` reads ``\\{1,2\\}``.
  """
  depth = 0
  i, n = open_pos, len(text)
  while i < n:
    c = text[i]
    if c == "\\":
      i += 2
      continue
    if c == "{":
      depth += 1
    elif c == "}":
      depth -= 1
      if depth == 0:
        return i
    i += 1
  return -1


def last_boxed(text: str) -> str | None:
  """Content of the last ``\\boxed``/``\\fbox`` in ``text``; None if absent, unclosed or empty."""
  last = next(reversed(list(_BOX_RE.finditer(text))), None)
  if last is None:
    return None
  i = last.end()
  while i < len(text) and text[i] in " \t\n":
    i += 1
  if i < len(text) and text[i] == "{":
    close = match_brace(text, i)
    if close < 0:
      return None
    content = text[i + 1 : close]
  else:
    # `\boxed 5`: one whitespace-delimited token, stopping at a math delimiter.
    m = re.match(r"[^\s$]+", text[i:])
    content = m.group(0) if m else ""
  content = content.strip()
  return content or None


def last_answer_line(text: str) -> str | None:
  """Text after the last ``Answer:`` on its line (or on the next non-empty line)."""
  last = next(reversed(list(_ANSWER_RE.finditer(text))), None)
  if last is None:
    return None
  rest = text[last.end() :]
  line, _, after = rest.partition("\n")
  line = line.strip().strip("*_").strip()
  if not line:
    nxt = next((ln.strip() for ln in after.split("\n") if ln.strip()), "")
    line = nxt.strip("*_").strip()
  # Minerva's "Final Answer: The final answer is $5$. I hope it is correct." (string ops, not
  # a regex: a lazy pattern over a long run of spaces would be quadratic).
  low = line.lower()
  start, end = low.find("final answer is"), line.find("I hope")
  if start >= 0 and end > start:
    line = line[start + len("final answer is") : end].strip().rstrip(".").strip()
  return line or None


def strip_math_delimiters(answer: str) -> str:
  """Remove surrounding ``$..$``, ``$$..$$``, ``\\(..\\)``, ``\\[..\\]`` and a final full stop."""
  s = answer.strip()
  changed = True
  while changed and s:
    changed = False
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
      if len(s) > len(left) + len(right) - 1 and s.startswith(left) and s.endswith(right):
        s = s[len(left) : len(s) - len(right)].strip()
        changed = True
    if s.endswith(".") and not s.endswith("..."):
      s = s[:-1].rstrip()
      changed = True
    if s.endswith("$") and s.count("$") == 1:
      s = s[:-1].rstrip()
      changed = True
    if s.startswith("$") and s.count("$") == 1:
      s = s[1:].lstrip()
      changed = True
  return s


def extract_answer(completion: str) -> str | None:
  """The completion's final answer string, or None when it gives none (reward 0).

  Args:
    completion: the generated text (without the prompt).

  Returns:
    The answer with math delimiters removed, or None if there is no box and no ``Answer:``
    line, the answer is empty, or it is longer than ``MAX_ANSWER_CHARS``.
  """
  if not isinstance(completion, str):
    return None
  cut = completion.rfind(_THINK_END)
  text = completion[cut + len(_THINK_END) :] if cut >= 0 else completion
  has_box = _BOX_RE.search(text) is not None
  answer = last_boxed(text) if has_box else last_answer_line(text)
  if answer is None:
    return None
  answer = strip_math_delimiters(answer)
  if not answer or len(answer) > MAX_ANSWER_CHARS:
    return None
  return answer
