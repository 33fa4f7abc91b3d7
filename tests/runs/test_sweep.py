"""Sweep expansion, run naming, local execution (skip / resume / failure recording) and pod
commands, with a stand-in train function (the real loop runs in test_sweep_launch.py)."""

import json
import pathlib
import shlex
import subprocess
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
    return cfg

  def sweep(add):
    for seed in (0, 1):
      for alpha in (-0.5, 0.0):
        add(seed=seed, **{"advantage.offset_coef": alpha, "hadw.enabled": alpha < 0})
""")


@pytest.fixture
def spec(tmp_path):
  path = tmp_path / "exp.py"
  path.write_text(SWEEP_FILE)
  return str(path)


@pytest.mark.parametrize("value", [True, False, 3, -0.5, 1e-6, "window", (1, 8), ("aime24",)])
def test_format_value_round_trips_through_the_override_parser(value):
  assert config_file.parse_value(sweep.format_value(value), value) == value


def test_expand_names_runs_by_their_overrides_in_call_order(spec):
  runs = sweep.expand(spec)
  assert [r.name for r in runs] == [
    "seed=0,advantage.offset_coef=-0.5,hadw.enabled=true",
    "seed=0,advantage.offset_coef=0.0,hadw.enabled=false",
    "seed=1,advantage.offset_coef=-0.5,hadw.enabled=true",
    "seed=1,advantage.offset_coef=0.0,hadw.enabled=false",
  ]
  assert runs[2].overrides == {"seed": 1, "advantage.offset_coef": -0.5, "hadw.enabled": True}


def test_run_config_applies_command_line_then_run_overrides(spec):
  run = sweep.expand(spec)[2]
  cfg = sweep.load_run_config(spec, run, ["steps=3", "seed=9", "hadw.lambda_scale=2.0"])
  assert (cfg.seed, cfg.steps, cfg.advantage.offset_coef) == (1, 3, -0.5)  # the run's seed wins
  assert cfg.hadw.enabled is True and cfg.hadw.lambda_scale == 2.0
  with pytest.raises(KeyError, match="offset_coef"):
    sweep.load_run_config(spec, sweep.SweepRun("x", {"advantage.offset_coeff": 1.0}))


def test_names_are_path_safe_and_duplicates_rejected(tmp_path):
  assert sweep.run_name({"data.eval_sets": ("aime24", "hmmt25"), "x": "a/b c"}) == (
    "data.eval_sets=__aime24_,__hmmt25__,x=a_b_c"
  )
  path = tmp_path / "dup.py"
  path.write_text(SWEEP_FILE.replace("for alpha in (-0.5, 0.0)", "for alpha in (0.0, 0.0)"))
  with pytest.raises(ValueError, match="more than once"):
    sweep.expand(str(path))
  plain = tmp_path / "plain.py"
  plain.write_text(
    "from grpo_jax.config import base_config\nget_config = lambda arg=None: base_config()\n"
  )
  assert sweep.expand(str(plain)) == [sweep.SweepRun("default", {})]


def test_sweep_sees_the_config_argument(tmp_path):
  path = tmp_path / "arg.py"
  path.write_text(
    SWEEP_FILE.replace(
      "def sweep(add):", "def sweep(add, arg):\n  seeds = int(arg.split('=')[1])"
    ).replace("(0, 1)", "range(seeds)")
  )
  assert len(sweep.expand(f"{path}:seeds=3")) == 6


class FakeTrain:
  """Writes results.json like the loop does; fails for runs whose name contains ``fail``."""

  def __init__(self, fail=""):
    self.fail, self.calls = fail, []

  def __call__(self, cfg, workdir, log=print):
    workdir = pathlib.Path(workdir)
    self.calls.append(workdir.name)
    log(f"training seed {cfg.seed}")
    if self.fail and self.fail in workdir.name:
      raise RuntimeError("diverged")
    (workdir / "results.json").write_text(json.dumps({"after": {"pass@1": cfg.seed / 10}}))


def test_local_sweep_records_failures_skips_finished_and_retries_failed(spec, tmp_path):
  root = tmp_path / "sweep"
  train = FakeTrain(fail="seed=0,advantage.offset_coef=0.0")
  entries = sweep.run_local(
    spec, root, ["steps=2"], train_fn=train, log=lambda *a: None, compile_cache=False
  )
  assert [e["status"] for e in entries] == ["done", "failed", "done", "done"]
  failed = root / entries[1]["name"]
  assert "RuntimeError: diverged" in (failed / "error.txt").read_text()
  assert (
    sweep.run_status(failed) == "failed" and sweep.run_status(root / entries[0]["name"]) == "done"
  )
  assert "training seed 0" in (failed / "log.txt").read_text()
  summary = json.loads((root / "sweep.json").read_text())
  assert [e["status"] for e in summary["runs"]] == ["done", "failed", "done", "done"]
  info = json.loads((root / entries[0]["name"] / "sweep_run.json").read_text())
  assert info["overrides"] == {"seed": 0, "advantage.offset_coef": -0.5, "hadw.enabled": True}
  # Re-run: finished runs are skipped; the failed one is retried and its error cleared.
  train2 = FakeTrain()
  entries = sweep.run_local(
    spec, root, ["steps=2"], train_fn=train2, log=lambda *a: None, compile_cache=False
  )
  assert [e["status"] for e in entries] == ["skipped", "done", "skipped", "skipped"]
  assert train2.calls == [failed.name] and not (failed / "error.txt").exists()


def test_a_preempted_run_stops_the_sweep_without_recording_a_failure(spec, tmp_path):
  from grpo_jax.train.preemption import Preempted

  root = tmp_path / "sweep"
  calls = []

  def preempted(cfg, run_dir, log=print):
    calls.append(run_dir.name)
    raise Preempted(1)

  with pytest.raises(Preempted):
    sweep.run_local(
      spec, root, ["steps=2"], train_fn=preempted, log=lambda *a: None, compile_cache=False
    )
  assert len(calls) == 1  # the later runs were not started
  assert sweep.run_status(root / calls[0]) == "partial"  # resumed by the next sweep command


def test_unfinished_run_with_changed_overrides_is_not_resumed(spec, tmp_path):
  root = tmp_path / "sweep"
  run = sweep.expand(spec)[0]
  # A started, unfinished run (no results.json) under steps=2 ...
  sweep.run_one(spec, root, run, ["steps=2"], train_fn=lambda *a, **k: None, log=lambda *a: None)
  assert sweep.run_status(root / run.name) == "partial"
  # ... is not resumed under another config: the error names both hashes.
  out = sweep.run_one(spec, root, run, ["steps=5"], train_fn=FakeTrain(), log=lambda *a: None)
  assert out["status"] == "failed"
  assert "config hash" in (root / run.name / "error.txt").read_text()
  out = sweep.run_one(spec, root, run, ["steps=2"], train_fn=FakeTrain(), log=lambda *a: None)
  assert out["status"] == "done"


def _inner_argv(command: str) -> list[str]:
  """The launcher argv inside a ``gcloud ... --command=...`` line, read as a shell would."""
  words = shlex.split(command)
  inner = next(w for w in words if w.startswith("--command="))[len("--command=") :]
  cd, repo, amp, *argv = shlex.split(inner)
  assert (cd, amp) == ("cd", "&&")
  return [repo, *argv]


def test_pod_commands_are_one_gcloud_line_per_member_with_auto_detection(spec, tmp_path):
  root = tmp_path / "pod sweep's runs"  # a space and a quote survive the two levels of quoting
  commands = sweep.pod_commands(spec, root, ["steps=2"])
  assert [c.name for c in commands] == [r.name for r in sweep.expand(spec)]
  launch = config_file.load_module(str(ROOT / "experiments/launch.py"))
  for cmd, run in zip(commands, sweep.expand(spec), strict=True):
    words = shlex.split(cmd.command)
    assert words[:6] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "$TPU_NAME"]
    assert words[6:8] == ["--zone=$ZONE", "--worker=all"] and len(words) == 9
    repo, *argv = _inner_argv(cmd.command)
    assert repo == "grpo_jax" and argv == cmd.argv
    assert argv[:2] == ["python", "experiments/launch.py"] and argv[-1] == "--distributed_auto"
    # The launcher reads the member back: its workdir, overrides and auto-detected cluster.
    args, overrides = launch.parse_args(argv[2:])
    assert args.workdir == str(root / run.name) and args.distributed_auto and not args.sweep
    assert overrides == ["steps=2", *run.cli_overrides()]
    assert args.coordinator_address == "" and args.process_id == -1
  named = sweep.pod_commands(spec, root, pod=sweep.Pod("my-v5p", "us-east5-a", "src/g j"))
  words = shlex.split(named[0].command)
  assert words[5:7] == ["my-v5p", "--zone=us-east5-a"]
  assert _inner_argv(named[0].command)[0] == "src/g j"
  # Finished members are left out of a second printing.
  done = commands[1].name
  (root / done).mkdir(parents=True)
  (root / done / "results.json").write_text("{}")
  assert [c.name for c in sweep.pod_commands(spec, root)] == [
    c.name for c in commands if c.name != done
  ]
  text = sweep.format_pod_commands(commands)
  assert text.count("gcloud compute tpus tpu-vm ssh") == 4 and "# run 4/4 " in text


def test_pod_command_runs_through_a_real_shell(spec, tmp_path):
  """bash expands $TPU_NAME / $ZONE and hands the inner command over intact (gcloud, cd and
  python are shell functions here that print their arguments)."""
  cmd = sweep.pod_commands(spec, tmp_path / "a b", ["steps=2"])[0]
  fake = 'gcloud() { printf "%s\\n" "$@"; }; TPU_NAME=v5p-64; ZONE=europe-west4-b; '
  out = subprocess.run(
    ["bash", "-c", fake + cmd.command], capture_output=True, text=True, check=True
  ).stdout
  lines = out.split("\n")
  assert lines[:7] == [
    "compute",
    "tpus",
    "tpu-vm",
    "ssh",
    "v5p-64",
    "--zone=europe-west4-b",
    "--worker=all",
  ]
  inner = "\n".join(lines[7:]).rstrip("\n")[len("--command=") :]
  fake_inner = 'cd() { echo "cd:$1"; }; python() { printf \'%s\\0\' python "$@"; }; '
  out = subprocess.run(
    ["bash", "-c", fake_inner + inner], capture_output=True, text=True, check=True
  ).stdout
  first, _, rest = out.partition("\n")
  assert first == "cd:grpo_jax" and rest.split("\0")[:-1] == cmd.argv


def test_a_run_may_replace_the_config_argument(tmp_path):
  path = tmp_path / "algo.py"
  path.write_text(
    textwrap.dedent("""
    from grpo_jax.config import base_config
    from grpo_jax.config.files import parse_arg

    def get_config(arg=None):
      cfg = base_config()
      cfg.loss.kind = parse_arg(arg).get("algo", "grpo")
      return cfg

    def sweep(add):
      for algo in ("grpo", "gspo"):
        add(arg=f"algo={algo}", **{"hadw.enabled": True})
  """)
  )
  runs = sweep.expand(f"{path}:algo=dapo")
  assert [r.name for r in runs] == ["algo=grpo,hadw.enabled=true", "algo=gspo,hadw.enabled=true"]
  assert sweep.load_run_config(f"{path}:algo=dapo", runs[1]).loss.kind == "gspo"
  assert runs[1].spec(f"{path}:algo=dapo") == f"{path}:algo=gspo"
  (cmd,) = [c for c in sweep.pod_commands(str(path), tmp_path / "r") if "gspo" in c.name]
  assert cmd.argv[2:4] == ["--config", f"{path}:algo=gspo"]


def test_local_sweep_ends_with_the_runs_held_out_results_side_by_side(spec, tmp_path):
  def train(cfg, workdir, log=print):
    if cfg.seed == 1 and cfg.advantage.offset_coef == 0.0:
      raise RuntimeError("diverged")
    after = 0.2 + cfg.seed / 10
    results = {
      when: {"pass@1": p, "pass@1_ci": [p - 0.05, p + 0.05], "pass@8": 2 * p}
      for when, p in (("before", 0.1), ("after", after))
    }
    (workdir / "metrics.jsonl").write_text(json.dumps({"step": cfg.steps}) + "\n")
    (workdir / "results.json").write_text(json.dumps(results))

  root, lines = tmp_path / "sweep", []
  sweep.run_local(spec, root, ["steps=2"], train_fn=train, log=lines.append, compile_cache=False)
  title, *table = lines[-1].splitlines()
  assert title == "held-out pass@k before → after RL, bootstrap 95% CIs:"
  assert table[0] == (
    "| seed | advantage.offset_coef | hadw.enabled | status | steps "
    "| before/pass@1 | after/pass@1 | before/pass@8 | after/pass@8 |"
  )
  assert table[2] == (
    "| 0 | -0.5 | True | done | 2 | 0.100 [0.050, 0.150] | 0.200 [0.150, 0.250] | 0.200 | 0.400 |"
  )
  assert table[5].startswith("| 1 | 0.0 | False | failed | 0 | – |")  # no results: no numbers
  assert len(table) == 2 + 4
  # A rerun that trains nothing prints the same table.
  again = []
  sweep.run_local(spec, root, ["steps=2"], train_fn=train, log=again.append, compile_cache=False)
  assert again[-1].splitlines()[1:] == table


def test_runs_recorded_under_replaced_keys_keep_their_directories(tmp_path):
  """configs/study.py's runs recorded under the three booleans advantage.offset_control replaced
  (their names and sweep_run.json) are its members: the finished ones are skipped, an unfinished
  one resumes in its own directory, and no run starts again under its new name."""
  from tests.runs import fake_study

  root = fake_study.make(tmp_path / "study", seeds=(0, 1), recorded=True)
  old = sorted(p.name for p in root.iterdir())
  spec = "configs/study.py:seeds=2"
  runs = sweep.expand(spec, root)
  assert sorted(r.name for r in runs) == old and len(old) == 2 * 9  # 9 conditions (shrunk too)
  assert all("offset_control" not in r.name for r in runs)
  assert [r.overrides for r in runs] == [r.overrides for r in sweep.expand(spec)]
  unfinished = next(n for n in old if "offset_noise=true" in n)
  (root / unfinished / "results.json").unlink()
  train = FakeTrain()
  entries = sweep.run_local(spec, root, train_fn=train, log=lambda *a: None, compile_cache=False)
  assert [e["status"] for e in entries].count("skipped") == 17 and train.calls == [unfinished]
  assert sorted(p.name for p in root.iterdir() if p.is_dir()) == old
  info = json.loads((root / unfinished / "sweep_run.json").read_text())
  assert info["overrides"]["advantage.offset_control"] == "noise"  # rewritten in today's keys
  assert sorted(r.name for r in sweep.expand(spec, root)) == old
  # Without the root (or in a fresh one) the members take today's names.
  assert all("advantage.offset_control=" in r.name for r in sweep.expand(spec, tmp_path / "new"))
