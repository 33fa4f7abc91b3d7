"""The keys ``docs/metrics.md`` documents, as patterns: each table row's first cell lists keys in
backticks, a key starting with ``/`` continuing the first key's prefix (```reward/<fn>/mean``,
``/std``` → ``reward/<fn>/std``), and ``<name>`` standing for any one path segment."""

import pathlib
import re

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs/metrics.md"


def patterns(text: str) -> list[re.Pattern]:
  out = []
  for line in text.splitlines():
    if not line.startswith("| `"):
      continue
    names = re.findall(r"`([^`]+)`", line.split(" | ")[0])
    prefix = names[0].rsplit("/", 1)[0]
    for name in names:
      full = prefix + name if name.startswith("/") else name
      out.append(re.compile(re.sub(r"<[a-z]+>", "[^/]+", re.escape(full)) + "$"))
  return out


def undocumented(keys, text: str | None = None) -> list[str]:
  """The keys (``step`` aside) no pattern of the page matches."""
  pats = patterns(PAGE.read_text() if text is None else text)
  return sorted(k for k in keys if k != "step" and not any(p.match(k) for p in pats))
