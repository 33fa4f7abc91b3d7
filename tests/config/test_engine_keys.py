"""``sampling.engine`` and the ``auto`` rollout correction: resolved at load, bad combinations
fail at load naming the keys, and the key picks the engine the rollout samples with (the
engine's own behaviour: ``tests/sampling/test_vllm_engine.py``, without vLLM installed here)."""

import pathlib

import pytest

from grpo_jax.config import files as config_file
from grpo_jax.sampling import engine as engine_lib
from grpo_jax.sampling.vllm_engine import VllmEngine

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load(*overrides):
  return config_file.load(str(ROOT / "configs/tiny_test.py"), list(overrides))


@pytest.fixture
def hf_dir(tmp_path):
  (tmp_path / "config.json").write_text("{}")
  return f"model.hf_path={tmp_path}"


def test_auto_correction_is_none_on_our_sampler_and_token_tis_on_an_external_engine(hf_dir):
  assert _load().loss.rollout_correction == "none"
  assert _load(hf_dir).sampling.engine == "jax"
  assert _load(hf_dir, "sampling.engine=vllm").loss.rollout_correction == "token_tis"
  for kind in ("none", "seq_mis"):  # an explicit choice stays
    cfg = _load(hf_dir, "sampling.engine=vllm", f"loss.rollout_correction={kind}")
    assert cfg.loss.rollout_correction == kind


def test_the_key_picks_the_engine(hf_dir):
  cfg = _load(hf_dir)
  assert isinstance(engine_lib.build_engine(cfg), engine_lib.JaxEngine)
  cfg = _load(hf_dir, "sampling.engine=vllm", "model.dtype=bfloat16")
  engine = engine_lib.build_engine(cfg)
  assert isinstance(engine, VllmEngine) and engine.llm is None  # vLLM is built at first use
  assert (engine.path, engine.dtype) == (cfg.model.hf_path, "bfloat16")


@pytest.mark.parametrize(
  "overrides, message",
  [
    (["sampling.engine=sglang"], r"sampling.engine = 'sglang' is not one of \['jax', 'vllm'\]"),
    (["sampling.engine=vllm"], r"sampling.engine = 'vllm' needs model.hf_path"),
    (["sampling.engine=vllm", "model.hf_path=/m.gguf"], r"Hugging Face checkpoint directory"),
    (["loss.rollout_correction=tis"], r"loss.rollout_correction = 'tis' is not one of"),
  ],
)
def test_bad_engine_config_fails_at_load(overrides, message):
  with pytest.raises(ValueError, match=message):
    _load(*overrides)


@pytest.mark.parametrize(
  "overrides, message",
  [
    (["rollout.off_policy_steps=1"], r"rollout.off_policy_steps = 1 needs sampling.engine"),
  ],
)
def test_engine_limits_fail_at_load(hf_dir, overrides, message):
  with pytest.raises(ValueError, match=message):
    _load(hf_dir, "sampling.engine=vllm", *overrides)
