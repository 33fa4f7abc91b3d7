"""The TPU compile tier: the tiny config's programs compiled for real TPU topologies from this
CPU host (libtpu from the ``[tpu]`` extra; skipped without it, and an error without it when
GRPO_REQUIRE_LIBTPU=1, as .ci/run sets in its own virtualenv for this tier)."""

import json
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpo_jax import sharding as shard_lib
from grpo_jax.config import files
from grpo_jax.planning import compiled, hlo, programs, topology

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(ROOT, "configs", "tiny_test.py")
FSDP_TP = ("mesh.data=1", "mesh.fsdp=2", "mesh.tensor=2")
TWO_STAGE = ("strategy.enabled=True", "strategy.num_previews=2", "strategy.max_preview_tokens=4")


@pytest.fixture(autouse=True, scope="module")
def _libtpu():
  try:
    import libtpu  # noqa: F401
  except ImportError:
    reason = "libtpu is not installed: pip install -e '.[tpu]' compiles for TPU topologies"
    if os.environ.get("GRPO_REQUIRE_LIBTPU") == "1":
      pytest.fail(f"GRPO_REQUIRE_LIBTPU=1 but {reason}")
    pytest.skip(reason)


def _setup(topo: str, overrides=()):
  cfg = files.load(TINY, list(overrides))
  mesh = shard_lib.make_mesh(cfg.mesh, topology.tpu_devices(topo))
  s = programs.shapes(cfg, mesh)
  return s, compiled.param_shapes(s.params, mesh)


def _compile(p, s, shapes):
  return compiled.compile_one(p, s.mesh, shapes, "test")[2]


def tpu_bytes(shape, dtype) -> int:
  """An array's bytes in TPU memory: the two minor dimensions in (8·4/itemsize, 128) tiles (in
  whichever order pads less: XLA picks the layout), vectors and scalars in 128-element tiles."""
  item = np.dtype(dtype).itemsize
  up = lambda x, m: -(-x // m) * m
  if len(shape) <= 1:
    return up(max(1, math.prod(shape)), 128) * item
  *lead, a, b = shape
  sub = 8 * max(1, 4 // item)
  return math.prod(lead) * min(up(a, sub) * up(b, 128), up(b, sub) * up(a, 128)) * item


def sharded_bytes(tree) -> int:
  return sum(tpu_bytes(x.sharding.shard_shape(x.shape), x.dtype) for x in jax.tree.leaves(tree))


@pytest.mark.parametrize(
  "topo, overrides",
  [
    ("v5e:2x2", ()),
    ("v5p:2x2x1", FSDP_TP),
    ("v5e:2x2", ("loss.kl_coef=0.1",)),
    ("v5p:2x2x1", ("loss.pack=True", "loss.micro_batch_size=8")),
    ("v5e:2x2", TWO_STAGE),
  ],
)
def test_update_arguments_are_the_sharded_state_and_batch(topo, overrides):
  s, shapes = _setup(topo, overrides)
  p = programs.update_program(s)
  state, batch = p.args
  # jax drops an argument the program never reads: accuracy_N is HA-DW's, off here, and
  # subgroup_ids_N the strategy's, read by the two-stage rollout's update only.
  unread = {"accuracy_N": None} | ({} if overrides == TWO_STAGE else {"subgroup_ids_N": None})
  want = sharded_bytes(state) + sharded_bytes(batch.replace(**unread))
  assert _compile(p, s, shapes).memory["argument"] == want
  # The same state replicated would be larger on a split mesh: the bytes see the shardings.
  if "mesh.tensor=2" in overrides:
    replicated = jax.tree.map(
      lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=shard_lib.replicated(s.mesh)),
      state,
    )
    assert sharded_bytes(replicated) > sharded_bytes(state)


def test_lora_compiles_with_a_frozen_base_and_a_smaller_state():
  """LoRA's update and reshard compile for the TPU: the update takes the frozen base and the
  adapters (no reference copy, no float32 master or moments of the base), so its arguments are
  smaller than full fine-tuning's with the same KL; the reshard merges the adapters in."""
  lora_ = (*FSDP_TP, "model.lora.rank=4", "loss.kl_coef=0.1", "model.dtype=bfloat16")
  sizes = {}
  for name, overrides in (("full", lora_[:-3] + lora_[-2:]), ("lora", lora_)):
    s, shapes = _setup("v5p:2x2x1", overrides)
    p = programs.update_program(s)
    state, _ = p.args
    assert (state.base is None) == (name == "full") and (state.ref_params is None) == (
      name == "lora"
    )
    sizes[name] = _compile(p, s, shapes).memory["argument"]
    reshard = programs.reshard_program(s)
    assert len(reshard.args) == (2 if name == "lora" else 1)  # merged: base and adapters
    _compile(reshard, s, shapes)
  assert sizes["lora"] < sizes["full"], sizes


def test_unmerged_lora_sampler_compiles_without_a_merged_copy():
  """``model.lora.sampler = 'unmerged'``: the sampler reads the base with the adapters beside it
  (its arguments are the base's bytes plus the adapters', in TPU tiles), the reshard writes the
  cast adapters only (no merged tree), and the base is counted once in the step's peak (the
  sampler's ``shared`` bytes are the base's own)."""
  base = (*FSDP_TP, "model.lora.rank=4", "model.dtype=bfloat16", "mesh.sample_rules=train")
  records = {}
  for kind in ("merged", "unmerged"):
    s, shapes = _setup("v5p:2x2x1", (*base, f"model.lora.sampler={kind}"))
    weights = programs.sampler_params(s)
    names = {str(kp[-1].key) for kp, _ in jax.tree_util.tree_flatten_with_path(weights)[0]}
    assert ("lora_a" in names) == (kind == "unmerged")
    sample = programs.rollout_programs(s, "sample", 2, s.cfg.sampling.group_size)[0]
    reshard = _compile(programs.reshard_program(s), s, shapes)
    records[kind] = (sample, _compile(sample, s, shapes), reshard)
  _, state, _ = programs.train_state(s)
  base_bytes, adapter_bytes = (
    sharded_bytes(state.base),
    sharded_bytes(
      jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, jnp.bfloat16, sharding=x.sharding), state.params
      )
    ),
  )
  (_, merged, merged_reshard), (sample, unmerged, reshard) = records["merged"], records["unmerged"]
  assert records["merged"][0].shared == 0
  assert sample.shared == sum(  # the base's bytes per device (unpadded)
    math.prod(x.sharding.shard_shape(x.shape)) * np.dtype(x.dtype).itemsize
    for x in jax.tree.leaves(state.base)
  )
  assert merged.memory["argument"] == pytest.approx(base_bytes, rel=0.2)
  extra_args = unmerged.memory["argument"] - merged.memory["argument"]
  # the adapters beside the base (at most their bytes in the tiles that pad the most)
  assert 0 < extra_args <= adapter_bytes
  assert merged_reshard.memory["output"] == pytest.approx(base_bytes, rel=0.2)
  assert reshard.memory["output"] <= adapter_bytes  # the cast adapters, no merged tree
  assert reshard.memory["output"] < 0.5 * merged_reshard.memory["output"]


def test_replicated_update_gathers_no_parameter():
  s, shapes = _setup("v5e:2x2")  # data 4: parameters replicated
  assert _compile(programs.update_program(s), s, shapes).param_gathers == ()
  s, shapes = _setup("v5e:2x2", ("mesh.data=1", "mesh.fsdp=4"))  # FSDP: the update gathers
  assert len(_compile(programs.update_program(s), s, shapes).param_gathers) > 0


@pytest.mark.parametrize("rules, gathers", [("sample", False), ("train", True)])
def test_decode_loop_of_fsdp_config_gathers_no_parameter(rules, gathers):
  overrides = ("mesh.data=1", "mesh.fsdp=4", f"mesh.sample_rules={rules}")
  s, shapes = _setup("v5e:2x2", overrides)
  B, G = s.cfg.sampling.prompts_per_step, s.cfg.sampling.group_size
  rec = _compile(programs.rollout_programs(s, "sample", B, G)[0], s, shapes)
  # The sampler layout (weights over tensor only) reads local weights at every decoded token;
  # the train layout (weights over fsdp) would gather them inside the decode loop.
  assert bool(rec.param_gathers_in_loop) is gathers
  assert any(lp.how == "bounded" for lp in rec.hlo.loops)  # the decode loops stop early


def test_loop_flops_weigh_trip_counts_on_tpu_hlo():
  """jax.grad of a 5-step scan of x ← tanh(x·W): 3 matmuls a step (forward, and the backward's
  two), each 2·16·256·256 FLOPs on each of the 4 devices' 16 rows."""
  mesh = jax.sharding.Mesh(np.asarray(topology.tpu_devices("v5e:2x2")).reshape(4), ("data",))

  def loss(w, x):
    y, _ = jax.lax.scan(lambda c, _: (jnp.tanh(c @ w), None), x, None, length=5)
    return jnp.sum(y)

  spec = jax.sharding.PartitionSpec
  w = jax.ShapeDtypeStruct((256, 256), jnp.float32, sharding=jax.NamedSharding(mesh, spec()))
  x = jax.ShapeDtypeStruct((64, 256), jnp.float32, sharding=jax.NamedSharding(mesh, spec("data")))
  text = jax.jit(jax.grad(loss)).lower(w, x).compile().as_text()
  stats = hlo.analyze(text)
  assert stats.matmul_flops == 5 * 3 * 2 * 16 * 256 * 256
  assert stats.matmul_flops_once == 3 * 2 * 16 * 256 * 256
  assert stats.collectives["all-reduce"]["count"] == 1  # the weight's gradient, once


@pytest.mark.parametrize(
  "topo, overrides",
  [
    ("v5e:2x2", ()),
    ("v5p:2x2x1", (*FSDP_TP, *TWO_STAGE, "loss.kl_coef=0.1", "loss.pack=True")),
    ("v5e:2x2", (*FSDP_TP, "model.scan_layers=True", "model.remat=full")),
  ],
)
def test_whole_step_compiles_and_reports(topo, overrides, tmp_path):
  cfg = files.load(TINY, list(overrides))
  report = compiled.compile_config(cfg, topology=topo, log=lambda *_: None, name="tiny")
  names = [r.name for r in report.records]
  two = "strategy.enabled=True" in overrides
  samplers = ["sample_previews", "sample_completions"] if two else ["sample"]
  evals = ["eval_sample"]
  assert names == ["reshard", *samplers, "update", *evals, "prefill", "decode_step"]
  assert report.fits and report.hardware.chips == 4
  update = report.record("update")
  # The model's FLOPs and XLA's agree to the padding and the masked half of attention.
  assert 0.9 < update.flops / update.model_flops < 1.6
  # The peak counts the resident state once plus the largest program's extra bytes.
  extra = max(r.extra(report.state_bytes) for r in report.records if not r.analysis)
  assert report.peak_bytes == report.state_bytes + extra
  js, md = compiled.write(report, tmp_path / "plan")
  data = json.loads(js.read_text())
  assert [p["name"] for p in data["programs"]] == names
  assert data["fits"] is True and "| update |" in md.read_text()


@pytest.mark.parametrize("build", ["update", "sample"])
def test_scanned_and_unrolled_layers_report_the_same_flops(build):
  """The layers' lax.scan is a loop: its trip count must weigh its body (model.scan_layers)."""
  flops = []
  for scan in (False, True):
    overrides = ("model.num_layers=4", f"model.scan_layers={scan}", "model.remat=full")
    s, shapes = _setup("v5e:2x2", overrides)
    B, G = s.cfg.sampling.prompts_per_step, s.cfg.sampling.group_size
    p = programs.update_program(s) if build == "update" else programs.prefill_program(s, B * G, 64)
    rec = _compile(p, s, shapes)
    flops.append(rec.flops)
    if scan:
      assert any(lp.trips == 4 and lp.how == "exact" for lp in rec.hlo.loops)
  assert flops[1] == pytest.approx(flops[0], rel=0.02)
