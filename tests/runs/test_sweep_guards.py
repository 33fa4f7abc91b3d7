"""Sweep guards: every run's config is checked before any run starts (``--sweep`` and ``--pod``),
``--sweep --dry_run`` plans every run and trains none, multi-host flags reach a sweep, and an
unfinished run resumed under changed overrides names the changed keys."""

import json
import pathlib
import textwrap

import pytest

from grpo_jax.config import files as config_file
from grpo_jax.runs import sweep

ROOT = pathlib.Path(__file__).resolve().parents[2]

SWEEP_FILE = textwrap.dedent("""
  from grpo_jax.config import base_config

  def get_config(arg=None):
    cfg = base_config()
    cfg.steps = 7
    cfg.sampling.prompts_per_step = 8
    cfg.sampling.group_size = 4
    return cfg

  def sweep(add):
    for seed in (0, 1):
      for alpha in (-0.5, 0.0):
        add(seed=seed, **{"advantage.offset_coef": alpha})
""")


@pytest.fixture
def spec(tmp_path):
  path = tmp_path / "exp.py"
  path.write_text(SWEEP_FILE)
  return str(path)


@pytest.fixture
def launch():
  return config_file.load_module(str(ROOT / "experiments/launch.py"))


def _never(*a, **k):
  raise AssertionError("no run may start")


def test_misspelt_override_fails_once_before_any_run_directory(spec, tmp_path):
  root = tmp_path / "sweep"
  with pytest.raises(ValueError, match="none started.*advantage.offset_coef") as e:
    sweep.run_local(spec, root, ["advantage.offset_coeff=1.0"], train_fn=_never, log=print)
  assert "unknown config key 'advantage.offset_coeff'" in str(e.value)
  assert not root.exists()
  with pytest.raises(ValueError, match="advantage.offset_coeff"):
    sweep.pod_commands(spec, root, ["advantage.offset_coeff=1.0"])


def test_one_bad_member_stops_the_sweep_naming_it(spec, tmp_path):
  path = tmp_path / "bad.py"
  path.write_text(
    SWEEP_FILE.replace(
      'add(seed=seed, **{"advantage.offset_coef": alpha})',
      'add(seed=seed, **{"advantage.offset_coef": alpha})\n'
      '    add(seed=seed, **{"loss.kind": "gpso"})',
    )
  )
  root = tmp_path / "sweep"
  with pytest.raises(ValueError, match=r"sweep run seed=0,loss.kind=gpso .*loss.kind") as e:
    sweep.run_local(str(path), root, train_fn=_never, log=print)
  assert "gspo" in str(e.value)  # the valid choices
  assert not root.exists()


def test_launcher_sweep_and_pod_reject_a_bad_override_with_one_message(
  spec, tmp_path, launch, capsys
):
  root = tmp_path / "sweep"
  for mode in (["--sweep"], ["--sweep", "--pod"], ["--sweep", "--dry_run"]):
    argv = ["--config", spec, *mode, "--workdir", str(root), "--config.hadw.lamda_scale=2"]
    assert launch.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("config error") == 1 and "hadw.lambda_scale" in err
    assert not root.exists()


def test_sweep_dry_run_plans_every_run_and_trains_none(spec, tmp_path, launch, capsys, monkeypatch):
  monkeypatch.setattr(sweep, "run_one", _never)
  root = tmp_path / "sweep"
  argv = ["--config", spec, "--sweep", "--dry_run", "--workdir", str(root), "--config.steps=2"]
  assert launch.main(argv) == 0
  out = capsys.readouterr().out
  names = [r.name for r in sweep.expand(spec)]
  for i, name in enumerate(names):
    assert f"# run {i + 1}/4 {name} (new)" in out
  assert out.count("mesh (data, fsdp, tensor)") == 4 and "4 runs planned, none trained" in out
  assert not root.exists()


def test_multihost_flags_reach_a_sweep(spec, tmp_path, launch, monkeypatch):
  from grpo_jax.sharding import distributed

  seen = {}
  monkeypatch.setattr(distributed, "initialize", lambda *a, **k: seen.update(args=a, kw=k))
  monkeypatch.setattr(sweep, "run_local", lambda *a, **k: seen.setdefault("ran", []) or [])
  argv = ["--config", spec, "--sweep", "--workdir", str(tmp_path / "s")]
  flags = ["--coordinator_address=10.0.0.2:8476", "--num_processes=2", "--process_id=1"]
  assert launch.main([*argv, *flags]) == 0
  assert seen["args"] == ("10.0.0.2:8476", 2, 1) and "ran" in seen


@pytest.mark.parametrize(
  "flag", ["--coordinator_address=10.0.0.2:8476", "--num_processes=2", "--process_id=0"]
)
def test_distributed_auto_rejects_explicit_cluster_flags(spec, launch, capsys, flag):
  with pytest.raises(SystemExit) as e:
    launch.parse_args(["--config", spec, "--distributed_auto", flag])
  assert e.value.code == 2 and "drop --coordinator_address" in capsys.readouterr().err
  from grpo_jax.sharding import distributed

  with pytest.raises(ValueError, match="not both"):
    distributed.initialize("10.0.0.2:8476", 2, 0, auto=True)


def test_distributed_auto_initializes_with_no_cluster_arguments(monkeypatch):
  import jax

  from grpo_jax.sharding import distributed

  seen = []
  monkeypatch.setattr(jax.distributed, "initialize", lambda **kw: seen.append(kw))
  monkeypatch.setattr(jax.config, "update", lambda *a: None)
  # The environment's coordinator is not passed on either: auto leaves the cluster to JAX.
  env = {distributed.ENV_ADDRESS: "10.0.0.2:8476"}
  distributed.initialize(auto=True, heartbeat_timeout_seconds=7, env=env)
  assert seen == [{"heartbeat_timeout_seconds": 7}]
  distributed.initialize(env=env | {distributed.ENV_NUM: "2", distributed.ENV_ID: "1"})
  assert seen[1]["coordinator_address"] == "10.0.0.2:8476" and seen[1]["process_id"] == 1


def _train_writing_config(calls):
  def train(cfg, workdir, log=print, **kw):
    calls.append(kw)
    workdir = pathlib.Path(workdir)
    (workdir / "config.json").write_text(json.dumps({"config": cfg.to_dict()}))

  return train


def test_unfinished_run_under_changed_overrides_names_the_keys(spec, tmp_path):
  root, calls = tmp_path / "sweep", []
  run = sweep.expand(spec)[0]
  train = _train_writing_config(calls)
  sweep.run_one(spec, root, run, ["hadw.enabled=true"], train_fn=train, log=lambda *a: None)
  out = sweep.run_one(spec, root, run, ["hadw.enabled=false"], train_fn=train, log=lambda *a: None)
  assert out["status"] == "failed" and len(calls) == 1
  assert "hadw.enabled: True → False" in (root / run.name / "error.txt").read_text()
  # Extending the run is not a change; --allow_config_change lets a change through.
  out = sweep.run_one(spec, root, run, ["hadw.enabled=true", "steps=9"], train_fn=train, log=print)
  assert out["status"] == "done" and calls[-1] == {}
  out = sweep.run_one(
    spec, root, run, ["hadw.enabled=false"], train_fn=train, log=print, allow_config_change=True
  )
  assert out["status"] == "done" and calls[-1] == {"allow_config_change": True}
