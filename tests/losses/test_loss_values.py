"""Policy-loss values and gradients against an independent NumPy reference (METHODS §4).

The reference below is written from the formulas with explicit loops (no shared code with
grpo_jax.losses); JAX runs in float64 here so agreement is to ~1e-12. Gradients are checked
against central differences of the reference.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import losses
from grpo_jax.config import defaults

KINDS = ("grpo", "dapo", "gspo")
AGGS = (
  "token_mean",
  "seq_mean_token_mean",
  "seq_mean_token_sum",
  "seq_mean_token_sum_norm",
)
DEFAULT_EPS = {"grpo": (0.2, 0.2), "dapo": (0.2, 0.28), "gspo": (3e-4, 4e-4)}


def np_reference(
  logp,
  old,
  adv,
  mask,
  kind,
  agg,
  dual=0.0,
  ref=None,
  ent=None,
  kl_coef=0.0,
  est="k3",
  ent_coef=0.0,
  norm_length=0,
):
  """Loss and metrics, loop by loop, straight from METHODS §4."""
  eps_lo, eps_hi = DEFAULT_EPS[kind]
  n_rows, width = logp.shape
  m = mask > 0
  tok = m.sum()
  seqs = sum(1 for i in range(n_rows) if m[i].any())
  t_max = norm_length or width

  def agg_fn(x):
    total = 0.0
    for i in range(n_rows):
      n_i = m[i].sum()
      row = sum(x[i, t] for t in range(width) if m[i, t])
      if agg == "token_mean":
        total += row / max(tok, 1)
      elif agg == "seq_mean_token_mean":
        total += (row / n_i if n_i else 0.0) / max(seqs, 1)
      elif agg == "seq_mean_token_sum":
        total += row / max(seqs, 1)
      else:
        total += row / (max(seqs, 1) * t_max)
    return total

  ell = np.zeros((n_rows, width))
  rho = np.ones((n_rows, width))
  low, high, dualf = (np.zeros((n_rows, width)) for _ in range(3))
  for i in range(n_rows):
    valid = [t for t in range(width) if m[i, t]]
    if kind == "gspo" and valid:
      s = math.exp(min(max(sum(logp[i, t] - old[i, t] for t in valid) / len(valid), -20), 20))
    a = adv[i]
    for t in valid:
      r = s if kind == "gspo" else math.exp(min(max(logp[i, t] - old[i, t], -20), 20))
      rho[i, t] = r
      ell[i, t] = max(-a * r, -a * min(max(r, 1 - eps_lo), 1 + eps_hi))
      low[i, t] = r < 1 - eps_lo and a < 0
      high[i, t] = r > 1 + eps_hi and a > 0
      if dual and a < 0 and ell[i, t] > -dual * a:
        ell[i, t] = -dual * a
        dualf[i, t] = 1
  out = {"loss/policy": agg_fn(ell), "loss/kl": 0.0, "loss/entropy": 0.0}
  if ref is not None:
    kl = np.zeros((n_rows, width))
    for i, t in zip(*np.nonzero(m)):
      d = min(max(logp[i, t] - ref[i, t], -10), 10)
      kl[i, t] = {"k1": d, "k2": 0.5 * d * d, "k3": math.exp(-d) + d - 1}[est]
    out["loss/kl"] = agg_fn(kl)
  if ent is not None:
    out["loss/entropy"] = agg_fn(ent)
  out["loss/total"] = out["loss/policy"] + kl_coef * out["loss/kl"] - ent_coef * out["loss/entropy"]
  div = max(tok, 1)
  out["clip/low_frac"] = low[m].sum() / div
  out["clip/high_frac"] = high[m].sum() / div
  if dual:  # logged with a dual clip only; no entropy control here: no controlled_frac
    out["clip/dual_frac"] = dualf[m].sum() / div
  out["ppo_kl"] = sum(-min(max(logp[i, t] - old[i, t], -20), 20) for i, t in zip(*np.nonzero(m)))
  out["ppo_kl"] /= div
  out["ratio/mean"] = rho[m].sum() / div
  return out


def make_inputs(seed=0):
  """8 rows of unequal length (one all-masked), per-row ratio spread from 0 to large."""
  rng = np.random.default_rng(seed)
  lengths = np.array([7, 5, 3, 0, 6, 1, 7, 4])
  n_rows, width = len(lengths), 7
  mask = (np.arange(width)[None] < lengths[:, None]).astype(np.float64)
  logp = -rng.uniform(0.05, 3.0, (n_rows, width))
  scale = np.array([0.0, 1e-4, 0.3, 1.0, 0.5, 1e-5, 0.15, 1.5])
  old = logp + rng.normal(size=(n_rows, width)) * scale[:, None]
  old[2, 0] = logp[2, 0] - 2.0  # ρ = e² > 3 on a negative row: dual-clipped
  old[6, 1] = logp[6, 1] + 1.0  # ρ = e⁻¹ on a negative row: low-clipped
  adv = rng.normal(size=n_rows)
  adv[[2, 6]] = [-0.8, -1.1]
  adv[[0, 4]] = [0.9, 1.3]
  ref = logp + rng.normal(size=(n_rows, width)) * 0.7
  ref[0, 0] = logp[0, 0] - 14.0  # beyond the ±10 KL clamp
  ent = rng.uniform(0.0, 2.0, (n_rows, width))
  # Garbage where masked: must not reach values or gradients.
  for x in (logp, old, ref, ent):
    x[mask == 0] = np.nan
  return logp, old, adv, mask, ref, ent


def make_cfg(**kw):
  """The typed ``loss`` group: the defaults with ``kw`` set."""
  return defaults({f"loss.{k}": v for k, v in kw.items()}).loss


def jax_loss(inputs, cfg, with_terms=True):
  logp, old, adv, mask, ref, ent = inputs
  denoms = losses.denominators(jnp.asarray(mask), cfg)
  return losses.policy_loss(
    jnp.asarray(logp),
    jnp.asarray(old),
    jnp.asarray(adv),
    jnp.asarray(mask),
    cfg,
    denoms,
    losses.Terms(jnp.asarray(ref), jnp.asarray(ent)) if with_terms else losses.Terms(),
  )


def test_inputs_cover_every_clip_branch():
  logp, old, adv, mask, ref, ent = make_inputs()
  out = np_reference(logp, old, adv, mask, "grpo", "token_mean", dual=3.0)
  assert out["clip/low_frac"] > 0 and out["clip/high_frac"] > 0 and out["clip/dual_frac"] > 0
  gspo = np_reference(logp, old, adv, mask, "gspo", "token_mean")
  # GSPO: some sequences inside its tiny range, some clipped.
  assert 0 < gspo["clip/low_frac"] + gspo["clip/high_frac"] < 0.9


def test_reference_on_a_hand_example():
  # One row, two tokens, ratios e^0.1 and e^-0.5, A = -1, grpo ε = 0.2, token_mean:
  # ℓ = max(ρ, clip(ρ)) = [e^0.1, 0.8] -> loss = (e^0.1 + 0.8)/2 ; low-clip on token 2.
  logp = np.array([[0.0, 0.0]])
  old = np.array([[-0.1, 0.5]])
  out = np_reference(logp, old, np.array([-1.0]), np.ones((1, 2)), "grpo", "token_mean")
  assert out["loss/policy"] == pytest.approx((math.exp(0.1) + 0.8) / 2)
  assert out["clip/low_frac"] == 0.5
  with jax.enable_x64(True):
    got, aux = jax_loss(
      (logp, old, np.array([-1.0]), np.ones((1, 2)), None, None), make_cfg(), with_terms=False
    )
  assert float(got) == pytest.approx((math.exp(0.1) + 0.8) / 2, rel=1e-12)
  assert float(aux["clip/low_frac"]) == 0.5


@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("kind", KINDS)
def test_values_match_reference(kind, agg):
  inputs = make_inputs()
  logp, old, adv, mask, ref, ent = inputs
  with jax.enable_x64(True):
    for dual, kl_coef, ent_coef, est in ((0.0, 0.0, 0.0, "k3"), (3.0, 0.05, 0.01, "k2")):
      cfg = make_cfg(
        kind=kind,
        aggregation=agg,
        dual_clip=dual,
        kl_coef=kl_coef,
        entropy_coef=ent_coef,
        kl_estimator=est,
      )
      loss, aux = jax_loss(inputs, cfg)
      want = np_reference(logp, old, adv, mask, kind, agg, dual, ref, ent, kl_coef, est, ent_coef)
      assert float(loss) == pytest.approx(want["loss/total"], rel=1e-11, abs=1e-14)
      assert set(aux) == set(want)
      for key, val in want.items():
        assert float(aux[key]) == pytest.approx(val, rel=1e-11, abs=1e-14), key


@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("kind", KINDS)
def test_gradient_matches_finite_differences(kind, agg):
  inputs = make_inputs(seed=1)
  logp, old, adv, mask, ref, ent = inputs
  cfg = make_cfg(kind=kind, aggregation=agg, dual_clip=3.0, kl_coef=0.05, entropy_coef=0.01)
  with jax.enable_x64(True):
    denoms = losses.denominators(jnp.asarray(mask), cfg)

    def f(lp, en):
      return losses.policy_loss(lp, old, adv, mask, cfg, denoms, losses.Terms(ref, en))[0]

    g_logp, g_ent = map(np.asarray, jax.grad(f, argnums=(0, 1))(logp, ent))
  assert np.all(g_logp[mask == 0] == 0) and np.all(g_ent[mask == 0] == 0)

  def ref_loss(lp, en):
    return np_reference(lp, old, adv, mask, kind, agg, 3.0, ref, en, 0.05, "k3", 0.01)["loss/total"]

  h = 1e-6
  for i, t in zip(*np.nonzero(mask)):
    up, dn = logp.copy(), logp.copy()
    up[i, t] += h
    dn[i, t] -= h
    fd = (ref_loss(up, ent) - ref_loss(dn, ent)) / (2 * h)
    assert float(g_logp[i, t]) == pytest.approx(fd, rel=1e-5, abs=1e-8), (i, t)
    # The entropy bonus is linear: ∂/∂H_t = −c·w_t.
    up, dn = ent.copy(), ent.copy()
    up[i, t] += h
    dn[i, t] -= h
    fd = (ref_loss(logp, up) - ref_loss(logp, dn)) / (2 * h)
    assert float(g_ent[i, t]) == pytest.approx(fd, rel=1e-5, abs=1e-8), (i, t)


def test_float32_matches_reference():
  inputs = make_inputs(seed=2)
  logp, old, adv, mask, ref, ent = inputs
  cfg = make_cfg(kind="dapo", dual_clip=3.0, kl_coef=0.1, entropy_coef=0.01)
  loss, _ = jax_loss(tuple(x.astype(np.float32) for x in inputs), cfg)
  want = np_reference(logp, old, adv, mask, "dapo", "token_mean", 3.0, ref, ent, 0.1, "k3", 0.01)
  assert loss.dtype == jnp.float32
  assert float(loss) == pytest.approx(want["loss/total"], rel=1e-5)


def test_denominators_count_the_final_mask():
  *_, mask, _, _ = make_inputs()
  d = losses.denominators(jnp.asarray(mask), make_cfg())
  assert float(d["tokens"]) == mask.sum() == 33
  assert float(d["seqs"]) == 7  # the all-masked row is not a sequence
  assert float(d["t_max"]) == 7
  assert float(losses.denominators(jnp.asarray(mask), make_cfg(norm_length=64))["t_max"]) == 64
  empty = losses.denominators(jnp.zeros((4, 5)), make_cfg())
  assert float(empty["tokens"]) == 0 and float(empty["seqs"]) == 0
