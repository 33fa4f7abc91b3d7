"""A resumed run's metrics writer drops the steps after the restored checkpoint from
TensorBoard's event files, as from metrics.jsonl: each step appears once."""

from grpo_jax.rundir import read
from grpo_jax.train import tb_events
from grpo_jax.train.metrics import MetricsWriter


def _run(workdir, steps, resume_step=None):
  w = MetricsWriter(workdir, resume_step=resume_step)
  for s in steps:
    w.write(s, {"loss/total": float(s), "reward/mean": 0.5})
  w.close()


def test_resume_purges_tensorboard_past_the_resumed_step(tmp_path):
  _run(tmp_path, range(1, 6))  # steps 1..5 written, the last checkpoint at 3
  assert tb_events.scalars(tmp_path / "tb")["loss/total"] == [1, 2, 3, 4, 5]
  _run(tmp_path, range(4, 7), resume_step=3)
  got = tb_events.scalars(tmp_path / "tb")
  for tag in ("loss/total", "reward/mean"):
    assert got[tag] == [1, 2, 3, 4, 5, 6], tag
  assert [m["step"] for m in read.metrics(tmp_path)] == [1, 2, 3, 4, 5, 6]


def test_values_after_resume_are_the_new_ones(tmp_path):
  _run(tmp_path, range(1, 4))
  w = MetricsWriter(tmp_path, resume_step=1)
  w.write(2, {"loss/total": -2.0})
  w.close()
  values = {
    ev.step: v.simple_value
    for ev in tb_events.read_events(tmp_path / "tb")
    for v in ev.summary.value
    if v.tag == "loss/total"
  }
  assert values == {1: 1.0, 2: -2.0}


TORCH_FREE = """
import sys
from grpo_jax.train import tb_events
from grpo_jax.train.metrics import MetricsWriter

w = MetricsWriter(sys.argv[1])
w.write(1, {"loss/total": 1.0})
w.close()
assert tb_events.scalars(sys.argv[1] + "/tb") == {"loss/total": [1]}
print("torch" in sys.modules)
import torch  # noqa: E402

print(torch.tensor([2.0]).sum().item())
"""


def test_tensorboard_leaves_torch_unimported(tmp_path):
  """tensorboardX's writer imports torch where it is installed (as here): the launcher's
  writer and reader do not, and torch still imports after them."""
  import subprocess
  import sys

  import pytest

  pytest.importorskip("torch")
  out = subprocess.run(
    [sys.executable, "-c", TORCH_FREE, str(tmp_path)], capture_output=True, text=True, check=True
  ).stdout.split()
  assert out == ["False", "2.0"]
