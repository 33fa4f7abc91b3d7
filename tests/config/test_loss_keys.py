"""The loss kinds' and entropy controls' keys fail at load when a value is bad or reaches nothing,
naming the key and what it needs; their good values load."""

import pytest

from grpo_jax.config import files as config_file
from tests.config.test_config import ROOT

TINY = str(ROOT / "configs/tiny_test.py")


@pytest.mark.parametrize(
  "overrides,needle",
  [
    (("loss.entropy_control=cov",), r"loss.entropy_control = 'cov' is not one of \['clip_cov', "),
    (("loss.clip_low=1.5",), r"loss.clip_low = 1.5 must be <= 1 for loss.kind = 'grpo'"),
    (("loss.kind=cispo", "loss.dual_clip=3.0"), r"loss.dual_clip = 3.0 .*'cispo' has none"),
    (("loss.kind=gmpo", "loss.dual_clip=3.0"), r"loss.dual_clip = 3.0 .*'gmpo' has none"),
    (("loss.kind=sapo", "loss.clip_high=0.3"), r"loss.clip_high = 0.3: loss.kind = 'sapo'"),
    (("loss.sapo_tau_pos=2.0",), r"loss.sapo_tau_pos = 2.0 needs loss.kind = 'sapo'"),
    (("loss.kind=sapo", "loss.sapo_tau_neg=0"), r"loss.sapo_tau_neg = 0.0 must be > 0"),
    (("loss.clip_cov_ratio=0.1",), r"loss.clip_cov_ratio = 0.1 needs loss.entropy_control ="),
    (("loss.kl_cov_coef=0.1",), r"loss.kl_cov_coef = 0.1 needs loss.entropy_control = 'kl_cov'"),
    (
      ("loss.entropy_control=kl_cov", "loss.clip_cov_lb=0.5"),
      r"loss.clip_cov_lb = 0.5 needs loss.entropy_control = 'clip_cov', not 'kl_cov'",
    ),
    (
      ("loss.entropy_control=clip_cov", "loss.clip_cov_lb=6.0"),
      r"loss.clip_cov_lb = 6.0 must be below loss.clip_cov_ub = 5.0",
    ),
    (("loss.entropy_control=clip_cov", "loss.clip_cov_ratio=0"), r"clip_cov_ratio = 0.0 must be"),
    (("loss.entropy_control=kl_cov",), r"'kl_cov' penalises .* set loss.num_minibatches or"),
    (
      ("loss.entropy_control=kl_cov", "loss.num_iterations=2", "loss.kl_cov_coef=0"),
      r"loss.kl_cov_coef = 0.0 must be > 0",
    ),
  ],
)
def test_bad_values_fail_at_load(overrides, needle):
  with pytest.raises(ValueError, match=needle):
    config_file.load(TINY, list(overrides))


@pytest.mark.parametrize(
  "overrides",
  [
    ("loss.kind=cispo",),
    ("loss.kind=gmpo", "loss.clip_low=1.5", "loss.aggregation=seq_mean_token_mean"),
    ("loss.kind=sapo", "loss.sapo_tau_pos=0.5", "loss.sapo_tau_neg=2.0"),
    ("loss.clip_low=1.0",),  # a ratio floor of 0 (verl's Clip-Cov recipe)
    ("loss.entropy_control=clip_cov", "loss.clip_cov_ratio=0.01", "loss.clip_cov_ub=2.0"),
    ("loss.entropy_control=kl_cov", "loss.num_minibatches=2", "loss.kl_cov_ratio=0.002"),
  ],
)
def test_good_values_load(overrides):
  e = config_file.load(TINY, list(overrides))
  for override in overrides:
    key, value = override.removeprefix("loss.").split("=")
    assert e.loss[key] == type(e.loss[key])(value), key
