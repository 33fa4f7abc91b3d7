"""Rotary embeddings: apply_rope against a NumPy rotate_half reference, its gradient against the
closed-form transpose, and a backward pass free of the pad + add of a slice-and-concatenate."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax.models.rope import apply_rope, rope_tables

YARN = (
  ("factor", 4.0),
  ("original_max_position_embeddings", 64),
  ("rope_type", "yarn"),
)


def _np_tables(Dh, theta, scaling, positions_BxL):
  inv_freq, scale = rope_tables(Dh, theta, scaling)
  ang_BxLxDh2 = np.asarray(positions_BxL, np.float64)[..., None] * inv_freq
  ang_BxLxDh = np.concatenate([ang_BxLxDh2, ang_BxLxDh2], -1)[:, :, None]
  return np.cos(ang_BxLxDh) * scale, np.sin(ang_BxLxDh) * scale


def _np_rotate_half(x):
  half = x.shape[-1] // 2
  return np.concatenate([-x[..., half:], x[..., :half]], -1)


def _inputs(seed=0, B=2, L=7, H=3, Dh=8):
  rng = np.random.default_rng(seed)
  x_BxLxHxDh = rng.standard_normal((B, L, H, Dh)).astype(np.float32)
  # Left padding and a gap: positions need not be 0..L-1.
  positions_BxL = np.stack([np.arange(L), np.r_[0, 0, 0, 1, 2, 5, 9]]).astype(np.int32)
  return x_BxLxHxDh, positions_BxL


@pytest.mark.parametrize("scaling", [(), YARN], ids=["default", "yarn"])
def test_apply_rope_matches_numpy_rotate_half(scaling):
  x, pos = _inputs()
  cos, sin = _np_tables(x.shape[-1], 1e4, scaling, pos)
  want = x * cos + _np_rotate_half(x) * sin
  got = np.asarray(apply_rope(jnp.asarray(x), jnp.asarray(pos), 1e4, scaling))
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_apply_rope_gradient_is_the_transposed_rotation():
  """RoPE is linear in x: y = x·cos + R(x)·sin with R(x) = [−x₂, x₁], so the gradient of
  Σ g·y is g·cos + Rᵀ(g·sin), Rᵀ(u) = [u₂, −u₁]."""
  x, pos = _inputs(seed=1)
  g = np.random.default_rng(2).standard_normal(x.shape).astype(np.float32)
  cos, sin = _np_tables(x.shape[-1], 1e4, YARN, pos)
  u = g * sin
  half = x.shape[-1] // 2
  want = g * cos + np.concatenate([u[..., half:], -u[..., :half]], -1)
  grad = jax.grad(lambda x: jnp.sum(jnp.asarray(g) * apply_rope(x, jnp.asarray(pos), 1e4, YARN)))
  np.testing.assert_allclose(np.asarray(grad(jnp.asarray(x))), want, rtol=1e-5, atol=1e-5)


def test_bf16_input_keeps_its_dtype_and_float32_tables_round_once():
  x, pos = _inputs(seed=3)
  x_bf16 = jnp.asarray(x, jnp.bfloat16)
  cos, sin = _np_tables(x.shape[-1], 1e4, (), pos)
  x64 = np.asarray(x_bf16, np.float64)
  want = x64 * cos + _np_rotate_half(x64) * sin
  for float32_tables in (False, True):
    y = apply_rope(x_bf16, jnp.asarray(pos), 1e4, float32_tables=float32_tables)
    assert y.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(y, np.float64), want, rtol=2e-2, atol=2e-2)
  # float32 tables: one rounding to bf16 at the end, so at most half a bf16 ulp from exact.
  y32 = np.asarray(apply_rope(x_bf16, jnp.asarray(pos), 1e4, float32_tables=True), np.float64)
  assert np.all(np.abs(y32 - want) <= np.abs(want) * 2.0**-8 + 1e-6)


def _pads_in_backward(rope_fn):
  x, pos = _inputs()
  g = jnp.ones(x.shape, jnp.float32)
  grad = jax.jit(jax.grad(lambda x: jnp.sum(g * rope_fn(x, jnp.asarray(pos), 1e4))))
  return grad.lower(jnp.asarray(x)).as_text().count("stablehlo.pad")


def test_backward_has_no_pad_of_sliced_halves():
  """Slicing the halves and concatenating them puts a pad + add per half into the gradient;
  the reversed (2, Dh/2) view does not (a pad-free backward runs faster on XLA:CPU)."""

  def sliced(x, positions_BxL, theta):
    Dh = x.shape[-1]
    inv_freq, _ = rope_tables(Dh, theta)
    ang = positions_BxL.astype(jnp.float32)[..., None] * jnp.asarray(inv_freq)
    ang = jnp.concatenate([ang, ang], -1)[:, :, None]
    rotated = jnp.concatenate([-x[..., Dh // 2 :], x[..., : Dh // 2]], -1)
    return x * jnp.cos(ang) + rotated * jnp.sin(ang)

  assert _pads_in_backward(sliced) > 0  # the check can see a pad
  assert _pads_in_backward(apply_rope) == 0
  x, pos = _inputs(seed=4)
  np.testing.assert_allclose(
    np.asarray(apply_rope(jnp.asarray(x), jnp.asarray(pos), 1e4)),
    np.asarray(sliced(jnp.asarray(x), jnp.asarray(pos), 1e4)),
    rtol=1e-6,  # other ops and shapes, so other compiled kernels: equal up to rounding
    atol=1e-6,
  )
