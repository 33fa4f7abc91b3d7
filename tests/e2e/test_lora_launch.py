"""LoRA through the launcher (METHODS §9): a run checkpoints only the adapters, resumes from
them on the same base, refuses another base naming both, and exports the merged weights and a
PEFT adapter. configs/tiny_test.py, a fresh-init base, 2 steps."""

import json
import pathlib

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
import safetensors.numpy

from grpo_jax import data, models
from grpo_jax.config import files as config_file
from grpo_jax.models import lora
from grpo_jax.runs import launcher

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY = str(ROOT / "configs/tiny_test.py")
LORA = ["--config.model.lora.rank=4", "--config.model.lora.targets=('q', 'v', 'up')"]


def _main(workdir, *extra) -> int:
  args = ["--config", TINY, "--workdir", str(workdir), "--config.eval.before=false", *LORA]
  return launcher.main([*args, *extra])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  """A 2-step LoRA run (the resume test extends it to 3; the others read step 2)."""
  workdir = tmp_path_factory.mktemp("lora") / "run"
  assert _main(workdir, "--config.steps=2") == 0
  return workdir


def test_the_checkpoint_holds_the_adapters_only(run):
  saved = ocp.StandardCheckpointer().restore(run / "checkpoints" / "2" / "default")
  assert "base" not in saved and "ref_params" not in saved
  names = {str(kp[-1].key) for kp, _ in jax.tree_util.tree_flatten_with_path(saved["params"])[0]}
  assert names == {"lora_a", "lora_b"}
  modules = {str(kp[-2].key) for kp, _ in jax.tree_util.tree_flatten_with_path(saved["params"])[0]}
  assert modules == {"q_proj", "v_proj", "up_proj"}  # model.lora.targets
  base = json.loads((run / "lora_base.json").read_text())
  assert base["path"] == "init(seed=0)" and len(base["hash"]) == 16


def test_a_resume_continues_on_the_same_base_and_refuses_another(run, capsys):
  assert _main(run, "--config.steps=3") == 0
  assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == [
    1,
    2,
    3,
  ]
  # Another base (a fresh init of another seed), the config change allowed: refused at restore.
  code = _main(run, "--config.steps=4", "--config.seed=1", "--allow_config_change")
  err = capsys.readouterr().err
  assert code == 2 and "init(seed=0)" in err and "init(seed=1)" in err, err
  assert json.loads((run / "config.json").read_text())["config"]["seed"] == 0  # nothing written


def test_export_writes_merged_weights_and_a_peft_adapter(run):
  out = run / "hf"
  assert _main(run, "--mode=export", "--step=2", "--out", str(out)) == 0
  config = json.loads((out / "lora" / "adapter_config.json").read_text())
  assert config["peft_type"] == "LORA" and config["r"] == 4
  assert sorted(config["target_modules"]) == ["q_proj", "up_proj", "v_proj"]
  tensors = safetensors.numpy.load_file(out / "lora" / "adapter_model.safetensors")
  assert tensors and all(".lora_A.weight" in k or ".lora_B.weight" in k for k in tensors)
  # The checkpoint's adapters under PEFT's names and layout (A (r, d_in), B (d_out, r)).
  saved = ocp.StandardCheckpointer().restore(run / "checkpoints" / "2" / "default")["params"]
  want = lora.peft_tensors(jax.device_get(saved))
  assert sorted(tensors) == sorted(want)
  for k, v in want.items():
    np.testing.assert_array_equal(tensors[k], v, err_msg=k)


def test_a_warm_started_base_is_kept_once_and_resumed(tmp_path):
  """The warm start moves the base: it is saved once beside the checkpoints (not at every
  step), a resume reads it back, and it differs from the model as built."""
  workdir = tmp_path / "warm"
  warm = ["--config.warmstart.enabled=true", "--config.warmstart.max_steps=20"]
  warm += ["--config.warmstart.check_every=10", "--config.warmstart.target_pass1=1.0"]
  assert _main(workdir, "--config.steps=1", *warm) == 0
  base = ocp.StandardCheckpointer().restore(workdir / "lora_base")
  e = config_file.load(TINY, [])
  model_cfg = models.ModelConfig.from_config(e.model, vocab_size=len(data.build_task(e).tokenizer))
  built = models.init_params(model_cfg, e.seed)[1]
  flat = lambda t: np.concatenate([np.ravel(np.asarray(x, np.float32)) for x in jax.tree.leaves(t)])
  assert flat(base).shape == flat(built).shape
  assert not np.allclose(flat(base), flat(built))  # the warm start moved it
  assert _main(workdir, "--config.steps=2", *warm) == 0
  assert not (workdir / "checkpoints" / "2" / "default" / "base").exists()


@pytest.mark.parametrize("off_policy", [0, 1], ids=["on_policy", "off_policy"])
def test_an_unmerged_sampler_trains_evaluates_and_exports(tmp_path, off_policy):
  """``model.lora.sampler = 'unmerged'``: the run samples from the base with the adapters beside
  it (on-policy, and off-policy where the next batch is drawn during the update, which donates
  the state), evaluates, and exports the merged checkpoint of its adapters."""
  workdir = tmp_path / "unmerged"
  extra = ["--config.model.lora.sampler=unmerged", "--config.steps=2", "--config.eval.after=true"]
  extra.append(f"--config.rollout.off_policy_steps={off_policy}")
  assert _main(workdir, *extra) == 0
  rows = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
  assert [r["step"] for r in rows] == [1, 2]
  assert all(np.isfinite(r["loss/total"]) for r in rows)
  assert abs(rows[0]["mismatch/kl"]) < 1e-3  # the trainer scores the sampler's tokens alike
  out = tmp_path / "hf"
  assert _main(workdir, *extra, "--mode=export", "--out", str(out)) == 0
  saved = ocp.StandardCheckpointer().restore(workdir / "checkpoints" / "2" / "default")["params"]
  e = config_file.load(TINY, [])
  model_cfg = models.ModelConfig.from_config(e.model, vocab_size=len(data.build_task(e).tokenizer))
  built = models.init_params(model_cfg, e.seed)[1]
  spec = lora.LoraSpec(4, e.model.lora.alpha, ("q", "v", "up"))
  want = lora.merge(built, jax.device_get(saved), spec.alpha, spec.rank)
  got = safetensors.numpy.load_file(out / "model.safetensors")
  q = "model.layers.0.self_attn.q_proj.weight"
  np.testing.assert_allclose(
    got[q], np.asarray(want["layers"][0]["self_attn"]["q_proj"]["kernel"]).T, rtol=1e-6
  )
