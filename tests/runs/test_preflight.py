"""Every launch that cannot run stops with exit status 2 and a message naming what to change,
before anything is written: no run directory, no config.json."""

import json
import pathlib
import re
import time

import pytest

from grpo_jax.runs import launcher, preflight

ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY = str(ROOT / "configs/tiny_test.py")


def _launch(capsys, *argv):
  t0 = time.perf_counter()
  try:
    code = launcher.main(list(argv))
  except SystemExit as e:  # argparse's errors exit 2 themselves
    code = e.code
  return code, capsys.readouterr(), time.perf_counter() - t0


@pytest.fixture
def broken_configs(tmp_path):
  (tmp_path / "syntax.py").write_text("def get_config(arg=None)\n  return 1\n")
  (tmp_path / "noget.py").write_text("X = 1\n")
  (tmp_path / "raises.py").write_text("import no_such_module_here\n")
  (tmp_path / "plain_dir").mkdir()
  (tmp_path / "weights.bin").write_text("")
  return tmp_path


CASES = {
  "syntax error": (["--config", "{d}/syntax.py"], r"syntax\.py:1: expected ':'"),
  "no get_config": (["--config", "{d}/noget.py"], "defines no get_config"),
  "a file that fails": (["--config", "{d}/raises.py"], "ModuleNotFoundError"),
  "missing file": (["--config", "{d}/absent.py"], "not found"),
  "bad preset": (["--config", TINY, "--config.model.preset=bogus"], "model.preset = 'bogus'"),
  "missing gguf": (
    ["--config", TINY, "--config.model.hf_path={d}/SmolLM2.gguf"],
    "no such file .python3 -m grpo_jax.models.smollm2",
  ),
  "not a checkpoint": (
    ["--config", TINY, "--config.model.hf_path={d}/plain_dir"],
    "no config.json",
  ),
  "not a gguf": (["--config", TINY, "--config.model.hf_path={d}/weights.bin"], "not a .gguf"),
  "not a path or id": (["--config", TINY, "--config.model.hf_path=/no/where"], "not a hub id"),
  "mesh": (["--config", TINY, "--config.mesh.data=3"], r"mesh .* needs 3 devices, \d+ available"),
  "export, no checkpoint": (["--config", TINY, "--mode=export"], "--mode=export: no checkpoint"),
  "eval, no checkpoint": (["--config", TINY, "--mode=eval"], "--allow_init evaluates"),
  "a step not saved": (["--config", TINY, "--mode=eval", "--step=3"], "--step 3: .* none"),
  "step without mode": (["--config", TINY, "--step=3"], "--step picks the checkpoint"),
  "sweep export": (["--config", TINY, "--sweep", "--mode=export"], "drop --sweep"),
  "pod eval": (["--config", TINY, "--pod", "--mode=eval"], "drop --mode"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_launch_that_cannot_run_stops_before_writing(capsys, broken_configs, tmp_path, case):
  argv, message = CASES[case]
  workdir = tmp_path / "run"
  argv = [a.format(d=broken_configs) for a in argv] + ["--workdir", str(workdir)]
  code, out, seconds = _launch(capsys, *argv)
  assert code == 2, out
  assert re.search(message, out.err), out.err
  assert not workdir.exists()  # no run directory, no config.json
  assert seconds < 5.0


def test_print_config_shows_the_resolved_config(capsys, tmp_path):
  workdir = tmp_path / "run"
  argv = [
    "--config",
    TINY,
    "--config.loss.kl_coef=0.25",
    "--print_config",
    "--workdir",
    str(workdir),
  ]
  code, out, _ = _launch(capsys, *argv)
  printed = json.loads(out.out)
  assert code == 0 and printed["loss"]["kl_coef"] == 0.25 and printed["steps"] == 2
  assert not workdir.exists()


def test_gs_without_the_extra_names_it(monkeypatch):
  import builtins

  real_import = builtins.__import__

  def no_gcsfs(name, *args, **kwargs):
    if name == "gcsfs":
      raise ImportError("no gcsfs")
    return real_import(name, *args, **kwargs)

  monkeypatch.setattr(builtins, "__import__", no_gcsfs)
  with pytest.raises(preflight.PreflightError, match=r"pip install -e '\.\[gcs\]'"):
    preflight.check_storage("gs://bucket/run")
  preflight.check_storage("/tmp/a/local/run")  # local: nothing to check


def test_storage_that_does_not_answer_fails_in_time(monkeypatch):
  def hang():
    time.sleep(5)

  monkeypatch.setattr(
    preflight.epath, "Path", lambda p: type("P", (), {"exists": staticmethod(hang)})
  )
  t0 = time.perf_counter()
  with pytest.raises(preflight.PreflightError, match="did not answer within 0 s"):
    preflight.check_storage("gs://bucket/run", timeout_s=0.2)
  assert time.perf_counter() - t0 < 2.0


def test_a_hub_id_and_a_checkpoint_pass(tmp_path):
  preflight.check_model_path("HuggingFaceTB/SmolLM2-135M-Instruct")  # downloaded at build
  (tmp_path / "ckpt").mkdir()
  (tmp_path / "ckpt/config.json").write_text("{}")
  preflight.check_model_path(str(tmp_path / "ckpt"))
  (tmp_path / "run/checkpoints/4").mkdir(parents=True)
  assert preflight.checkpoint_steps(str(tmp_path / "run")) == [4]
  preflight.check_checkpoint(str(tmp_path / "run"), "export", 4, allow_init=False)
  preflight.check_checkpoint(str(tmp_path / "fresh"), "eval", None, allow_init=True)


def test_pod_commands_for_a_gs_root_print_offline(capsys, monkeypatch):
  """--pod on a gs:// root never touches storage (it would hang without network)."""

  def no_storage(*a, **k):
    raise AssertionError("storage contacted")

  monkeypatch.setattr(preflight.epath.Path, "exists", no_storage)
  argv = ["--config", TINY, "--pod", "--workdir", "gs://bucket/sweep"]
  code, out, seconds = _launch(capsys, *argv)
  assert code == 0 and "--workdir gs://bucket/sweep/default" in out.out and seconds < 5.0


def test_sweep_eval_checks_then_evaluates_every_member(capsys, tmp_path):
  root = tmp_path / "sweep"
  argv = ["--config", str(ROOT / "configs/tiny_sweep.py"), "--sweep", "--mode=eval"]
  argv += ["--workdir", str(root), "--config.eval.num_problems=2", "--config.eval.num_samples=2"]
  argv += ["--config.eval.ks=(1, 2)"]
  code, out, _ = _launch(capsys, *argv)
  assert code == 2 and "no checkpoint in" in out.err and not root.exists()
  code, out, _ = _launch(capsys, *argv, "--allow_init")
  members = sorted(p.name for p in root.iterdir())
  assert code == 0 and len(members) == 4
  for name in members:
    (result,) = (root / name / "eval").glob("*_step0.json")
    assert json.loads(result.read_text())["num_problems"] == 2
