"""The typed Experiment: built at load; a bad value fails there naming the key and its choices."""

import dataclasses
import os
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from grpo_jax import advantages as adv_lib
from grpo_jax import losses
from grpo_jax.config import base_config, experiment, finalize
from grpo_jax.config import files as config_file
from tests.config.test_config import ROOT

TINY = str(ROOT / "configs/tiny_test.py")
STRATEGY = str(ROOT / "configs/tiny_sweep.py")


def test_view_fields_are_the_config_keys():
  cfg = base_config()
  for name, cls in experiment.GROUPS.items():
    assert {f.name for f in dataclasses.fields(cls)} == set(cfg[name].keys()), name
  assert set(experiment.GROUPS) | {"seed", "steps"} == set(cfg.keys())


def test_choices_are_the_registries():
  import importlib

  assert set(experiment.REGISTRIES) == set(experiment.CHOICES) - {"model.remat", "strategy.source"}
  for key, where in experiment.REGISTRIES.items():
    module, _, table = where.rpartition(".")
    names = getattr(importlib.import_module(module), table)
    assert tuple(sorted(names)) == experiment.CHOICES[key], key


def test_build_gives_frozen_typed_groups():
  e = config_file.load(TINY)
  assert isinstance(e.loss, experiment.Loss) and e.loss.kind == "grpo"
  assert isinstance(e.advantage.offset_coef, float) and e.eval.ks == (1, 4)
  assert "hadw" in e and e["hadw"] is e.hadw and e.checkpoint.every == 1
  with pytest.raises(dataclasses.FrozenInstanceError):
    e.loss.kind = "dapo"


@pytest.mark.parametrize(
  "override,needle",
  [
    # Unknown enum values: the key and every valid choice.
    ("advantage.baseline=subgroup_offst", "advantage.baseline.*'group', 'rloo', 'subgroup_offset'"),
    ("advantage.scale=batches", "advantage.scale.*'batch'"),
    ("advantage.scale_of=reward", "advantage.scale_of.*'advantages', 'rewards'"),
    ("advantage.offset_shuffle_scope=job", "advantage.offset_shuffle_scope.*'batch', 'prompt'"),
    ("data.task=gsm8k", "data.task.*'countdown', 'dataset', 'math'"),
    ("model.preset=huge", "model.preset = 'huge' is not one of"),
    ("model.family=gpt2", "model.family.*'llama', 'olmo3', 'qwen3'"),
    ("hadw.anchor=kalmann", "hadw.anchor.*'fixed', 'kalman', 'window'"),
    ("hadw.sigma_of=belief", "hadw.sigma_of.*'beliefs'"),
    ("loss.kind=ppo", "loss.kind.*'cispo', 'dapo', 'gmpo', 'grpo', 'gspo', 'sapo'"),
    ("loss.aggregation=mean", "loss.aggregation.*'token_mean'"),
    ("loss.kl_estimator=k4", "loss.kl_estimator.*'k3'"),
    ("strategy.source=cache", "strategy.source.*'online', 'presampled'"),
    ("model.remat=some", "model.remat.*'dots_saveable', 'dots_with_no_batch_dims_saveable'"),
    ("model.dtype=fp16", "model.dtype"),
    ("mesh.train_rules=fsdp", "mesh.train_rules.*'replicated'"),
    # Ranges and counts.
    ("sampling.group_size=0", r"sampling.group_size = 0 must be >= 1"),
    ("loss.num_iterations=0", r"loss.num_iterations = 0 must be >= 1"),
    ("loss.num_minibatches=-1", r"loss.num_minibatches = -1 must be >= 1"),
    ("loss.micro_batch_size=-2", r"loss.micro_batch_size"),
    ("loss.clip_low=-0.5", r"loss.clip_low = -0.5 must be >= 0 \(or -1.0\)"),
    ("loss.clip_low=1.5", r"loss.clip_low = 1.5 must be <= 1 for loss.kind = 'grpo'"),
    ("loss.dual_clip=0.5", r"loss.dual_clip = 0.5 must be > 1 \(or 0.0\)"),
    ("loss.ratio_log_clamp=0", r"loss.ratio_log_clamp"),
    ("loss.norm_length=-1", r"loss.norm_length"),
    ("dapo.oversample=0.5", r"dapo.oversample = 0.5 must be >= 1"),
    ("dapo.max_sampling_rounds=0", r"dapo.max_sampling_rounds = 0 must be >= 1"),
    ("strategy.max_preview_tokens=0", r"strategy.max_preview_tokens"),
    ("hadw.history=0", r"hadw.history"),
    ("eval.ks=0,4", r"eval.ks"),
    ("sampling.top_p=1.5", r"sampling.top_p"),
    ("mesh.fsdp=0", r"mesh.fsdp = 0 must be >= 1 \(or -1\)"),
    # Contradictions between keys.
    ("loss.num_minibatches=3", r"loss.num_minibatches = 3 must divide .* 32 rows"),
    ("loss.micro_batch_size=3", r"loss.micro_batch_size = 3 must divide"),
    ("eval.ks=1,8", r"eval.ks = \(1, 8\) must be in \[1, eval.num_samples = 4\]"),
    (
      "advantage.baseline=subgroup_offset",
      r"advantage.baseline = 'subgroup_offset' needs strategy",
    ),
    ("advantage.offset_control=shuffle", r"advantage.offset_control = 'shuffle' has no effect"),
    ("advantage.offset_control=scramble", r"advantage.offset_control.*'magnitude_scramble'"),
    ("eval.with_strategy=true", r"eval.with_strategy"),
    ("sampling.decode_slots=-1", r"sampling.decode_slots = -1 must be >= 0"),
  ],
)
def test_bad_value_fails_at_load_naming_the_key(override, needle):
  with pytest.raises(ValueError, match=needle):
    config_file.load(TINY, [override])


@pytest.mark.parametrize(
  "override,needle",
  [
    ("strategy.num_previews=5", r"strategy.num_previews = 5 must be in \[1, sampling.group_size"),
    ("strategy.delimiter=", r"strategy.delimiter"),
    ("eval.with_strategy=true,strategy.num_previews=4", None),
  ],
)
def test_strategy_rules(override, needle):
  items = override.split(",")
  if needle is None:  # K = 4 <= G = 4 but also <= eval.num_samples = 4: fine
    config_file.load(STRATEGY, items)
    with pytest.raises(ValueError, match=r"eval.num_samples = 1\] with eval.with_strategy"):
      config_file.load(STRATEGY, ["eval.with_strategy=true", "eval.num_samples=1", "eval.ks=1"])
    return
  with pytest.raises(ValueError, match=needle):
    config_file.load(STRATEGY, items)


def test_overlong_buffer_must_be_positive_with_the_penalty():
  config_file.load(TINY, ["dapo.overlong_buffer=0"])  # unused without the penalty
  with pytest.raises(ValueError, match="dapo.overlong_buffer = 0 must be > 0"):
    config_file.load(TINY, ["dapo.overlong_buffer=0", "dapo.overlong_penalty=true"])


@pytest.mark.parametrize(
  "key,value,what",
  [
    ("sampling.group_size", "4", "an int"),
    ("sampling.group_size", 4.0, "an int"),
    ("hadw.enabled", 1, "a bool"),
    ("hadw.enabled", 1.0, "a bool"),
    ("loss.clip_high", "0.3", "a float"),
    ("loss.kind", 3, "a string"),
    ("eval.ks", (1, "4"), "a tuple of int"),
  ],
)
def test_wrong_type_in_a_config_file_fails(key, value, what):
  cfg = base_config()
  group, leaf = key.split(".")
  cfg[group]._fields[leaf] = value  # as a config file could leave it (bypassing ConfigDict)
  with pytest.raises(ValueError, match=rf"config key {key} = .* must be {what}"):
    finalize(cfg)


def test_of_converts_a_group_and_passes_groups_through():
  cfg = base_config()
  loss_view = experiment.of(cfg.loss)
  assert isinstance(loss_view, experiment.Loss) and experiment.of(loss_view) is loss_view
  cfg.loss.kind = "ppo"
  with pytest.raises(ValueError, match="loss.kind"):
    experiment.of(cfg.loss)


def test_math_gives_the_same_numbers_on_groups_and_configdicts():
  cfg = base_config()
  cfg.advantage.offset_coef = -0.5
  cfg.advantage.baseline = "subgroup_offset"
  cfg.hadw.enabled = True
  r = np.array([1, 0, 1, 1, 0, 0, 1, 0], np.float32)
  gid = np.array([0, 0, 0, 0, 4, 4, 4, 4], np.int32)
  sid = np.array([0, 0, 1, 1, 4, 5, 5, 5], np.int32)
  anchor, key = adv_lib.init_anchor(cfg.hadw), jax.random.key(0)
  a1, _, _ = adv_lib.compute(r, gid, sid, cfg.advantage, cfg.hadw, anchor, key)
  e = experiment.build(cfg, cross=False)
  a2, _, _ = adv_lib.compute(r, gid, sid, e.advantage, e.hadw, anchor, key)
  np.testing.assert_array_equal(np.asarray(a1), np.asarray(a2))

  rng = np.random.default_rng(0)
  lp, old = rng.normal(size=(2, 4, 5)).astype(np.float32) - 2.0
  mask = np.ones((4, 5), np.float32)
  adv = rng.normal(size=4).astype(np.float32)
  out = [
    losses.policy_loss(lp, old, adv, mask, c, losses.denominators(mask, c))[0]
    for c in (cfg.loss, experiment.of(cfg.loss))
  ]
  assert float(out[0]) == float(out[1])


def test_bad_config_fails_fast_and_writes_nothing(tmp_path):
  workdir = tmp_path / "run"
  start = time.monotonic()
  proc = subprocess.run(
    [
      sys.executable,
      str(ROOT / "experiments/launch.py"),
      "--config",
      str(ROOT / "configs/quickstart.py"),
      "--config.advantage.baseline=subgroup_offst",
      "--workdir",
      str(workdir),
    ],
    capture_output=True,
    text=True,
    cwd=tmp_path,
    env={**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"},
    timeout=60,
  )
  elapsed = time.monotonic() - start
  assert proc.returncode == 2, proc.stderr
  assert "advantage.baseline" in proc.stderr and "'subgroup_offset'" in proc.stderr
  assert not workdir.exists() and os.listdir(tmp_path) == []
  assert elapsed < 5.0, elapsed


@pytest.mark.parametrize(
  "override,key,expected",
  [
    ("data.eval_sets=aime24,aime25", "data.eval_sets", ("aime24", "aime25")),
    ("data.eval_sets=(aime24, aime25)", "data.eval_sets", ("aime24", "aime25")),
    ("data.eval_sets=['aime24']", "data.eval_sets", ("aime24",)),
    ("data.eval_sets=aime24", "data.eval_sets", ("aime24",)),
    ("data.eval_paths=", "data.eval_paths", ()),
    (
      "data.eval_paths=/data/a.jsonl,/data/b.jsonl",
      "data.eval_paths",
      ("/data/a.jsonl", "/data/b.jsonl"),
    ),
    ("eval.ks=[1, 4]", "eval.ks", (1, 4)),
    ("hadw.enabled=T", "hadw.enabled", True),
    ("hadw.enabled=False", "hadw.enabled", False),
    ("steps=0x10", "steps", 16),
    ("steps=1e1", "steps", 10),
    ("loss.kl_coef=1", "loss.kl_coef", 1.0),
    ("model.hf_path=/ckpt/my model", "model.hf_path", "/ckpt/my model"),
  ],
)
def test_overrides_parse_as_config_flags(override, key, expected):
  cfg = config_file.load(TINY, [override])
  group, _, leaf = key.rpartition(".")
  value = cfg[group][leaf] if group else cfg[leaf]
  assert value == expected and type(value) is type(expected)


def test_repeated_tuple_overrides_append():
  cfg = config_file.load(TINY, ["data.eval_sets=aime24", "data.eval_sets=aime25"])
  assert cfg.data.eval_sets == ("aime24", "aime25")


def test_bad_override_names_the_key():
  with pytest.raises(ValueError, match="config key steps: expected an integer"):
    config_file.load(TINY, ["steps=1.5"])


def test_misspelt_config_argument_names_the_valid_ones():
  with pytest.raises(ValueError, match="unknown config argument 'alpah'; did you mean 'alpha'"):
    config_file.load(str(ROOT / "configs/strategy_offset_neg.py") + ":alpah=0.3")
  with pytest.raises(ValueError, match="unknown config argument 'alpah'.*'alpha'"):
    config_file.load(str(ROOT / "configs/strategy_anchor.py") + ":alpah=0.3")
  with pytest.raises(ValueError, match="valid arguments: none"):
    config_file.load(TINY + ":steps=3")
  assert (
    config_file.load(
      str(ROOT / "configs/strategy_offset_neg.py") + ":alpha=0.3"
    ).advantage.offset_coef
    == 0.3
  )


@pytest.mark.parametrize("path", sorted((ROOT / "configs").glob("*.py")), ids=lambda p: p.stem)
def test_every_config_file_declares_its_arguments(path):
  module = config_file.load_module(str(path))
  assert isinstance(module.ARGS, tuple)


def test_decode_slots_rules():
  config_file.load(TINY, ["sampling.decode_slots=8", "mesh.data=4"])
  with pytest.raises(ValueError, match=r"decode_slots = 6 must be a multiple of .* = 4"):
    config_file.load(TINY, ["sampling.decode_slots=6", "mesh.data=4"])


def test_every_key_is_declared_with_a_doc_and_docs_config_is_current():
  from grpo_jax.config import reference

  for name, cls in experiment.GROUPS.items():
    for f in dataclasses.fields(cls):
      assert f.metadata["doc"], f"{name}.{f.name} has no doc"
  page = (ROOT / "docs/config.md").read_text()
  assert page == reference.markdown(), "regenerate: python -m grpo_jax.config.reference"


def test_a_declaration_is_the_default_and_the_rule():
  # The field's declaration is what base_config holds and what validation enforces: change
  # one declaration and both move.
  field = next(f for f in dataclasses.fields(experiment.Loss) if f.name == "ratio_log_clamp")
  assert base_config().loss.ratio_log_clamp == field.default == 20.0
  assert field.metadata["gt"] == 0
  cfg = base_config()
  cfg.loss.ratio_log_clamp = 0.0
  with pytest.raises(ValueError, match=r"loss.ratio_log_clamp = 0.0 must be > 0"):
    experiment.build(cfg)
