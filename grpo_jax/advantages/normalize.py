"""Advantage normalisation A_i = Ã_i / (σ + ε) (METHODS §2).

``advantage.scale``:
  group  σ = std over the row's prompt group (GRPO, verl ``norm_adv_by_std_in_grpo``)
  batch  σ = std over all valid rows of the step
  none   A = Ã (Dr.GRPO; σ := 1 and no ε)
``advantage.scale_of``:
  rewards     σ is the std of r (default; GRPO / HA-DW code)
  advantages  σ is the std of Ã (NudgeRL's whitening); differs from ``rewards`` when α ≠ 0

Pinned: ddof = 1 (torch.std / verl / the HA-DW code), ε = ``advantage.eps`` = 1e-6, two-pass
variance. A group whose std is 0 has Ã ≡ 0 already, so it gives 0/ε = 0, never NaN.

``scale_of='advantages'`` divides Ã by its own spread, so a group whose Ã are all 0 in exact
arithmetic but carry float32 rounding (~1e-8, e.g. α = −1 on a shuffled, re-centred prompt
whose offsets cancel) would come out as rounding / (rounding + ε) ≈ 0.01–0.1 instead of 0.
There, values with |Ã| ≤ ``zero_tol`` (the caller's bound on that rounding, ~1e-6) count as 0
before σ is taken: the whitened analogue of METHODS §2 statement 6.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from grpo_jax.advantages import segments as seg

SCALE_OF = ("rewards", "advantages")


def _group_sigma(x_N, group_ids_N, valid_N) -> jax.Array:
  std_S = seg.seg_std(x_N, group_ids_N, valid_N, ddof=1)
  return seg.gather(std_S, group_ids_N, valid_N)


def _batch_sigma(x_N, group_ids_N, valid_N) -> jax.Array:
  del group_ids_N
  return jnp.broadcast_to(seg.masked_std(x_N, valid_N, ddof=1), x_N.shape)


def _no_sigma(x_N, group_ids_N, valid_N) -> jax.Array | None:
  del x_N, group_ids_N, valid_N
  return None


SigmaFn = Callable[[jax.Array, jax.Array, jax.Array], "jax.Array | None"]
SCALES: dict[str, SigmaFn] = {"group": _group_sigma, "batch": _batch_sigma, "none": _no_sigma}


def zero_rounding(raw_N: jax.Array, zero_tol: float) -> jax.Array:
  """Ã with |Ã| at or below ``zero_tol`` (rounding of an Ã that is exactly 0) set to 0, so that
  normalising Ã by its own std cannot blow rounding up to ±1 (``scale_of='advantages'``)."""
  return jnp.where(jnp.abs(raw_N) <= zero_tol, 0.0, raw_N)


def normalize(
  raw_N: jax.Array,
  rewards_N: jax.Array,
  group_ids_N: jax.Array,
  valid_N: jax.Array,
  scale: str,
  scale_of: str,
  eps: float,
) -> jax.Array:
  """A_i = Ã_i / (σ_i + ε) with σ chosen by ``scale`` and ``scale_of``. Shapes: N -> N.

  With ``scale_of='advantages'`` the caller zeroes Ã's rounding first (:func:`zero_rounding`).
  """
  source_N = rewards_N if scale_of == "rewards" else raw_N
  sigma_N = SCALES[scale](source_N, group_ids_N, valid_N)
  if sigma_N is None:
    return raw_N
  return raw_N / (sigma_N + jnp.asarray(eps, raw_N.dtype))
