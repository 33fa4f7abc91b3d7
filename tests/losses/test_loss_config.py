"""Every `loss` config key reaches the math (research notes §7 pitfall 10), registries reject
unknown names with the valid ones listed, and misuse raises a clear error."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import losses
from grpo_jax.config import base_config, experiment
from grpo_jax.losses import entropy_control


def make_inputs(seed=0):
  rng = np.random.default_rng(seed)
  n_rows, width = 8, 7
  lengths = np.array([7, 5, 3, 0, 6, 1, 7, 4])
  mask = (np.arange(width)[None] < lengths[:, None]).astype(np.float32)
  logp = -rng.uniform(0.05, 3.0, (n_rows, width)).astype(np.float32)
  # Log-ratios spread over ±2.5 so every clip range and the 0.5 log-clamp below bite.
  old = (logp + rng.uniform(-2.5, 2.5, logp.shape)).astype(np.float32)
  adv = np.array([1.0, -1.0, 0.5, 2.0, -0.7, 1.2, -1.5, 0.8], np.float32)
  ref = (logp + rng.normal(size=logp.shape)).astype(np.float32)
  ent = rng.uniform(0.0, 2.0, logp.shape).astype(np.float32)
  return logp, old, adv, mask, ref, ent


def make_cfg(**kw):
  """The validated ``loss`` group, as the math receives it (bad values fail here)."""
  cfg = base_config().loss
  for k, v in kw.items():
    cfg[k] = v
  return experiment.of(cfg, "loss")


def run(cfg, inputs=None):
  """(loss, d loss / d logps) with KL and entropy inputs always given, and the entropy
  control's tokens selected on the whole batch."""
  logp, old, adv, mask, ref, ent = make_inputs() if inputs is None else inputs
  denoms = losses.denominators(mask, cfg)
  control = entropy_control.select(logp, old, adv, mask, cfg, jax.random.PRNGKey(0))
  terms = losses.Terms(ref, ent, control_NxT=control)
  f = lambda lp: losses.policy_loss(lp, old, adv, mask, cfg, denoms, terms)[0]
  loss, grad = jax.value_and_grad(f)(logp)
  return float(loss), np.asarray(grad)


def assert_differs(a, b):
  assert a[0] != pytest.approx(b[0], rel=1e-4) or not np.allclose(a[1], b[1], rtol=1e-4)


def assert_all_differ(cfgs):
  outs = [run(c) for c in cfgs]
  for i in range(len(outs)):
    for j in range(i):
      assert_differs(outs[i], outs[j])


def test_key_kind():
  assert_all_differ([make_cfg(kind=k) for k in losses.LOSS_KINDS])


def test_keys_sapo_tau():
  for key in ("sapo_tau_pos", "sapo_tau_neg"):
    assert_all_differ([make_cfg(kind="sapo", **{key: t}) for t in (1.0, 1.05, 2.0)])


def test_key_entropy_control():
  # kl_cov acts off-policy only (μ > 1 in training; here old ≠ θ); r = 0.1 picks 4 of 40 tokens.
  cfgs = [
    make_cfg(num_iterations=2, entropy_control=c, clip_cov_ratio=0.1, clip_cov_lb=0.0)
    if c == "clip_cov"
    else make_cfg(
      num_iterations=2, entropy_control=c, **({"kl_cov_ratio": 0.1} if c == "kl_cov" else {})
    )
    for c in losses.CONTROLS
  ]
  assert_all_differ(cfgs)


def test_keys_clip_cov():
  clip_cov = lambda **kw: make_cfg(entropy_control="clip_cov", **kw)
  assert_all_differ([clip_cov(clip_cov_lb=-10.0, clip_cov_ratio=r) for r in (2e-4, 0.1, 0.3)])
  # r = 1: every candidate dropped, so the band decides.
  assert_all_differ([clip_cov(clip_cov_ratio=1.0, clip_cov_lb=b) for b in (1.0, -0.5, 0.2)])
  assert_all_differ(
    [clip_cov(clip_cov_ratio=1.0, clip_cov_lb=-10.0, clip_cov_ub=b) for b in (5.0, 0.5, 0.8)]
  )


def test_keys_kl_cov():
  kl_cov = lambda **kw: make_cfg(entropy_control="kl_cov", num_iterations=2, **kw)
  assert_all_differ([kl_cov(kl_cov_ratio=r) for r in (2e-4, 0.1, 0.5)])
  assert_all_differ([kl_cov(kl_cov_ratio=0.1, kl_cov_coef=c) for c in (1.0, 0.1, 3.0)])


def test_key_aggregation():
  assert_all_differ([make_cfg(aggregation=a) for a in losses.AGGREGATIONS])


def test_key_clip_low():
  assert_all_differ([make_cfg(clip_low=e) for e in (-1.0, 0.1, 0.5)])


def test_key_clip_high():
  assert_all_differ([make_cfg(clip_high=e) for e in (-1.0, 0.1, 0.5)])


def test_key_dual_clip():
  assert_all_differ([make_cfg(dual_clip=c) for c in (0.0, 1.5, 3.0)])


def test_key_kl_coef():
  assert_all_differ([make_cfg(kl_coef=b) for b in (0.0, 0.1, 1.0)])


def test_key_kl_estimator():
  assert_all_differ([make_cfg(kl_coef=0.1, kl_estimator=e) for e in ("k1", "k2", "k3")])


def test_key_entropy_coef():
  assert_all_differ([make_cfg(entropy_coef=c) for c in (0.0, 0.01, 0.1)])


def test_key_norm_length():
  agg = "seq_mean_token_sum_norm"
  assert_all_differ([make_cfg(aggregation=agg, norm_length=n) for n in (0, 16, 64)])


def test_key_ratio_log_clamp():
  assert_all_differ([make_cfg(ratio_log_clamp=c) for c in (20.0, 0.5)])
  assert_all_differ([make_cfg(kind="gspo", ratio_log_clamp=c) for c in (20.0, 0.05)])


def test_trainer_keys_do_not_reach_the_loss():
  # num_iterations and micro_batch_size drive the trainer's loops, not this function.
  base_loss, base_grad = run(make_cfg())
  for cfg in (make_cfg(num_iterations=4), make_cfg(micro_batch_size=2)):
    loss, grad = run(cfg)
    assert loss == base_loss
    np.testing.assert_array_equal(grad, base_grad)


def test_every_loss_key_is_covered_above():
  covered = {
    "kind", "aggregation", "clip_low", "clip_high", "dual_clip", "kl_coef", "kl_estimator",
    "entropy_coef", "norm_length", "ratio_log_clamp", "num_iterations", "micro_batch_size",
    "sapo_tau_pos", "sapo_tau_neg", "entropy_control", "clip_cov_ratio", "clip_cov_lb",
    "clip_cov_ub", "kl_cov_ratio", "kl_cov_coef",
    "num_minibatches",  # flipped in tests/train/test_update_iterations.py (a trainer key)
    "share_prompt",  # flipped in tests/models/test_shared_prompt.py (a trainer key)
    "length_buckets",  # flipped in tests/train/test_update_width.py (the update's width)
    "pack", "pack_width",  # flipped in tests/train/test_packing.py (the update's forward rows)
    # flipped in tests/losses/test_rollout_correction.py
    "rollout_correction", "rollout_is_cap", "rollout_rs_low", "rollout_rs_high", "rollout_veto",
  }  # fmt: skip
  assert set(base_config().loss.keys()) == covered


def test_resolve_clip_defaults_and_overrides():
  assert losses.resolve_clip(make_cfg(kind="grpo")) == (0.2, 0.2)
  assert losses.resolve_clip(make_cfg(kind="dapo")) == (0.2, 0.28)
  assert losses.resolve_clip(make_cfg(kind="gspo")) == (3e-4, 4e-4)
  assert losses.resolve_clip(make_cfg(kind="gspo", clip_high=0.3)) == (3e-4, 0.3)
  assert losses.resolve_clip(make_cfg(clip_low=0.0, clip_high=0.0)) == (0.0, 0.0)
  assert losses.resolve_clip(make_cfg(clip_low=1.0)) == (1.0, 0.2)  # a floor of 0
  assert losses.resolve_clip(make_cfg(kind="gmpo", clip_low=1.5)) == (1.5, 0.4)  # log space
  with pytest.raises(ValueError, match="clip_low"):  # at load; the math trusts the group
    make_cfg(clip_low=1.5)


@pytest.mark.parametrize(
  "key,value,valid",
  [
    ("kind", "ppo", "'cispo', 'dapo', 'gmpo', 'grpo', 'gspo', 'sapo'"),
    ("entropy_control", "cov", "'clip_cov', 'kl_cov', 'none'"),
    ("aggregation", "mean", "'seq_mean_token_mean'"),
    ("kl_estimator", "k4", "'k1', 'k2', 'k3'"),
  ],
)
def test_unknown_names_list_the_valid_ones(key, value, valid):
  # The validated group rejects the name before the registry lookup would.
  with pytest.raises(ValueError, match=rf"loss.{key} = '{value}' is not one of \[.*{valid}"):
    run(make_cfg(**{key: value}))


def test_registry_names():
  assert set(losses.LOSS_KINDS) == {"grpo", "dapo", "gspo", "cispo", "sapo", "gmpo"}
  assert set(losses.CONTROLS) == {"none", "clip_cov", "kl_cov"}
  assert set(losses.AGGREGATIONS) == {
    "token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm",
  }  # fmt: skip
  with pytest.raises(ValueError, match="valid: k1, k2, k3"):
    losses.kl_penalty(jnp.zeros((1, 1)), jnp.zeros((1, 1)), "kl")


def test_missing_inputs_and_bad_values_raise():
  logp, old, adv, mask, ref, ent = make_inputs()
  cfg = make_cfg(kl_coef=0.1)
  d = losses.denominators(mask, cfg)
  with pytest.raises(ValueError, match="kl_coef.*ref_logps_NxT"):
    losses.policy_loss(logp, old, adv, mask, cfg, d)
  with pytest.raises(ValueError, match="entropy_coef.*entropy_NxT"):
    losses.policy_loss(logp, old, adv, mask, make_cfg(entropy_coef=0.1), d)
  for bad in (0.5, 1.0, -2.0):
    with pytest.raises(ValueError, match="dual_clip"):
      losses.policy_loss(logp, old, adv, mask, make_cfg(dual_clip=bad), d)
  with pytest.raises(ValueError, match="ratio_log_clamp"):
    losses.policy_loss(logp, old, adv, mask, make_cfg(ratio_log_clamp=0.0), d)
  with pytest.raises(ValueError, match="norm_length"):
    losses.denominators(mask, make_cfg(norm_length=-1))


def test_no_reference_means_no_kl_metric_and_works_under_jit():
  logp, old, adv, mask, ref, ent = make_inputs()
  cfg = make_cfg(kind="gspo", aggregation="seq_mean_token_mean")

  @jax.jit
  def step(lp, mask):
    d = losses.denominators(mask, cfg)
    return losses.policy_loss(lp, old, adv, mask, cfg, d)

  loss, aux = step(logp, mask)
  eager, eager_aux = losses.policy_loss(logp, old, adv, mask, cfg, losses.denominators(mask, cfg))
  assert "loss/kl" not in aux and float(aux["loss/entropy"]) == 0.0  # no reference, no KL
  assert float(loss) == pytest.approx(float(eager), rel=1e-6)
  assert set(aux) == set(eager_aux)
