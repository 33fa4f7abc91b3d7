# ruff: noqa: E501 (HLO text is one instruction per line)
"""grpo_jax.planning.hlo_bytes: memory traffic per computation, weighed by the loops' trips.

On hand-written HLO against bytes counted by hand (a sliced stacked weight, an in-place update,
fusion bodies left out); on programs XLA:CPU compiles against XLA's own ``bytes accessed``
(loop-free, and a loop's body once), and on a loop of many bytes and no matmul, where the
matmul-FLOPs factor the estimate used to scale by misses the traffic four times over."""

import jax
import jax.numpy as jnp
import pytest

from grpo_jax.planning import hlo, hlo_bytes

# 4 trips of a body that reads its layer of a stacked f32[4,8,16] weight (a fusion that only
# slices it), adds it to the carried f32[8,16], slices two rows and writes them in place into
# the carried f32[4,32] (a fusion rooted at a dynamic-update-slice); the entry squares the result.
MODULE = """HloModule m, is_scheduled=true

%fused_slice (p0: f32[4,8,16], p1: s32[]) -> f32[8,16] {
  %p0 = f32[4,8,16]{2,1,0} parameter(0)
  %p1 = s32[] parameter(1)
  %z = s32[] constant(0)
  %ds = f32[1,8,16]{2,1,0} dynamic-slice(%p0, %p1, %z, %z), dynamic_slice_sizes={1,8,16}
  ROOT %b = f32[8,16]{1,0} bitcast(%ds)
}

%fused_update (q0: f32[4,32], q1: f32[2,16], q2: s32[]) -> f32[4,32] {
  %q0 = f32[4,32]{1,0} parameter(0)
  %q1 = f32[2,16]{1,0} parameter(1)
  %q2 = s32[] parameter(2)
  %r = f32[1,32]{1,0} reshape(%q1)
  %z2 = s32[] constant(0)
  ROOT %u = f32[4,32]{1,0} dynamic-update-slice(%q0, %r, %q2, %z2)
}

%body (p: (s32[], f32[8,16], f32[4,8,16], f32[4,32])) -> (s32[], f32[8,16], f32[4,8,16], f32[4,32]) {
  %p = (s32[], f32[8,16]{1,0}, f32[4,8,16]{2,1,0}, f32[4,32]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %h = f32[8,16]{1,0} get-tuple-element(%p), index=1
  %w = f32[4,8,16]{2,1,0} get-tuple-element(%p), index=2
  %acc = f32[4,32]{1,0} get-tuple-element(%p), index=3
  %wl = f32[8,16]{1,0} fusion(%w, %i), kind=kLoop, calls=%fused_slice
  %y = f32[8,16]{1,0} add(%h, %wl)
  %s = f32[2,16]{1,0} slice(%y), slice={[0:2], [0:16]}
  %acc2 = f32[4,32]{1,0} fusion(%acc, %s, %i), kind=kLoop, calls=%fused_update
  %one = s32[] constant(1)
  %j = s32[] add(%i, %one)
  ROOT %t = (s32[], f32[8,16]{1,0}, f32[4,8,16]{2,1,0}, f32[4,32]{1,0}) tuple(%j, %y, %w, %acc2)
}

%cond (q: (s32[], f32[8,16], f32[4,8,16], f32[4,32])) -> pred[] {
  %q = (s32[], f32[8,16]{1,0}, f32[4,8,16]{2,1,0}, f32[4,32]{1,0}) parameter(0)
  %k = s32[] get-tuple-element(%q), index=0
  %four = s32[] constant(4)
  ROOT %lt = pred[] compare(%k, %four), direction=LT
}

ENTRY %main (a: f32[8,16], w: f32[4,8,16], c: f32[4,32]) -> f32[8,16] {
  %a = f32[8,16]{1,0} parameter(0)
  %w0 = f32[4,8,16]{2,1,0} parameter(1)
  %c = f32[4,32]{1,0} parameter(2)
  %zero = s32[] constant(0)
  %init = (s32[], f32[8,16]{1,0}, f32[4,8,16]{2,1,0}, f32[4,32]{1,0}) tuple(%zero, %a, %w0, %c)
  %loop = (s32[], f32[8,16]{1,0}, f32[4,8,16]{2,1,0}, f32[4,32]{1,0}) while(%init), condition=%cond, body=%body
  %hf = f32[8,16]{1,0} get-tuple-element(%loop), index=1
  ROOT %sq = f32[8,16]{1,0} multiply(%hf, %hf)
}
"""


def test_traffic_by_hand():
  comps = hlo.parse_module(MODULE)
  assert hlo_bytes.control_computations(comps) == {"main", "body", "cond"}
  layer = 8 * 16 * 4  # one layer of the stacked weight, and the carried h
  # body: the slicing fusion reads one layer and the counter and writes a layer; the add reads
  # two and writes one; the slice reads and writes its 2 x 16; the in-place update reads the
  # slice and the counter and writes the slice (not the f32[4,32] buffer); the counter's add.
  body = (layer + 4 + layer) + 3 * layer + 2 * 128 + (128 + 4 + 128) + 3 * 4
  cond = 4 + 4 + 1  # the compare: two s32, one pred
  entry = 3 * layer  # the square
  t = hlo_bytes.traffic(MODULE)
  assert t.once == entry + body + cond
  assert t.weighted == entry + 4 * (body + cond)
  assert t.loop_factor == pytest.approx((entry + 4 * (body + cond)) / (entry + body + cond))
  # compiled.compile_one parses once and hands both readers the computations
  comps = hlo.parse_module(MODULE)
  assert hlo_bytes.traffic(comps) == t
  assert hlo.analyze(comps) == hlo.analyze(MODULE)


def _bytes_accessed(compiled) -> float:
  cost = compiled.cost_analysis()
  return (cost[0] if isinstance(cost, list | tuple) else cost)["bytes accessed"]


def _scan_model(w_LxDxD, x_BxD, unroll):
  def layer(x_BxD, w_DxD):
    return jnp.tanh(x_BxD @ w_DxD) * 1.01 + 0.1, jnp.sum(x_BxD)

  return jax.lax.scan(layer, x_BxD, w_LxDxD, unroll=unroll)


@pytest.mark.parametrize("unroll", [1, True])
def test_once_counted_traffic_is_xlas_bytes_accessed(unroll):
  """XLA's cost analysis counts a loop body once: so does ``once``, to 1%; unrolled, the
  program has no loop and ``weighted`` equals it too."""
  args = (jax.ShapeDtypeStruct((8, 256, 256), jnp.float32),)
  args += (jax.ShapeDtypeStruct((64, 256), jnp.float32),)
  compiled = jax.jit(_scan_model, static_argnums=2).lower(*args, unroll).compile()
  t = hlo_bytes.traffic(compiled.as_text())
  assert t.once == pytest.approx(_bytes_accessed(compiled), rel=0.01)
  if unroll is True:
    assert t.weighted == t.once
  else:  # the layers' weights and activations, eight times
    assert 6 < t.loop_factor < 8.5


def test_a_loop_of_bytes_and_no_matmul_is_weighed_by_its_own_trips():
  """16 passes over a 4 MiB array (read and write) beside 2 trips of a small matmul: the
  traffic is 16 x 8 MiB; the matmul FLOPs' factor (2) would scale XLA's bytes to a quarter."""

  def f(big_N, w_DxD, x_BxD):
    big = jax.lax.fori_loop(0, 16, lambda i, a: jnp.sin(a) * 0.5 + 0.1 * i, big_N)
    x = jax.lax.fori_loop(0, 2, lambda i, x: jnp.tanh(x @ w_DxD), x_BxD)
    return big, x

  args = [jax.ShapeDtypeStruct((1 << 20,), jnp.float32)]
  args += [jax.ShapeDtypeStruct((256, 256), jnp.float32)]
  args += [jax.ShapeDtypeStruct((64, 256), jnp.float32)]
  compiled = jax.jit(f).lower(*args).compile()
  text = compiled.as_text()
  t = hlo_bytes.traffic(text)
  passes = 16 * 2 * (1 << 20) * 4
  assert t.weighted == pytest.approx(passes, rel=0.1)
  assert _bytes_accessed(compiled) * t.loop_factor == pytest.approx(passes, rel=0.1)
  stats = hlo.analyze(text)
  by_flops = _bytes_accessed(compiled) * stats.matmul_flops / stats.matmul_flops_once
  assert by_flops < passes / 3


# The TPU compiler's shapes of the same reads and writes: a fusion whose stacked operand reaches
# its slice through a nested fusion and a bitcast, and a multi-output fusion that updates a
# buffer in place beside a second, ordinary output.
NESTED = """HloModule n, is_scheduled=true

%inner (r0: f32[4,8,16], r1: s32[]) -> f32[8,16] {
  %r0 = f32[4,8,16]{2,1,0} parameter(0)
  %r1 = s32[] parameter(1)
  %zz = s32[] constant(0)
  %cut = f32[1,8,16]{2,1,0} dynamic-slice(%r0, %r1, %zz, %zz), dynamic_slice_sizes={1,8,16}
  ROOT %flat = f32[8,16]{1,0} bitcast(%cut)
}

%outer (o0: f32[4,8,16], o1: s32[], o2: f32[8,16]) -> f32[8,16] {
  %o0 = f32[4,8,16]{2,1,0} parameter(0)
  %o1 = s32[] parameter(1)
  %o2 = f32[8,16]{1,0} parameter(2)
  %view = f32[4,8,16]{2,1,0} bitcast(%o0)
  %layer = f32[8,16]{1,0} fusion(%view, %o1), kind=kLoop, calls=%inner
  ROOT %sum = f32[8,16]{1,0} add(%layer, %o2)
}

%both (m0: f32[4,32], m1: f32[1,32], m2: s32[]) -> (f32[4,32], f32[1,32]) {
  %m0 = f32[4,32]{1,0} parameter(0)
  %m1 = f32[1,32]{1,0} parameter(1)
  %m2 = s32[] parameter(2)
  %z3 = s32[] constant(0)
  %upd = f32[4,32]{1,0} dynamic-update-slice(%m0, %m1, %m2, %z3)
  %neg = f32[1,32]{1,0} negate(%m1)
  ROOT %pair = (f32[4,32]{1,0}, f32[1,32]{1,0}) tuple(%upd, %neg)
}

ENTRY %main (w: f32[4,8,16], i: s32[], h: f32[8,16], c: f32[4,32], u: f32[1,32]) -> f32[8,16] {
  %w = f32[4,8,16]{2,1,0} parameter(0)
  %i = s32[] parameter(1)
  %h = f32[8,16]{1,0} parameter(2)
  %c = f32[4,32]{1,0} parameter(3)
  %u = f32[1,32]{1,0} parameter(4)
  %two = (f32[4,32]{1,0}, f32[1,32]{1,0}) fusion(%c, %u, %i), kind=kLoop, calls=%both
  ROOT %y = f32[8,16]{1,0} fusion(%w, %i, %h), kind=kLoop, calls=%outer
}
"""


def test_nested_slices_and_multi_output_in_place_updates():
  layer, row = 8 * 16 * 4, 32 * 4
  # %two: reads the update row and the index, writes the row in place and its negation;
  # %y: reads one layer of the stack (through the bitcast and the nested fusion), the index
  # and h, and writes a layer.
  two = (row + 4) + (row + row)
  y = (layer + 4 + layer) + layer
  t = hlo_bytes.traffic(NESTED)
  assert t.once == t.weighted == two + y
