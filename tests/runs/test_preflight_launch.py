"""What used to fail late now stops the launcher with status 2, a message and no traceback,
before any run directory is written: an external engine that is not installed, a pack width
under the longest row, a malformed row of the researcher's data file (subprocess launches)."""

import pathlib
import resource
import subprocess
import sys

import pytest

from grpo_jax.config.fields import ConfigError
from grpo_jax.train.packing import check_width

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAUNCH = str(ROOT / "experiments/launch.py")
TINY = str(ROOT / "configs/tiny_test.py")
# The launcher in a process where ``import vllm`` fails (find_spec answers None), as without
# the extra.
HIDE_VLLM = (
  f"import runpy, sys; sys.modules['vllm'] = None; runpy.run_path({LAUNCH!r}, run_name='__main__')"
)


def _launch(launcher_env, workdir, *argv, head=(LAUNCH,)):
  """(exit status, stderr, CPU seconds) of the launcher on ``workdir``: its own work, which a
  loaded machine (the suite's other worker) does not stretch as it stretches the wall time."""
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  proc = subprocess.run(
    [sys.executable, *head, *argv, "--workdir", str(workdir)],
    env=launcher_env(1),
    capture_output=True,
    text=True,
    timeout=300,
  )
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
  return proc.returncode, proc.stderr, cpu_s


def _stopped_early(code, err, workdir, message):
  assert code == 2, err[-3000:]
  assert message in err, err[-3000:]
  assert "Traceback" not in err
  assert not workdir.exists()  # no run directory, no config.json


def test_vllm_without_the_extra_names_it(launcher_env, tmp_path):
  (tmp_path / "hf").mkdir()
  (tmp_path / "hf/config.json").write_text("{}")
  workdir = tmp_path / "run"
  argv = [
    "--config",
    TINY,
    "--config.sampling.engine=vllm",
    f"--config.model.hf_path={tmp_path}/hf",
  ]
  code, err, cpu_s = _launch(launcher_env, workdir, *argv, head=("-c", HIDE_VLLM))
  _stopped_early(code, err, workdir, "vllm cannot be imported; install the extra: pip install")
  assert "'.[vllm]'" in err and cpu_s < 5.0


@pytest.mark.parametrize(
  "two_stage, width, longest",
  [(False, 20, 21), (True, 24, 25)],  # P 9 + max_new_tokens 12 (+ 4 preview tokens)
)
def test_a_pack_width_under_the_longest_row_names_both(
  launcher_env, tmp_path, two_stage, width, longest
):
  workdir = tmp_path / "run"
  argv = ["--config", TINY, "--config.loss.pack=true", f"--config.loss.pack_width={width}"]
  argv += [f"--config.strategy.enabled={str(two_stage).lower()}"]
  code, err, cpu_s = _launch(launcher_env, workdir, *argv)
  message = f"loss.pack_width = {width} is below the longest row a rollout can give, {longest}"
  _stopped_early(code, err, workdir, message)
  assert cpu_s < 5.0


def test_check_width_accepts_the_longest_row_and_zero():
  check_width(21, 9, 12)
  check_width(0, 9, 12)  # the row width
  with pytest.raises(ConfigError, match="= 20 is below .* 21 tokens .prompt 9 \\+ response 12"):
    check_width(20, 9, 12)


def test_a_malformed_data_row_names_file_and_line(launcher_env, tmp_path, smollm2_2layer_dir):
  lines = (ROOT / "examples/custom_task/reviews.jsonl").read_text().splitlines()
  lines[5] = lines[5][:40]  # line 6 cut short, as a truncated copy would be
  rows = tmp_path / "reviews.jsonl"
  rows.write_text("\n".join(lines) + "\n")
  workdir = tmp_path / "run"
  argv = ["--config", f"{ROOT}/configs/custom_task.py:tiny=1,hf_path={smollm2_2layer_dir}"]
  argv += [f"--config.data.train_path={rows}"]
  code, err, _ = _launch(launcher_env, workdir, *argv)
  _stopped_early(code, err, workdir, f"{rows}:6: not valid JSON")
