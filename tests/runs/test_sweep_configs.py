"""Every config file builds, every sweep it declares expands into loadable runs, and the paper
configs pass the shape-only dry run (abstract mesh, jax.eval_shape) within a v5p chip's HBM."""

import pathlib

import jax
import pytest

from grpo_jax import models
from grpo_jax.config import files as config_file
from grpo_jax.planning import dry_run
from grpo_jax.runs import sweep

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIGS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "configs").glob("*.py"))
PAPER = [c for c in CONFIGS if pathlib.Path(c).stem.startswith("paper_")]
HBM_GIB = 95.0  # TPU v5p


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
  monkeypatch.chdir(ROOT)


def test_the_paper_configs_exist():
  stems = {pathlib.Path(c).stem for c in PAPER}
  assert {
    "paper_offsets_qwen3_8b",
    "paper_offsets_olmo3_7b",
    "paper_hadw_qwen3_4b",
    "paper_hadw_qwen3_8b",
  } <= stems


@pytest.mark.parametrize("spec", CONFIGS)
def test_config_and_every_sweep_run_build(spec):
  cfg = config_file.load(spec)
  assert cfg.steps > 0
  runs = sweep.expand(spec)
  assert len({r.name for r in runs}) == len(runs)
  for run in runs:
    run_cfg = sweep.load_run_config(spec, run)
    for key, value in run.overrides.items():
      node = run_cfg
      for part in key.split("."):
        node = node[part]
      assert node == value, (run.name, key)


@pytest.mark.parametrize("spec", PAPER)
def test_paper_config_dry_run_fits_a_chip(spec):
  cfg = config_file.load(spec)
  plan = dry_run.plan(cfg, target="v5p-64")
  assert "TPU v5p-64" in plan.hardware.name and "--target v5p-64, given" in plan.hardware.name
  assert plan.mesh_shape == (cfg.mesh.data, cfg.mesh.fsdp, cfg.mesh.tensor)
  assert plan.workload.rows == cfg.sampling.prompts_per_step * cfg.sampling.group_size
  assert models.PRESETS[cfg.model.preset].num_params == plan.num_params
  assert 3e9 < plan.num_params < 9e9
  # fp32 master params and two fp32 Adam moments (no KL reference), split over fsdp × tensor
  # (tensors whose sizes do not divide, e.g. OLMo's 100,278-entry vocabulary, over fewer).
  ideal = 3 * 4 * plan.num_params / (cfg.mesh.fsdp * cfg.mesh.tensor)
  state = plan.bytes["params"] + plan.bytes["optimizer"] + plan.bytes["reference"]
  assert 0.99 * ideal < state < cfg.mesh.tensor * ideal
  assert plan.bytes["fits"] and plan.bytes["peak"] / 2**30 < HBM_GIB, dry_run.format_plan(plan)
  assert "per device" in dry_run.format_plan(plan)


def test_paper_sweeps_cover_the_papers_tables():
  hadw = [r.arg for r in sweep.expand("configs/paper_hadw_qwen3_4b.py")]
  for lam in ("0.5", "0.8", "1.0", "1.5", "1.7", "2.0"):
    assert f"algo=grpo,hadw=1,lam={lam}" in hadw
  for c in ("0.4", "0.5", "0.6"):
    assert f"algo=grpo,hadw=1,anchor=fixed,c={c}" in hadw
  assert "algo=grpo,hadw=0,G=16" in hadw
  assert {f"algo={a},hadw={h}" for a in ("grpo", "gspo", "dapo") for h in (0, 1)} <= set(hadw)
  g16 = sweep.load_run_config(
    "configs/paper_hadw_qwen3_4b.py",
    next(r for r in sweep.expand("configs/paper_hadw_qwen3_4b.py") if r.arg and "G=16" in r.arg),
  )
  assert g16.sampling.group_size == 16 and not g16.hadw.enabled
  dapo = config_file.load("configs/paper_hadw_qwen3_4b.py:algo=dapo")
  assert (dapo.loss.kind, dapo.loss.clip_high, dapo.steps) == ("dapo", 0.28, 9 * 7500 // 256)
  assert not dapo.dapo.dynamic_sampling  # the paper's Table 8: filtering = False
  offsets = sweep.expand("configs/paper_offsets_qwen3_8b.py")
  alphas = {r.overrides["advantage.offset_coef"] for r in offsets}
  assert {0.0, -1.0, -0.5, 0.5, 1.0} <= alphas
  assert sum(r.overrides["advantage.offset_control"] == "shuffle" for r in offsets) == 2


def test_mini_repro_sweep_has_the_required_conditions():
  runs = sweep.expand("configs/mini_repro.py")
  seeds = {r.overrides["seed"] for r in runs}
  assert len(seeds) >= 3
  conds = {
    (
      r.overrides["advantage.offset_coef"],
      r.overrides["advantage.offset_control"],
      r.overrides["hadw.enabled"],
    )
    for r in runs
  }
  for alpha in (0.0, -1.0, -0.5, 0.5, 1.0):
    assert (alpha, "none", False) in conds
  assert (-0.5, "shuffle", False) in conds and any(h for _, _, h in conds)
  noise = [r for r in runs if r.overrides["advantage.offset_control"] == "noise"]
  assert {r.overrides["seed"] for r in noise} == seeds  # the control beside the shuffle
  assert all(r.overrides["advantage.offset_coef"] == -0.5 for r in noise)
  cfg = sweep.load_run_config("configs/mini_repro.py", runs[0])
  assert cfg.strategy.enabled and cfg.advantage.baseline == "subgroup_offset"


def test_dry_run_param_bytes_match_real_parameters():
  """On one CPU device the abstract plan's parameter bytes equal the allocated ones."""
  cfg = config_file.load("configs/tiny_test.py")
  plan = dry_run.plan(cfg, num_devices=1)
  _, params = models.build_policy(cfg, vocab_size=dry_run.widths(cfg)[2])
  real = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(params))
  assert plan.bytes["params"] == real
  assert 2 * real <= plan.bytes["optimizer"] <= 2 * real + 64  # two moments + a step count


def test_dry_run_reads_a_gguf_checkpoints_shape(smollm2_gguf, smollm2_hf_dir):
  """A config whose model is a local .gguf file plans from its metadata (no vocabulary from a
  tokenizer needed): the shape equals the converted checkpoint's config.json."""
  cfg = config_file.load("configs/smollm2_arithmetic.py", [f"model.hf_path={smollm2_gguf}"])
  from_gguf = dry_run.model_config(cfg)
  expected, _ = models.load_hf_config(str(smollm2_hf_dir))
  assert from_gguf.num_params == expected.num_params == 134_515_008
  assert (from_gguf.vocab_size, from_gguf.num_layers) == (expected.vocab_size, expected.num_layers)
  assert dry_run.plan(cfg, num_devices=1).bytes["params"] == 4 * expected.num_params


def test_study_sweep_is_the_preregistered_design():
  """configs/study.py: 9 conditions × 16 seeds × 50 steps, plans masked from the loss; the
  two seed halves partition the full sweep; every run is labelled with exactly one condition
  that the analysis's primary (or withdrawn) comparisons name; the family is eight, H2'' in
  H2''s place, H5a and H5b added; the earlier 128 runs keep their names."""
  from grpo_jax.runs import study

  module = config_file.load_module("configs/study.py")
  runs = sweep.expand("configs/study.py")
  assert len(runs) == 9 * 16
  halves = sweep.expand("configs/study.py:first_seed=0,seeds=8")
  halves += sweep.expand("configs/study.py:first_seed=8,seeds=8")
  assert sorted(r.name for r in halves) == sorted(r.name for r in runs)
  pair = sweep.expand("configs/study.py:conditions=alpha=-0.5/scramble")
  assert len(pair) == 2 * 16 and {r.name for r in pair} < {r.name for r in runs}
  with pytest.raises(ValueError, match="unknown study conditions \\['scrambel'\\]"):
    sweep.expand("configs/study.py:conditions=scrambel")
  rows = [{"name": r.name, **r.overrides} for r in runs]
  rows = study.label(rows, module.CONDITIONS, module.ADDED_KEYS)
  assert len(rows) == len(runs)
  counts = {c: sum(r["condition"] == c for r in rows) for c in module.CONDITIONS}
  assert counts == dict.fromkeys(module.CONDITIONS, 16)
  primary, hypotheses, withdrawn = study.family(module)
  named = {c.a for c in primary + withdrawn} | {c.b for c in primary + withdrawn}
  assert named == set(module.CONDITIONS)
  assert [c.id for c in primary] == ["H1a", "H1b", "H2a", "H2b", "H2''", "H3", "H5a", "H5b"]
  assert hypotheses["H5"] == (("H5a", "H5b"), ("H5a",))
  assert [c.id for c in withdrawn] == ["H2'"] and "H2'" not in hypotheses
  cfg = {
    c: sweep.load_run_config("configs/study.py", r)
    for c, r in zip((r["condition"] for r in rows), runs, strict=True)
  }
  assert cfg["grpo"].steps == 50 and not cfg["grpo"].strategy.enabled
  noise, scramble = cfg["noise"].advantage, cfg["scramble"].advantage
  assert noise.offset_control == "noise" and noise.offset_coef == -0.5
  assert scramble.offset_control == "magnitude_scramble" and scramble.offset_coef == -0.5
  assert scramble.offset_magnitude_scramble_rebalance
  shrunk = cfg["shrunk"].advantage
  assert (shrunk.offset_strength, shrunk.offset_strength_scope) == ("shrunk", "batch")
  assert shrunk.offset_control == "none" and shrunk.offset_coef == -0.5
  assert {c.advantage.offset_strength for n, c in cfg.items() if n != "shrunk"} == {"fixed"}
  # offset_strength appears in the shrunk runs' names only: the others keep the names of the
  # 128 runs recorded before the key was added.
  assert [r["condition"] for r in rows if "offset_strength" in r["name"]] == ["shrunk"] * 16
  assert {c.advantage.offset_control for n, c in cfg.items() if n not in ("noise", "scramble")} == {
    "none",
    "shuffle",
  }
  assert cfg["anchor"].strategy.source == "presampled"
  assert not cfg["anchor"].strategy.train_on_preview
  # Each name says its offset control, in one readable pair; the runs recorded under the three
  # keys it replaced keep their directories (tests/runs/test_sweep.py's recorded-run tests).
  for row, run in zip(rows, runs, strict=True):
    control = cfg[row["condition"]].advantage.offset_control
    assert f",advantage.offset_control={control}," in run.name
    assert len(run.name.encode()) < 255  # a run directory's name is one path component


def test_smollm2_study_seed_ranges_partition_the_arm():
  """configs/smollm2_study.py: first_seed moves the seeds, so two launcher processes on seed
  ranges run the same members as one sweep."""
  whole = sweep.expand("configs/smollm2_study.py:seeds=4")
  parts = sweep.expand("configs/smollm2_study.py:seeds=2")
  parts += sweep.expand("configs/smollm2_study.py:first_seed=2,seeds=2")
  assert len(whole) == 3 * 4 and sorted(r.name for r in parts) == sorted(r.name for r in whole)
  assert {r.overrides["seed"] for r in parts[6:]} == {2, 3}


def _flat(cfg, prefix=""):
  out = {}
  for key, value in cfg.items():
    if hasattr(value, "items"):
      out.update(_flat(value, f"{prefix}{key}."))
    else:
      out[prefix + key] = value
  return out


def test_quickstart_compare_is_the_quickstart_beside_its_anchor_and_grpo():
  """configs/quickstart_compare.py: three runs on the same seed and 150 RL steps that differ
  only in the method's keys; ``full`` is the quickstart's config and ``grpo`` the plain-GRPO
  config's at 150 steps, exactly (so each reproduces that run)."""
  spec = "configs/quickstart_compare.py"
  runs = sweep.expand(spec)
  assert [r.name for r in runs] == ["method=full", "method=anchor", "method=grpo"]
  assert all(r.overrides == {} for r in runs)  # one column, method, in the aggregated table
  cfg = {r.name.split("=")[1]: sweep.load_run_config(spec, r) for r in runs}
  assert cfg["full"].to_dict() == config_file.load("configs/quickstart.py").to_dict()
  grpo = config_file.load("configs/quickstart_grpo.py:steps=150")
  assert cfg["grpo"].to_dict() == grpo.to_dict()
  flat = {name: _flat(c.to_dict()) for name, c in cfg.items()}
  assert {f["seed"] for f in flat.values()} == {0} and {f["steps"] for f in flat.values()} == {150}
  differ = {k for k in flat["full"] if len({repr(f[k]) for f in flat.values()}) > 1}
  assert differ == {
    "strategy.enabled",
    "strategy.source",
    "strategy.train_on_preview",
    "advantage.baseline",
    "advantage.offset_coef",
    "hadw.enabled",
  }
  anchor = {k for k in flat["full"] if flat["full"][k] != flat["anchor"][k]}
  assert anchor == {"advantage.offset_coef", "hadw.enabled"}
  assert (cfg["full"].advantage.offset_coef, cfg["anchor"].advantage.offset_coef) == (-0.5, 0.0)
  assert cfg["anchor"].strategy.enabled and not cfg["anchor"].hadw.enabled
  assert not cfg["grpo"].strategy.enabled and cfg["grpo"].advantage.baseline == "group"
  assert config_file.load(f"{spec}:steps=20").steps == 20
  assert [r.arg for r in sweep.expand(f"{spec}:steps=20")] == [
    "method=full,steps=20",
    "method=anchor,steps=20",
    "method=grpo,steps=20",
  ]


def test_the_plan_names_its_target_and_detects_the_backend():
  from grpo_jax.planning import memory

  assert memory.detect("TPU v5 lite", "tpu") == "v5e-8" and memory.detect("TPU v6 lite", "tpu")
  assert memory.detect("NVIDIA H100 80GB HBM3", "gpu") == "h100-8"
  assert memory.detect("cpu", "cpu") == "cpu"
  with pytest.raises(ValueError, match="pass --target"):
    memory.detect("TPU v9", "tpu")
  cfg = config_file.load(PAPER[0])
  here = dry_run.plan(cfg)  # this machine: CPU
  assert (
    here.hardware.name.startswith("CPU host") and "--target cpu, detected" in here.hardware.name
  )
  v5e, v6e = dry_run.plan(cfg, target="v5e-8"), dry_run.plan(cfg, target="v6e-8")
  assert v5e.hardware.hbm_bytes == 16 * 2**30 and v6e.hardware.hbm_bytes == 32 * 2**30
  assert v5e.bytes["peak"] == v6e.bytes["peak"]  # the same plan, another chip
  assert v5e.bytes["step_s"] > v6e.bytes["step_s"]  # a slower one
  with pytest.raises(ValueError, match="is not one of"):
    dry_run.plan(cfg, target="tpu9")
