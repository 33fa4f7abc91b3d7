"""The papers' settings as config pieces: each recipe sets exactly its values."""

import pathlib

import numpy as np
import pytest

from grpo_jax import losses
from grpo_jax.config import base_config, experiment, recipes
from grpo_jax.config import files as config_file

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_recipes_set_the_paper_values():
  # name, kind, (ε_low, ε_high), aggregation (GRPO: HA-DW App. B), dual clip c (verl's
  # clip_ratio_c on its token loss: 3 by default, 10 in its DAPO recipes and the HA-DW authors'
  # DAPO script; verl's GSPO loss has none).
  for name, kind, eps, agg, dual in [
    ("grpo", "grpo", (0.2, 0.2), "seq_mean_token_mean", 3.0),
    ("gspo", "gspo", (3e-4, 4e-4), "seq_mean_token_mean", 0.0),
    ("dapo", "dapo", (0.2, 0.28), "token_mean", 10.0),
  ]:
    cfg = recipes.apply(base_config(), name)
    assert cfg.loss.kind == kind and cfg.loss.aggregation == agg
    assert losses.resolve_clip(cfg.loss) == eps
    assert cfg.loss.dual_clip == dual
    assert cfg.loss.kl_coef == 0.0
    assert cfg.optimizer.learning_rate == 1e-6 and cfg.optimizer.weight_decay == 0.1
    assert cfg.optimizer.grad_clip == 1.0
    assert (cfg.optimizer.b1, cfg.optimizer.b2) == (0.9, 0.999)  # verl's AdamW
    assert cfg.dapo.dynamic_sampling == (name == "dapo")
    assert cfg.dapo.overlong_penalty == (name == "dapo")
    assert cfg.dapo.filter_metric == "acc"  # verl's DAPO recipe: filter_groups.metric=acc


def test_shaping_only_in_dapo_and_base_optimizer_untouched():
  for name in ("grpo", "gspo"):
    cfg = base_config()
    cfg.dapo.overlong_penalty = cfg.dapo.overlong_filter = cfg.dapo.dynamic_sampling = True
    recipes.apply(cfg, name)
    assert not (cfg.dapo.overlong_penalty or cfg.dapo.overlong_filter)
    assert not cfg.dapo.dynamic_sampling
  assert base_config().optimizer.b2 == 0.99  # the quickstarts' value stays


@pytest.mark.parametrize("config", ["paper_hadw_qwen3_4b", "paper_hadw_qwen3_8b"])
def test_hadw_paper_eval_settings(config):
  """avg@16 at T = 1 (AIME25, AMC23; the default) or greedy (MATH500, Minerva, OlympiadBench)."""
  path = str(ROOT / "configs" / f"{config}.py")
  avg = config_file.load(path)
  assert (avg.eval.temperature, avg.eval.num_samples, tuple(avg.eval.ks)) == (1.0, 16, (1, 16))
  greedy = config_file.load(f"{path}:eval=greedy")
  assert (greedy.eval.temperature, greedy.eval.num_samples, tuple(greedy.eval.ks)) == (0.0, 1, (1,))
  for algo in ("grpo", "gspo", "dapo"):
    cfg = config_file.load(f"{path}:algo={algo}")
    assert cfg.dapo.overlong_penalty == (algo == "dapo")
    assert not cfg.dapo.dynamic_sampling  # Table 8: filtering = False
    assert cfg.optimizer.b2 == 0.999
  with pytest.raises(ValueError, match="eval must be"):
    config_file.load(f"{path}:eval=sampled")


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


def test_new_loss_pieces_set_the_papers_values():
  # name, kind, (ε_low, ε_high), aggregation: CISPO (MiniMax-M1, no floor; ScaleRL's cap 5 as
  # TRL documents it), SAPO (τ 1.0 / 1.05, verl's forced sequence mean), GMPO (±0.4 on log ρ).
  for piece, kind, eps, agg in [
    (recipes.cispo_loss, "cispo", (1.0, 4.0), "token_mean"),
    (recipes.gmpo_loss, "gmpo", (0.4, 0.4), "seq_mean_token_mean"),
    (recipes.sapo_loss, "sapo", (0.0, 0.0), "seq_mean_token_mean"),
  ]:
    cfg = piece(recipes.grpo_loss(base_config()))  # over a piece with a dual clip
    e = experiment.of(cfg.loss, "loss")
    assert (e.kind, e.aggregation, e.dual_clip) == (kind, agg, 0.0)
    assert losses.resolve_clip(e) == eps
  assert (e.sapo_tau_pos, e.sapo_tau_neg) == (1.0, 1.05)


def test_entropy_control_pieces_are_verls_losses():
  # The authors' scripts: Clip-Cov at clip_ratio 1 / 1, r = 2e-4 in (1, 5); KL-Cov β = 1 and
  # no clip (verl's kl_cov loss has none); token_mean; no dual clip in either verl loss.
  clip = experiment.of(recipes.clip_cov(recipes.dapo_loss(base_config())).loss, "loss")
  assert (clip.entropy_control, clip.clip_cov_ratio, clip.clip_cov_lb, clip.clip_cov_ub) == (
    "clip_cov", 2e-4, 1.0, 5.0,
  )  # fmt: skip
  assert losses.resolve_clip(clip) == (1.0, 1.0) and clip.dual_clip == 0.0
  cfg = recipes.kl_cov(recipes.dapo_loss(base_config()), ratio=2e-3)
  cfg.loss.num_minibatches = 2
  kl = experiment.of(cfg.loss, "loss")
  assert (kl.entropy_control, kl.kl_cov_ratio, kl.kl_cov_coef, kl.dual_clip) == (
    "kl_cov", 2e-3, 1.0, 0.0,
  )  # fmt: skip
  assert losses.resolve_clip(kl)[0] == 1.0 and 1 + losses.resolve_clip(kl)[1] > np.exp(20.0)
