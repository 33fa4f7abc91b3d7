"""The HA-DW anchor over many steps (METHODS §3): window, kalman freeze vs tracking, fixed."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from grpo_jax import advantages as adv_lib
from grpo_jax.config import base_config, defaults, experiment


def hadw_cfg(**kw):
  cfg = base_config().hadw
  cfg.enabled = True
  for k, v in kw.items():
    cfg[k] = v
  return experiment.of(cfg, "hadw")


def run_sequence(ys, cfg):
  """C used by Φ at each step, and the η_t, for the batch accuracies ``ys``."""
  step = jax.jit(lambda a, y: adv_lib.update_anchor(a, y, cfg))
  anchor, used, etas = adv_lib.init_anchor(cfg), [], []
  for y in ys:
    c, anchor, eta = step(anchor, jnp.float32(y))
    used.append(float(c))
    etas.append(float(eta))
  return np.array(used), np.array(etas), anchor


def test_init_anchor_keys_shapes_and_disabled_passthrough():
  cfg = defaults()
  anchor = adv_lib.init_anchor(cfg.hadw)
  assert tuple(anchor) == adv_lib.ANCHOR_KEYS
  assert anchor["history"].shape == (cfg.hadw.history,)
  assert all(v.dtype in (jnp.float32, jnp.int32) for v in anchor.values())
  r, g = np.array([1, 0, 1, 1], np.float32), np.array([0, 0, 1, 1])
  _, new, aux = adv_lib.compute(r, g, g, cfg.advantage, cfg.hadw, anchor, jax.random.key(0))
  assert new is anchor  # disabled: the state is untouched
  np.testing.assert_allclose(float(aux["hadw/batch_acc"]), 0.75)


def test_window_first_step_prior_and_include_current():
  ys = [0.2, 0.4, 0.9, 0.1, 0.5, 0.7]
  prior, _, anchor = run_sequence(ys, hadw_cfg(anchor="window", history=3))
  # First step C⁻ := y_1; then the mean of the (up to) 3 accuracies before step t.
  want = [0.2, 0.2, 0.3, 0.5, 1.4 / 3, 0.5]
  np.testing.assert_allclose(prior, want, atol=1e-6)
  post, _, _ = run_sequence(ys, hadw_cfg(anchor="window", history=3, include_current=True))
  # The authors' code: y_t appended before the anchor is read.
  want = [0.2, 0.3, 0.5, 1.4 / 3, 0.5, 1.3 / 3]
  np.testing.assert_allclose(post, want, atol=1e-6)
  assert int(anchor["count"]) == 3 and int(anchor["step"]) == 6
  np.testing.assert_allclose(float(anchor["belief"]), 1.3 / 3, atol=1e-6)


def test_kalman_by_hand():
  ys = [0.2, 0.6, 0.5]
  used, etas, _ = run_sequence(ys, hadw_cfg(anchor="kalman", eta=0.5, history=4))
  # t=1: C⁻ = 0.2 (= y_1), η = 0. t=2: fewer than 2 beliefs -> σ := 1, η = 0.5,
  # C⁺ = 0.4. t=3: beliefs {0.2, 0.4}, σ = 0.1, η = 0.05, prior C⁻ = 0.4.
  np.testing.assert_allclose(used, [0.2, 0.2, 0.4], atol=1e-6)
  np.testing.assert_allclose(etas, [0.0, 0.5, 0.05], atol=1e-6)
  used, _, _ = run_sequence(ys, hadw_cfg(anchor="kalman", eta=0.5, history=4, include_current=True))
  np.testing.assert_allclose(used, [0.2, 0.4, 0.4 * 0.95 + 0.05 * 0.5], atol=1e-6)
  # The clamp: η·σ = 50 > 1 gives η_t = 1, C⁺ = y_t (never an overshoot).
  _, etas, _ = run_sequence(ys, hadw_cfg(anchor="kalman", eta=50.0, history=4))
  np.testing.assert_allclose(etas, [0.0, 1.0, 1.0], atol=1e-6)


def _rising(steps=200):
  rng = np.random.default_rng(0)
  return np.linspace(0.30, 0.71, steps) + rng.normal(0, 0.03, steps)


def test_kalman_beliefs_freeze_while_observations_track():
  ys = _rising()
  frozen, _, _ = run_sequence(ys, hadw_cfg(anchor="kalman", eta=0.1, sigma_of="beliefs"))
  # The literal Eq. 9-11 rule: σ of smoothed beliefs collapses, η_t -> 0, C stays put.
  assert np.all(np.abs(frozen - ys[0]) < 0.01)
  assert abs(frozen[-1] - np.mean(ys[-20:])) > 0.3
  frozen1, _, _ = run_sequence(ys, hadw_cfg(anchor="kalman", eta=1.0, sigma_of="beliefs"))
  assert np.all(np.abs(frozen1 - ys[0]) < 0.05)  # still stuck for η = 1
  tracked, _, _ = run_sequence(ys, hadw_cfg(anchor="kalman", eta=10.0, sigma_of="observations"))
  # σ of the raw observations never collapses, so the anchor follows the rise.
  assert abs(tracked[-1] - np.mean(ys[-20:])) < 0.05
  window, _, _ = run_sequence(ys, hadw_cfg(anchor="window"))
  assert abs(window[-1] - np.mean(ys[-20:])) < 0.05


def test_fixed_anchor_ignores_accuracy():
  used, _, anchor = run_sequence([0.1, 0.9, 0.3], hadw_cfg(anchor="fixed", fixed_anchor=0.6))
  np.testing.assert_allclose(used, 0.6)
  assert int(anchor["step"]) == 3


def test_batch_accuracy_counts_all_valid_rows_including_degenerate_groups():
  cfg = defaults({"hadw.enabled": True})
  r = np.array([1, 1, 1, 0, 1, 0, 0.0, 0.9], np.float32)
  g = np.array([0, 0, 0, 1, 1, 2, 2, -1])  # group 0 all correct, padded row ignored
  _, anchor, aux = adv_lib.compute(
    r, g, g, cfg.advantage, cfg.hadw, adv_lib.init_anchor(cfg.hadw), jax.random.key(0)
  )
  np.testing.assert_allclose(float(aux["hadw/batch_acc"]), 4 / 7, rtol=1e-6)
  np.testing.assert_allclose(float(aux["hadw/anchor"]), 4 / 7, rtol=1e-6)  # first step
  np.testing.assert_allclose(float(anchor["history"][0]), 4 / 7, rtol=1e-6)
