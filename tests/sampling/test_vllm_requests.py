"""The vLLM engine's requests and sharing, without running vLLM: no two completions of a call
share a seed, and one engine per process, sized for the larger of a step's and an evaluation
call's rows (``grpo_jax.sampling.vllm_engine``, ``grpo_jax.sampling.engine``)."""

import pathlib

import numpy as np
import pytest

from grpo_jax.config import files as config_file
from grpo_jax.sampling import engine as engine_lib
from grpo_jax.sampling import vllm_engine
from grpo_jax.sampling.vllm_engine import VllmEngine, completion_seeds, request_seeds

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("N, G", [(64, 8), (32, 4), (48, 16), (7, 1), (128, 2), (16, 16)])
def test_no_two_completions_of_a_call_share_a_seed(N, G):
  base = 2**31 - 2 - N  # the largest base the engine draws
  seeds_N = completion_seeds(request_seeds(base, N // G, G), G)
  assert seeds_N.shape == (N,)
  assert len(set(seeds_N.tolist())) == N
  assert seeds_N.min() == base and seeds_N.max() == base + N - 1 < 2**31 - 1  # int32
  # Request i seeded base + i (vLLM's children then base + i + j) repeats seeds for G > 1.
  old_N = completion_seeds(base + np.arange(N // G), G)
  assert len(set(old_N.tolist())) == (N if G == 1 else N // G + G - 1)


def test_child_seeds_follow_vllms_parallel_sampling():
  """vLLM's own rule (``ParentRequest``), read from its source where vLLM is installed."""
  import importlib.util

  spec = importlib.util.find_spec("vllm")
  if spec is None:
    pytest.skip("needs vLLM (the .[vllm] extra)")
  source = pathlib.Path(spec.submodule_search_locations[0], "v1/engine/parallel_sampling.py")
  assert "child_sampling_params.seed = seed + index" in source.read_text()


def _load(tmp_path, *overrides):
  (tmp_path / "config.json").write_text("{}")
  args = [f"model.hf_path={tmp_path}", "sampling.engine=vllm", *overrides]
  return config_file.load(str(ROOT / "configs/tiny_test.py"), args)


@pytest.mark.parametrize(
  "B, G, n, rows",
  [(8, 4, 4, 32), (4, 8, 4, 32), (3, 8, 16, 48), (4, 8, 5, 32), (2, 4, 64, 128)],
)
def test_the_engine_holds_a_step_or_an_evaluation_call(tmp_path, B, G, n, rows):
  cfg = _load(tmp_path, f"sampling.prompts_per_step={B}", f"sampling.group_size={G}",
              f"eval.num_samples={n}", "eval.num_problems=64")  # fmt: skip
  assert engine_lib.rows_per_call(cfg) == rows
  assert engine_lib.eval_chunk(B, G, n) * n <= rows


def test_one_engine_per_process(tmp_path, monkeypatch):
  monkeypatch.setattr(vllm_engine, "_PROCESS_ENGINES", {})
  small = _load(tmp_path, "sampling.prompts_per_step=2", "sampling.group_size=4")
  large = _load(tmp_path, "sampling.prompts_per_step=4", "sampling.group_size=8")
  train = engine_lib.build_engine(small)
  assert isinstance(train, VllmEngine) and train.llm is None and train.rows == 8
  evaluation = engine_lib.build_engine(large)  # another caller, more rows: the cache widens
  assert evaluation is train and train.rows == 32
  assert engine_lib.build_engine(small) is train and train.rows == 32
  other = engine_lib.build_engine(_load(tmp_path, "model.dtype=bfloat16"))
  assert other is not train  # another dtype is another model
