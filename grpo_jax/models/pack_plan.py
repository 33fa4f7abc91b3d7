"""The host side of packing (``grpo_jax.models.packing``): which rows' real tokens share a packed
row, and the packed arrays.

Per cell of ``cell`` consecutive rows: the rows come in aligned runs of ``share`` that repeat
one prompt (1 = every row its own prompt). A run becomes segments of one prompt followed by as
many of its completions as fit in ``width`` slots; the segments go into packed rows by first
fit decreasing (longest first, ties in row order), at most one packed row per row of the cell.
A row's real tokens must be contiguous: its prompt left-padded in [0, P) and its response
right-padded in [P, L), as every rollout writes them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from grpo_jax.models.packing import Packed


@dataclasses.dataclass(frozen=True)
class Segment:
  """One prompt (that of row ``prompt_row``, ``prompt`` tokens) and the responses of ``rows``."""

  prompt_row: int
  prompt: int
  rows: tuple[int, ...]
  lengths: tuple[int, ...]

  @property
  def size(self) -> int:
    return self.prompt + sum(self.lengths)


@dataclasses.dataclass(frozen=True)
class PackPlan:
  """The packed rows of every cell: ``bins[c][r]`` lists the segments of packed row r of
  cell c; ``width`` W slots a packed row; ``rows`` N, ``prompt_len`` P, ``length`` L."""

  bins: tuple[tuple[tuple[Segment, ...], ...], ...]
  cell: int
  width: int
  prompt_len: int
  length: int

  @property
  def rows_needed(self) -> int:
    """The most packed rows any cell needs (its R_c at least; 1 for an empty batch)."""
    return max([len(b) for b in self.bins] + [1])

  def real_tokens(self) -> int:
    return sum(s.size for cell in self.bins for row in cell for s in row)

  def arrays(self, tokens_NxL: np.ndarray, cell_rows: int) -> Packed:
    """The packed arrays, ``cell_rows`` packed rows a cell (≥ :attr:`rows_needed`)."""
    if cell_rows < self.rows_needed:
      raise ValueError(f"cell_rows = {cell_rows} < the {self.rows_needed} packed rows needed")
    cells, W, P = len(self.bins), self.width, self.prompt_len
    R = cells * cell_rows
    tokens_RxW = np.zeros((R, W), np.int32)
    positions_RxW = np.zeros((R, W), np.int32)
    segment_RxW = np.full((R, W), -1, np.int32)
    sub_RxW = np.zeros((R, W), np.int32)
    source_NxT = np.zeros((cells * self.cell, self.length - P), np.int32)
    for c, cell_bins in enumerate(self.bins):
      segment_id = 0
      for r, row_segments in enumerate(cell_bins):
        row, offset = c * cell_rows + r, 0
        for seg in row_segments:
          p = seg.prompt
          span = slice(offset, offset + p)
          tokens_RxW[row, span] = tokens_NxL[seg.prompt_row, P - p : P]
          positions_RxW[row, span] = np.arange(p)
          segment_RxW[row, span] = segment_id
          predictor = r * W + offset + p - 1  # the prompt's last token predicts slot P
          offset += p
          for j, (n, ell) in enumerate(zip(seg.rows, seg.lengths), start=1):
            span = slice(offset, offset + ell)
            tokens_RxW[row, span] = tokens_NxL[n, P : P + ell]
            positions_RxW[row, span] = p + np.arange(ell)
            segment_RxW[row, span] = segment_id
            sub_RxW[row, span] = j
            source_NxT[n, 0] = predictor
            source_NxT[n, 1:ell] = r * W + offset + np.arange(ell - 1)
            offset += ell
          segment_id += 1
    return Packed(tokens_RxW, positions_RxW, segment_RxW, sub_RxW, source_NxT, cell_rows)


def real_spans(mask_NxL: np.ndarray, prompt_len: int) -> tuple[np.ndarray, np.ndarray]:
  """(prompt tokens p_N, response tokens ℓ_N) of each row; raises unless every row's real
  tokens are contiguous (prompt left-padded, response right-padded) and a row with a response
  has a prompt."""
  mask_NxL = np.asarray(mask_NxL) > 0
  prompt_NxP, response_NxT = mask_NxL[:, :prompt_len], mask_NxL[:, prompt_len:]
  bad_N = np.any(prompt_NxP[:, :-1] & ~prompt_NxP[:, 1:], axis=1)
  bad_N |= np.any(~response_NxT[:, :-1] & response_NxT[:, 1:], axis=1)
  p_N, ell_N = prompt_NxP.sum(1), response_NxT.sum(1)
  bad_N |= (p_N == 0) & (ell_N > 0)
  if bad_N.any():
    n = int(np.argmax(bad_N))
    raise ValueError(
      f"packing: row {n}'s real tokens are not a left-padded prompt in [0, {prompt_len}) and "
      "a right-padded response after it (loss.pack needs contiguous rows)"
    )
  return p_N, ell_N


def plan(mask_NxL: np.ndarray, prompt_len: int, cell: int, share: int, width: int) -> PackPlan:
  """The packing of a batch (module doc) whose real tokens ``mask_NxL`` marks."""
  N, L = mask_NxL.shape
  if cell < 1 or N % cell or cell % share:
    raise ValueError(f"cells of {cell} rows must divide N = {N} and be runs of {share}")
  p_N, ell_N = real_spans(mask_NxL, prompt_len)
  too_long = np.flatnonzero(p_N + ell_N > width)
  if too_long.size:
    n = int(too_long[0])
    raise ValueError(f"packing: row {n} has {p_N[n] + ell_N[n]} real tokens, over width {width}")
  bins = []
  for start in range(0, N, cell):
    segments = []
    for run in range(start, start + cell, share):
      segments += _run_segments(run, share, p_N, ell_N, width)
    bins.append(_first_fit_decreasing(segments, width))
  return PackPlan(tuple(bins), cell, width, prompt_len, L)


def _run_segments(first: int, share: int, p_N, ell_N, width: int) -> list[Segment]:
  """The segments of rows first … first + share − 1 (one prompt): as many responses a segment
  as fit in ``width``; rows without a response are left out."""
  p, segments, rows, lengths = int(p_N[first]), [], [], []
  for n in range(first, first + share):
    ell = int(ell_N[n])
    if not ell:
      continue
    if rows and p + sum(lengths) + ell > width:
      segments.append(Segment(first, p, tuple(rows), tuple(lengths)))
      rows, lengths = [], []
    rows.append(n)
    lengths.append(ell)
  if rows:
    segments.append(Segment(first, p, tuple(rows), tuple(lengths)))
  return segments


def _first_fit_decreasing(segments: list[Segment], width: int) -> tuple:
  """Packed rows of segments: longest first (ties in order), each into the first row with room."""
  rows: list[list[Segment]] = []
  free: list[int] = []
  for seg in sorted(segments, key=lambda s: -s.size):
    r = next((i for i, room in enumerate(free) if room >= seg.size), len(rows))
    if r == len(rows):
      rows.append([])
      free.append(width)
    rows[r].append(seg)
    free[r] -= seg.size
  return tuple(tuple(row) for row in rows)


__all__ = ["PackPlan", "Segment", "plan", "real_spans"]
