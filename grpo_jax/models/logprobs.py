"""Per-token log-probabilities (and entropies) of a sequence under the tempered policy."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from grpo_jax.models.packing import Packed, packed_hidden
from grpo_jax.models.shared_prompt import check_share, shared_prompt_hidden
from grpo_jax.models.transformer import causal_mask, positions_from_mask, real_tokens


def logps_from_logits(logits_NxV: jax.Array, temperature: float) -> jax.Array:
  """log_softmax(logits / τ) in float32: the sampler's log-probs (METHODS §4 statement 16).
  The trainer's :func:`token_logps` computes the same z_y − logsumexp(z), z = logits / τ, per
  target only."""
  return jax.nn.log_softmax(logits_NxV.astype(jnp.float32) / temperature, axis=-1)


def final_hidden(graphdef: nnx.GraphDef, params: dict, tokens_BxL, mask_BxL):
  """(the merged model, its final-norm hidden states h_BxLxD) over a padded batch."""
  model = nnx.merge(graphdef, params)
  h_BxLxD, _ = model(
    real_tokens(tokens_BxL, mask_BxL), positions_from_mask(mask_BxL), causal_mask(mask_BxL)
  )
  return model, h_BxLxD


def predicting_hidden(
  graphdef: nnx.GraphDef,
  params: dict,
  tokens_BxL,
  mask_BxL,
  first: int,
  share: int = 1,
  packed: Packed | None = None,
):
  """(the merged model, h_BxTxD): final-norm hidden states at positions first−1 … L−2, which
  predict the tokens at first … L−1. ``share`` > 1: the rows come in aligned runs of ``share``
  with the same tokens and mask in slots [0, first), and each run's prompt is run once
  (``shared_prompt.py``). ``packed``: the same states from one pass over the batch's real
  tokens packed into rows (``packing.py``; ``first`` is then its prompt width P)."""
  if packed is not None:
    model = nnx.merge(graphdef, params)
    return model, packed_hidden(model, packed)
  if share > 1:
    model = nnx.merge(graphdef, params)
    return model, shared_prompt_hidden(model, tokens_BxL, mask_BxL, first, share)
  model, h_BxLxD = final_hidden(graphdef, params, tokens_BxL, mask_BxL)
  return model, h_BxLxD[:, first - 1 : -1]


def scored_window(tokens_BxL: jax.Array, mask_BxL: jax.Array, start: int, share: int = 1):
  """The positions start … L−1 that a ``token_logps(..., Window(start))`` result covers (and
  the checks of ``start`` and ``share``).

  Returns ``first`` = max(start, 1), the first position with a prediction to score (hidden
  states first−1 … L−2 predict it and the rest); targets_BxT = tokens[:, first:]; and ``place``,
  which turns per-prediction values (B × (L − first)) into the result: 0 prepended for
  position 0 when start = 0, 0 at padding.
  """
  if not 0 <= start < tokens_BxL.shape[1]:
    raise ValueError(f"start must lie in [0, {tokens_BxL.shape[1]}), got {start}")
  if share != 1:
    check_share(tokens_BxL.shape[0], start, tokens_BxL.shape[1], share)
  first = max(start, 1)
  keep_BxT = mask_BxL[:, start:].astype(bool)
  lead = lambda x: x if start else jnp.pad(x, ((0, 0), (1, 0)))  # position 0 scores 0

  def place(values):
    return jnp.where(keep_BxT, lead(values), 0.0)

  return first, tokens_BxL[:, first:].astype(jnp.int32), place


class Window(NamedTuple):
  """The positions a log-prob call scores: ``start`` … L−1 (``start`` 0: every position, 0 at
  position 0), over rows that come in aligned runs of ``share`` with one prompt in slots
  [0, start), computed once per run (``share`` > 1 needs ``start`` > 0). ``packed``: the rows'
  real tokens packed with ``start`` = P (``packing.py``), the forward pass run on those."""

  start: int = 0
  share: int = 1
  packed: Packed | None = None


def token_logps(
  graphdef: nnx.GraphDef,
  params: dict,
  tokens_BxL: jax.Array,
  mask_BxL: jax.Array,
  temperature: float = 1.0,
  with_entropy: bool = False,
  window: Window | None = None,
):
  """logps_BxL[:, t] = log softmax(logits[:, t−1] / τ)[tokens[:, t]] for t ≥ 1; 0 at t = 0.

  Float32 throughout. Positions with ``mask_BxL == 0`` are set to 0 (they are padding). With
  ``with_entropy`` also returns entropy_BxL[:, t] = −Σ_v p_v log p_v of the same tempered
  distribution (the one that predicted token t), 0 at t = 0 and at padding.
  ``window.start`` > 0 returns only positions start … L−1 (B×(L−start): a completion after a
  prompt of ``start`` slots) and unembeds only the positions that predict them — the prompt's
  V-wide logits and log-softmax are never computed (nor differentiated). ``window.share`` > 1
  (with ``start`` > 0): rows come in aligned runs of ``share`` that repeat one prompt in slots
  [0, start), computed once per run (``predicting_hidden``).
  """
  start, share, packed = window or Window()
  if isinstance(temperature, (int, float)) and temperature <= 0:
    raise ValueError(f"token_logps needs temperature > 0, got {temperature}")
  first, targets_BxT, place = scored_window(tokens_BxL, mask_BxL, start, share)  # checks first
  model, h_BxTxD = predicting_hidden(graphdef, params, tokens_BxL, mask_BxL, first, share, packed)
  z_BxTxV = model.logits(h_BxTxD).astype(jnp.float32) / temperature
  # log softmax(z)[y] = z_y − logsumexp(z): the B×T×V log-probs are never materialised
  # (docs/results/2026-12-02_performance.md).
  lse_BxT = jax.nn.logsumexp(z_BxTxV, axis=-1)
  picked_BxT = jnp.take_along_axis(z_BxTxV, targets_BxT[..., None], axis=-1)[..., 0] - lse_BxT
  if not with_entropy:
    return place(picked_BxT)
  # −Σ p log p = lse − Σ p·z
  p_BxTxV = jnp.exp(z_BxTxV - lse_BxT[..., None])
  entropy_BxT = lse_BxT - jnp.sum(p_BxTxV * z_BxTxV, axis=-1)
  return place(picked_BxT), place(entropy_BxT)
