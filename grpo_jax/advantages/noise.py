"""The matched-noise control of the offset ablation (``advantage.offset_control = 'noise'``).

The shuffle (``shuffle.py``) hands each subgroup another subgroup's offset: it cannot tell an
offset that points the wrong way from any offset that is merely miscalibrated. The control
replaces every prompt's offsets {δ_s} by zero-sum noise {ε_s} of the same per-prompt magnitude:

  z_s ~ N(0, 1),   z̃_s = z_s − Σ_{s∈g} n_s z_s / n_g,
  ε_s = z̃_s · ‖δ‖_g / ‖z̃‖_g,   ‖x‖_g = sqrt(Σ_{s∈g} n_s x_s² / n_g),

so Σ_{s∈g} n_s ε_s = 0 (the row-level offsets still sum to zero, as real offsets do) and each
prompt's row-weighted RMS is its real offsets' (a prompt with one subgroup, or equal subgroup
means, keeps exact zeros). The baseline is then b_i = μ_g + α·ε_{s(i)}.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from grpo_jax.advantages import segments as seg


def matched_noise(
  rng: jax.Array,
  offset_S: jax.Array,
  count_S: jax.Array,
  subgroup_group_S: jax.Array,
  subgroup_valid_S: jax.Array,
) -> jax.Array:
  """ε per subgroup slot (see the module docstring); 0 on empty slots. Shapes: S -> S."""
  valid_S = subgroup_valid_S
  w_S = jnp.where(valid_S, count_S, 0.0)
  n_G = jnp.maximum(seg.seg_sum(w_S, subgroup_group_S, valid_S), 1.0)
  per_group = lambda x_S: seg.gather(  # row-weighted mean over the prompt, back on its slots
    seg.seg_sum(w_S * x_S, subgroup_group_S, valid_S) / n_G, subgroup_group_S, valid_S
  )
  z_S = jnp.where(valid_S, jax.random.normal(rng, offset_S.shape, jnp.float32), 0.0)
  centred_S = z_S - per_group(z_S)
  rms_z_S = jnp.sqrt(per_group(centred_S**2))
  rms_d_S = jnp.sqrt(per_group(offset_S**2))
  scale_S = jnp.where((rms_z_S > 0) & (rms_d_S > 0), rms_d_S / jnp.maximum(rms_z_S, 1e-30), 0.0)
  return jnp.where(valid_S, centred_S * scale_S, 0.0)
