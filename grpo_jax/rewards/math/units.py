"""Unit words after a number: which trailing words are presentation, and which change it.

Rule: a trailing run of words is dropped only when every word in it is a unit on the
whitelist below (SI and common competition units, currency, counted objects such as
``ways`` or ``apples``, in singular or plural), optionally with a power ``^2``/``^3``, a
``/`` between two units (``km/h``), ``per`` (``miles per hour``) or an abbreviation's full
stop (``sq. ft.``). The run must follow a quantity (a digit, a closing bracket, ``%``, ``!``,
a degree sign, a power, a constant such as ``\\pi``, a name) and is dropped whole or not at
all: ``5 \\text{ cm}`` is 5, while ``5 \\text{ or more}``, ``3 \\text{ is wrong}``, ``5x`` and
``5 \\text{ cm or more}`` keep their words and are not plain numbers
(``fastpath.parse_number`` gives None). Words that bound, negate or list (``or``, ``more``,
``less``, ``least``, ``not``, ``and``) are not on the list, nor are multipliers (``million``).

Single letters are ambiguous: ``m``, ``s``, ``g`` and ``L``/``l`` count as units only when
separated from the number (by a space, ``\\ ``, ``~``, or inside ``\\text{}``/``\\mathrm{}``):
``5 m`` and ``5\\text{m}`` are 5 metres, ``5m`` is 5 times a variable ``m``. Every other
single letter (``x``, ``y``, ``z``, ``n``, ``k``, ``a``, ``b``, ``c``, ``t``, ``h``, ...) is a
variable, never a unit, except ``h`` after a ``/`` (``km/h``). Multi-letter units may be glued
(``5cm``, ``5km/h``).

The reward's worker parses answers with math-verify's own unit removal off (it drops any
trailing ``\\text{...}`` and words such as "more" or "less"), after ``strip_unit_tail`` has
removed the whitelisted units here; golds keep math-verify's removal.

Tokenising is one pass of a regex without nested repetition, and the tail is searched within
the last ``_MAX_TAIL_TOKENS`` tokens, so the cost is linear in the length of the answer.
"""

import re

_BASE_UNITS = (
  # length, area, volume
  "mm cm dm km meter metre millimeter centimeter kilometer inch foot yard mile ft yd "
  "liter litre ml milliliter gallon cc acre hectare square cubic sq cu unit "
  # mass, time, speed, angle, temperature
  "mg kg gram kilogram pound lb lbs ounce oz ton tonne sec second min minute hr hour day week "
  "month year yr mph kph kmh degree deg radian rad celsius fahrenheit kelvin "
  # money, percent, ordinals
  "dollar cent usd euro rupee percent st nd rd th "
  # counted objects
  "way apple orange banana egg cookie candy candies pie slice piece coin card ball marble book "
  "page pencil pen stamp ticket toy box bag cup bottle car tree chair table seat row column "
  "tile block brick cube room house floor point game match team player student people person "
  "child children boy girl friend handshake vote animal cat dog chicken cow pig sheep horse "
  "fish bird leg wheel dot line cell triangle rectangle side edge face vertex vertices "
  "diagonal digit number integer value term solution root pair triple subset element "
  "arrangement permutation combination outcome path route step move round lap roll flip toss "
  "time question problem letter word"
).split()
_IRREGULAR = "feet inches boxes children people men women mice per squared cubed".split()
UNIT_WORDS = frozenset(
  w.lower() for b in _BASE_UNITS for w in (b, b + "s", b + "es") if len(w) > 1
) | frozenset(_IRREGULAR)
SINGLE_LETTER_UNITS = frozenset("msgLl")
COMPOUND_LETTERS = SINGLE_LETTER_UNITS | {"h"}  # after a `/`: km/h, m/s
PERCENT_WORDS = frozenset(("percent", "percents"))

_TEXT_GROUP = r"\\(?:text|textrm|textnormal|textup|textbf|textit|mathrm|mbox)\s*\{[^{}]*\}"
_TOKEN = re.compile(
  rf"(?P<text>{_TEXT_GROUP})|(?P<cmd>\\[A-Za-z]+|\\.)|(?P<word>[A-Za-z]+)"
  r"|(?P<pow>\^\s*(?:\{\s*[23]\s*\}|[23]))|(?P<space>\s+|~)|(?P<other>.)",
  re.S,
)
_QUANTITY_END = frozenset("0123456789})]%!|.°")
_OPERATOR_CMDS = frozenset(
  "cdot times div pm mp le ge leq geq lt gt ne neq approx sim equiv to in cup cap setminus "
  "frac dfrac tfrac sqrt binom left right quad qquad mid land lor over".split()
)
_MAX_TAIL_TOKENS = 48  # a unit tail is a few words; bounds the search on long answers
_SPACE_CMDS = frozenset(("\\ ", "\\,", "\\;", "\\:"))


def _tokens(s: str) -> list[tuple[str, str]]:
  return [(m.lastgroup, m.group(0)) for m in _TOKEN.finditer(s)]


def _unit_run(toks: list[tuple[str, str]], separated: bool) -> tuple[bool, bool] | None:
  """(has a unit word, has a percent word) when ``toks`` is a run of units; else None.

  ``separated``: the run is already apart from the number (inside ``\\text{}``).
  """
  seen = percent = False
  last, spaced = "start", separated  # the last token that is not a space; a space since?
  for kind, text in toks:
    if kind == "space" or text in _SPACE_CMDS:
      spaced = True
      continue
    if kind == "text":
      inner = _unit_run(_tokens(text[text.index("{") + 1 : -1]), True)
      if inner is None:
        return None
      seen, percent, last = seen or inner[0], percent or inner[1], "unit"
    elif kind == "word":
      if len(text) == 1:
        letters = COMPOUND_LETTERS if last == "slash" else SINGLE_LETTER_UNITS
        if text not in letters or not (spaced or last == "slash"):
          return None
      elif text.lower() not in UNIT_WORDS:
        return None
      seen, percent, last = True, percent or text.lower() in PERCENT_WORDS, "unit"
    elif kind == "pow" and last == "unit":
      last = "pow"
    elif text == "/" and last in ("unit", "pow"):
      last = "slash"
    elif text == "." and last == "unit" and not spaced:
      last = "dot"
    else:
      return None
    spaced = False
  if last == "slash":
    return None
  return seen, percent


def _ends_quantity(kind: str, text: str) -> bool:
  """Whether a unit may follow this token: a number, a closing bracket, a constant, a name."""
  if kind == "cmd":
    return text == "\\%" or (text[1:].isalpha() and text[1:] not in _OPERATOR_CMDS)
  return kind in ("word", "text", "pow") or (kind == "other" and text in _QUANTITY_END)


def split_unit_tail(s: str) -> tuple[str, bool]:
  """``(s without its trailing unit words, whether they held a percent word)``.

  The longest trailing run of units (within the last ``_MAX_TAIL_TOKENS`` tokens) that
  follows a quantity is removed; ``s`` is unchanged (and False) when there is none.
  ``5 \\text{ cm}^2`` → ``("5", False)``, ``5 percent`` → ``("5", True)``,
  ``5 \\text{ or more}`` and ``5m`` → unchanged, ``5x \\text{ cm}`` → ``("5x", False)``.
  """
  toks = _tokens(s)
  lo = len(toks)
  while lo > 0 and len(toks) - lo < _MAX_TAIL_TOKENS:
    kind, text = toks[lo - 1]
    if not (kind in ("text", "word", "pow", "space") or text in ("/", ".") or text in _SPACE_CMDS):
      break
    lo -= 1
  for start in range(lo, len(toks)):
    if toks[start][0] not in ("word", "text"):
      continue
    q = start - 1  # the quantity: the last token before the run that is not a space
    while q >= 0 and (toks[q][0] == "space" or toks[q][1] in _SPACE_CMDS):
      q -= 1
    if q < 0 or not _ends_quantity(*toks[q]):
      continue
    run = _unit_run(toks[q + 1 :], False)
    if run is not None and run[0]:
      return "".join(t for _, t in toks[: q + 1]).rstrip(), run[1]
  return s, False


def strip_unit_tail(s: str) -> str:
  """``s`` without a trailing run of unit words (see ``split_unit_tail``)."""
  return split_unit_tail(s)[0]
