"""``launch.py --mode=compile`` without a TPU: targets, errors, and this host's own compile."""

import json
import os
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from grpo_jax.config import files
from grpo_jax.planning import compiled, compiled_table, programs, topology
from grpo_jax.runs import launcher

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(ROOT, "configs", "tiny_test.py")


@pytest.mark.parametrize(
  "target, topo, chips, name",
  [
    ("v5p-128", "", 64, "v5p:4x4x4"),
    ("v5p-8", "", 4, "v5p:2x2x1"),
    ("v5e-8", "", 8, "v5e:2x4"),
    ("v6e-256", "", 256, "v6e:16x16"),
    ("auto", "v5p:4x4x8", 128, "v5p:4x4x8"),
  ],
)
def test_named_slices_resolve(target, topo, chips, name):
  t = topology.resolve(target, topo)
  assert t.topology == name and t.hardware.chips == chips


@pytest.mark.parametrize("target, topo", [("v5p-100", ""), ("tpu-8", ""), ("auto", "v9:2x2")])
def test_unknown_target_lists_the_valid_ones(target, topo):
  with pytest.raises(ValueError) as e:
    topology.resolve(target, topo)
  assert "v5p-128" in str(e.value) and "v5e:2x4" in str(e.value)


def test_bad_target_fails_fast_before_writing(tmp_path, capsys):
  workdir = tmp_path / "run"
  t0 = time.perf_counter()
  code = launcher.main(
    ["--config", TINY, "--mode=compile", "--target", "v5p-100", "--workdir", str(workdir)]
  )
  assert code == 2 and time.perf_counter() - t0 < 5
  assert "v5p-128" in capsys.readouterr().err
  assert not workdir.exists()


def test_missing_libtpu_names_the_extra(monkeypatch, tmp_path, capsys):
  monkeypatch.setitem(sys.modules, "libtpu", None)  # import libtpu raises ImportError
  workdir = tmp_path / "run"
  code = launcher.main(
    ["--config", TINY, "--mode=compile", "--topology", "v5e:2x2", "--workdir", str(workdir)]
  )
  err = capsys.readouterr().err
  assert code == 1 and "libtpu" in err and ".[tpu]" in err
  assert not workdir.exists()


def test_a_program_that_fails_to_compile_is_named():
  mesh = jax.sharding.Mesh(jax.devices()[:1], ("data",))

  def bad(x):
    return x @ x.T[:3]  # (4, 5) @ (3, 4): mismatched contraction

  p = programs.Program("broken_program", jax.jit(bad), (jax.ShapeDtypeStruct((4, 5), "f4"),), {}, 0)
  with pytest.raises(compiled.CompileError) as e:
    compiled.compile_one(p, mesh, set(), "cpu")
  assert "broken_program" in str(e.value) and "cpu" in str(e.value)


def test_default_install_never_imports_libtpu():
  code = (
    "import sys\n"
    "from grpo_jax.runs import launcher\n"
    "from grpo_jax.planning import compiled, programs, topology, hlo\n"
    "topology.resolve('v5p-128')\n"
    "assert 'libtpu' not in sys.modules, 'libtpu imported'\n"
  )
  subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_compile_for_this_host(tmp_path, capsys):
  """--target cpu: the same report for this host's 8 (simulated) devices, written only once
  every program compiled."""
  workdir = tmp_path / "run"
  code = launcher.main(["--config", TINY, "--mode=compile", "--target", "cpu", "--workdir",
                        str(workdir)])  # fmt: skip
  assert code == 0
  data = json.loads((workdir / "plan" / "compiled.json").read_text())
  assert data["mesh"] == {"data": 8, "fsdp": 1, "tensor": 1}
  names = [p["name"] for p in data["programs"]]
  assert names[:3] == ["reshard", "sample", "update"] and names[-1] == "decode_step"
  update = next(p for p in data["programs"] if p["name"] == "update")
  # XLA:CPU pads nothing: the update's arguments are the state's and the batch's bytes.
  cfg = files.load(TINY, [])
  mesh = jax.sharding.Mesh(np.asarray(jax.devices()).reshape(8, 1, 1), ("data", "fsdp", "tensor"))
  s = programs.shapes(cfg, mesh)
  state, batch = programs.update_program(s).args
  # jax drops an argument the program never reads: accuracy_N is HA-DW's, off here, and
  # subgroup_ids_N the strategy's (one-stage sampling here).
  read = batch.replace(accuracy_N=None, subgroup_ids_N=None)
  want = compiled.state_bytes(state) + compiled.state_bytes(read)
  assert update["memory_bytes"]["argument"] == want
  assert "| update |" in capsys.readouterr().out
  # experiments/compile_table.py's row of this report: its target, mesh and fit.
  row = compiled_table.row(data)
  assert row[1:3] == [data["hardware"]["name"], "8×1×1"] and row[6] in ("yes", "**no**")
  lines = compiled_table.table_of_files([workdir / "plan" / "compiled.json"]).splitlines()
  assert lines[2:] == ["| " + " | ".join(row) + " |"]
  # --dry_run on that run directory prints the compiled numbers beside its formulas, for this
  # config only.
  assert launcher.main(["--config", TINY, "--dry_run", "--workdir", str(workdir)]) == 0
  out = capsys.readouterr().out
  compiled_state = data["formula_vs_compiled"]["resident state"]["compiled"] / 2**30
  assert "compiled for CPU host" in out and f"{compiled_state:10.2f}" in out
  argv = ["--config", TINY, "--dry_run", "--workdir", str(workdir), "--config.seed=1"]
  assert launcher.main(argv) == 0
  assert "compiled for" not in capsys.readouterr().out


def test_loop_flops_weigh_trip_counts_on_cpu_hlo():
  """XLA:CPU wraps a loop's `i < n` in a fusion; the trip count is read through it: jax.grad of
  a 5-step scan of x ← tanh(x·W) runs 3 matmuls of 2·16·256·256 FLOPs a step."""
  import jax.numpy as jnp

  from grpo_jax.planning import hlo

  def loss(w, x):
    y, _ = jax.lax.scan(lambda c, _: (jnp.tanh(c @ w), None), x, None, length=5)
    return jnp.sum(y)

  w, x = jax.ShapeDtypeStruct((256, 256), "f4"), jax.ShapeDtypeStruct((16, 256), "f4")
  stats = hlo.analyze(jax.jit(jax.grad(loss)).lower(w, x).compile().as_text())
  assert [(lp.trips, lp.how) for lp in stats.loops] == [(5, "exact")] * 2
  assert stats.matmul_flops == 5 * 3 * 2 * 16 * 256 * 256
