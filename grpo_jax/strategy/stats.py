"""Success rate of the completions conditioned on each preview, over a run (METHODS §5)."""

from __future__ import annotations

from collections import defaultdict

from grpo_jax.strategy.layout import normalize_preview


class PreviewStats:
  """Rollouts and reward sum per normalised preview, counted since this process started."""

  def __init__(self):
    self.counts = defaultdict(lambda: [0, 0.0])  # normalised preview -> [rollouts, reward sum]

  def add(self, texts_N, rewards_N) -> None:
    for text, r in zip(texts_N, rewards_N):
      entry = self.counts[normalize_preview(text)]
      entry[0] += 1
      entry[1] += float(r)

  @classmethod
  def merge(cls, counts: list[dict]) -> PreviewStats:
    """Stats over ``counts`` (the ``counts`` of several processes' stats, e.g. gathered)."""
    out = cls()
    for part in counts:
      for preview, (n, total) in part.items():
        out.counts[preview][0] += n
        out.counts[preview][1] += total
    return out

  def table(self, top: int = 50) -> list[dict]:
    """The ``top`` most used previews with their success rate, most used first."""
    rows = sorted(self.counts.items(), key=lambda kv: (-kv[1][0], kv[0]))[:top]
    return [{"preview": p, "rollouts": n, "success_rate": s / n} for p, (n, s) in rows]


__all__ = ["PreviewStats"]
