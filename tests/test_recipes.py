"""The papers' settings as config pieces: each recipe sets exactly its values."""

import pytest

from grpo_jax import losses, recipes
from grpo_jax.config import base_config


def test_recipes_set_the_paper_values():
  for name, kind, eps, agg in [
    ("grpo", "grpo", (0.2, 0.2), "token_mean"),
    ("gspo", "gspo", (3e-4, 4e-4), "seq_mean_token_mean"),
    ("dapo", "dapo", (0.2, 0.28), "token_mean"),
  ]:
    cfg = recipes.apply(base_config(), name)
    assert cfg.loss.kind == kind and cfg.loss.aggregation == agg
    assert losses.resolve_clip(cfg.loss) == eps
    assert cfg.loss.kl_coef == 0.0
    assert cfg.optimizer.learning_rate == 1e-6 and cfg.optimizer.weight_decay == 0.1
    assert cfg.optimizer.grad_clip == 1.0
    assert cfg.dapo.dynamic_sampling == (name == "dapo")
    assert cfg.dapo.overlong_penalty == (name == "dapo")


def test_dapo_pieces():
  cfg = base_config()
  cfg.sampling.max_new_tokens = 20
  recipes.dapo(cfg, overlong_filter=True)
  assert cfg.dapo.overlong_buffer == 4 and cfg.dapo.overlong_filter
  assert cfg.dapo.oversample == 3.0 and cfg.dapo.max_sampling_rounds == 10
  assert not cfg.dapo.require_full_batch


def test_unknown_recipe_lists_the_valid_ones():
  with pytest.raises(ValueError, match="dapo, grpo, gspo"):
    recipes.apply(base_config(), "ppo")
