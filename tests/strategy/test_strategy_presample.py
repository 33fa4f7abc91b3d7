"""Presampled previews (METHODS §5): the stored file round-trips, an interrupted write resumes
to the same file, and a corrupted or mismatched file fails loudly instead of misaligning."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import dataclasses
import json
import pathlib
import shutil

import datasets
import jax
import numpy as np
import pytest

from grpo_jax import models
from grpo_jax import sharding as shard_lib
from grpo_jax.config import files as config_file
from grpo_jax.data import CountdownTask
from grpo_jax.sampling.policy import Policy, SampleSettings
from grpo_jax.strategy import presample as presample_lib
from grpo_jax.strategy import previews as two_stage
from grpo_jax.strategy.presample import (
  PresampleError,
  PresamplePlan,
  load_presample,
  write_presample,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
NUM, CHUNK = 16, 8


@pytest.fixture(scope="module")
def setup():
  cfg = config_file.load(
    str(ROOT / "configs/tiny_test.py"), ["strategy.enabled=true", "strategy.num_previews=2"]
  )
  task = CountdownTask.from_config(cfg)
  model_cfg = models.ModelConfig.from_config(cfg.model, vocab_size=len(task.tokenizer))
  graphdef, params = models.init_params(model_cfg, 0)
  mesh = shard_lib.make_mesh(cfg.mesh, devices=jax.devices()[:1])
  spec = two_stage.PreviewSpec.from_config(cfg.strategy, task.tokenizer)
  return cfg, task, graphdef, params, mesh, spec


def _write(setup, path, **kw):
  cfg, task, graphdef, params, mesh, spec = setup
  policy = Policy(graphdef, params, mesh, SampleSettings.from_config(cfg.sampling))
  plan = PresamplePlan(NUM, CHUNK, seed=0, progress=False)
  return write_presample(path, policy, task, spec, plan, log=lambda *_: None, **kw)


@pytest.fixture(scope="module")
def stored(setup, tmp_path_factory):
  return _write(setup, tmp_path_factory.mktemp("presample") / "p")


def test_round_trip_equals_a_direct_draw(setup, stored):
  cfg, task, graphdef, params, mesh, spec = setup
  previews = load_presample(stored, spec, NUM)
  assert len(previews) == NUM
  for i in range(NUM // CHUNK):
    problems = task.train_problems(i * CHUNK, CHUNK)
    context, mask = two_stage.make_context(*task.encode_prompts(problems), spec)
    direct = two_stage.draw_previews(
      Policy(graphdef, params, mesh, SampleSettings.from_config(cfg.sampling)),
      context,
      mask,
      jax.random.fold_in(presample_lib.presample_key(0), i),
      spec,
      task.decode,
    )
    got = previews.previews(task, problems)
    for k, want in vars(direct).items():
      np.testing.assert_allclose(getattr(got, k), want, atol=1e-6)


def test_interrupted_write_resumes_to_the_same_file(setup, stored, tmp_path, monkeypatch):
  calls = []
  real = presample_lib.draw_previews

  def fail_second(*args, **kw):
    calls.append(1)
    if len(calls) == 2:
      raise KeyboardInterrupt
    return real(*args, **kw)

  monkeypatch.setattr(presample_lib, "draw_previews", fail_second)
  with pytest.raises(KeyboardInterrupt):
    _write(setup, tmp_path / "p")
  assert (tmp_path / "p/parts/00000/done").exists() and not (tmp_path / "p/meta.json").exists()
  assert not (tmp_path / "p/parts/00001/done").exists()
  monkeypatch.setattr(presample_lib, "draw_previews", real)
  _write(setup, tmp_path / "p")
  a = datasets.load_from_disk(str(tmp_path / "p/data")).to_dict()
  b = datasets.load_from_disk(str(stored / "data")).to_dict()
  assert a == b


def _replace_data(path, ds) -> None:
  ds.save_to_disk(str(path / "data.new"))  # a dataset cannot overwrite its own files
  shutil.rmtree(path / "data")
  (path / "data.new").rename(path / "data")


def _copy(stored, tmp_path) -> pathlib.Path:
  dst = tmp_path / "copy"
  shutil.copytree(stored, dst)
  return dst


def test_missing_column_is_named(setup, stored, tmp_path):
  spec = setup[-1]
  path = _copy(stored, tmp_path)
  _replace_data(path, datasets.load_from_disk(str(path / "data")).remove_columns("preview_ids"))
  with pytest.raises(PresampleError, match="missing column.*preview_ids"):
    load_presample(path, spec, NUM)


def test_wrong_prompt_count_is_an_error(setup, stored, tmp_path):
  spec = setup[-1]
  with pytest.raises(PresampleError, match=f"holds {NUM} prompts, the run needs {NUM + 1}"):
    load_presample(stored, spec, NUM + 1)
  path = _copy(stored, tmp_path)  # rows dropped behind meta.json's back
  _replace_data(path, datasets.load_from_disk(str(path / "data")).select(range(NUM - 3)))
  with pytest.raises(PresampleError, match="corrupted"):
    load_presample(path, spec, NUM - 3)


def test_unreadable_or_incomplete_file_is_an_error(setup, stored, tmp_path):
  spec = setup[-1]
  path = _copy(stored, tmp_path)
  for f in (path / "data").glob("*.arrow"):
    f.write_bytes(b"not arrow")
  with pytest.raises(PresampleError, match="cannot read"):
    load_presample(path, spec, NUM)
  with pytest.raises(PresampleError, match="meta.json missing"):
    load_presample(tmp_path / "nowhere", spec, NUM)


def test_other_settings_or_prompts_are_errors(setup, stored):
  cfg, task, _, _, _, spec = setup
  with pytest.raises(PresampleError, match="num_previews"):
    load_presample(stored, dataclasses.replace(spec, num_previews=3), NUM)
  with pytest.raises(PresampleError, match="max_preview_tokens"):
    load_presample(stored, dataclasses.replace(spec, max_preview_tokens=2), NUM)
  previews = load_presample(stored, spec, NUM)
  other = CountdownTask(
    cfg.data.num_numbers, cfg.data.max_number, cfg.data.max_target, cfg.data.eval_size, seed=1
  )
  with pytest.raises(PresampleError, match="is for prompt"):
    previews.previews(other, other.train_problems(0, 4))
  with pytest.raises(PresampleError, match="no prompt at stream position"):
    previews.previews(task, task.train_problems(NUM, 1))
  assert json.loads((stored / "meta.json").read_text())["num_prompts"] == NUM


@pytest.mark.parametrize(
  "prompts,dapo,want",
  [
    # B = 4, G = 2 on 8 devices: ceil(1.3·4) = 6 prompts are 12 rows, rounded up to 8 prompts
    # (16 rows) per round, × 3 rounds = 24 per step (ceil(1.3·4)·3 = 18 is too few).
    (4, {"dynamic_sampling": True, "oversample": 1.3, "max_sampling_rounds": 3}, 24),
    (3, {}, 4),  # one round: B = 3 prompts are 6 rows, rounded up to 4 prompts (8 rows)
  ],
)
def test_presample_budget_covers_what_dynamic_sampling_draws(
  tmp_path, monkeypatch, prompts, dapo, want, rollout_batch
):
  """``prepare`` writes and opens a presample of steps × (prompts one step can draw)."""
  import types

  from grpo_jax.rollout import dynamic_sampling as ds
  from grpo_jax.rollout import two_stage as sr

  cfg = config_file.load(
    str(ROOT / "configs/tiny_test.py"), ["strategy.enabled=true", "strategy.num_previews=2"]
  ).with_overrides(
    {
      "steps": 5,
      "sampling.prompts_per_step": prompts,
      "sampling.group_size": 2,
      **{f"dapo.{k}": v for k, v in dapo.items()},
    }
  )
  mesh = types.SimpleNamespace(shape={"data": 4, "fsdp": 2})  # 8 devices
  asked = {}
  monkeypatch.setattr(
    sr,
    "write_presample",
    lambda path, policy, task, spec, plan, **kw: asked.update(w=plan.num_prompts),
  )
  monkeypatch.setattr(sr, "load_presample", lambda path, spec, num: asked.update(l=num))
  rollout = sr.TwoStageRollout.__new__(sr.TwoStageRollout)
  rollout.cfg, rollout.task, rollout.spec = cfg, None, None
  rollout.prepare(Policy(None, None, mesh, None), tmp_path, 0, log=lambda *_: None)
  assert asked == {"w": cfg.steps * want, "l": cfg.steps * want}
  # The stream positions one step of dynamic_sampling reads (all groups uninformative, so
  # every round runs) lie within that per-step budget.
  read = []

  def problems_fn(start, count):
    read.extend(range(start, start + count))
    return list(range(start, start + count))

  def rollout_fn(problems, rng):
    n = 2 * len(problems)
    ids = np.repeat(np.arange(len(problems), dtype=np.int32), 2)
    return rollout_batch(
      tokens_NxL=np.ones((n, 3), np.int32), rewards_N=np.ones(n, np.float32), group_ids_N=ids
    )

  _, consumed = ds.sample_batch(rollout_fn, problems_fn, 0, jax.random.PRNGKey(0), cfg, 8)
  assert max(read) + 1 == consumed == want


def test_the_launcher_imports_datasets_only_to_read_or_write_a_presample():
  """``datasets`` (0.5 s of pandas and pyarrow) is imported where a presample is written or
  read, not by every launcher process: the launcher and the loop leave it unimported."""
  import subprocess
  import sys

  code = (
    "import sys\nimport grpo_jax.runs.launcher, grpo_jax.train.modes\n"
    "print(sorted(m for m in ('datasets', 'pandas') if m in sys.modules))"
  )
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
  assert out.stdout.split() == ["[]"], out.stdout
