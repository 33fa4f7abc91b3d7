"""``sampling.decode_slots`` through a training rollout: the same rows, fewer wasted decode
slot-steps, reported as ``rollout/decode_waste``."""

import pathlib

import jax
import numpy as np

from grpo_jax import data, models
from grpo_jax import sharding as shard_lib
from grpo_jax.config import files as config_file
from grpo_jax.rollout.one_stage import OneStageRollout, Policy, SampleSettings
from grpo_jax.sampling import waste

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _rollout(overrides):
  cfg = config_file.load(str(ROOT / "configs/tiny_test.py"), overrides)
  mesh = shard_lib.make_mesh(cfg.mesh, jax.devices()[:1])
  task = data.build_task(cfg)
  model_cfg = models.ModelConfig.from_config(cfg.model, vocab_size=len(task.tokenizer))
  graphdef, params = models.init_params(model_cfg, cfg.seed)
  policy = Policy(graphdef, params, mesh, SampleSettings.from_config(cfg.sampling))
  problems = task.train_problems(0, cfg.sampling.prompts_per_step)
  return OneStageRollout(cfg, task)(policy, problems, jax.random.PRNGKey(3))


def test_decode_slots_keep_the_rows_and_cut_the_waste():
  plain = _rollout([])
  cont = _rollout(["sampling.decode_slots=4"])
  lengths = plain.lengths_N
  assert 1 <= lengths.min() < lengths.max() == 12  # some rows stop early, some run to T = 12
  np.testing.assert_array_equal(cont.tokens_NxL, plain.tokens_NxL)
  np.testing.assert_allclose(cont.sample_logps_NxT, plain.sample_logps_NxT, atol=1e-5)
  np.testing.assert_array_equal(cont.rewards_N, plain.rewards_N)
  want_plain = waste.decode_waste(lengths, waste.plain_steps(lengths))
  want_cont = waste.decode_waste(lengths, waste.continuous_steps(lengths, 4), 4)
  assert plain.metrics["rollout/decode_waste"] == want_plain
  assert cont.metrics["rollout/decode_waste"] == want_cont < want_plain
