"""grpo_jax.planning.hlo on hand-written HLO: trip counts, weighted matmul FLOPs, collectives."""

import pytest

from grpo_jax.planning import hlo

# A loop of 7 trips whose body gathers a weight (a loop-carried parameter), multiplies by it and
# all-reduces the product; the entry gathers an activation and multiplies once more.
MODULE = """HloModule m, is_scheduled=true

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %a = f32[] add(%x, %y)
}

%body (p: (s32[], f32[16,64], f32[64,32])) -> (s32[], f32[16,64], f32[64,32]) {
  %p = (s32[], f32[16,64]{1,0}, f32[64,32]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %h = f32[16,64]{1,0} get-tuple-element(%p), index=1
  %w = f32[64,32]{1,0} get-tuple-element(%p), index=2
  %wg = f32[64,128]{1,0} all-gather(%w), channel_id=1, dimensions={1}
  %y = f32[16,128]{1,0} dot(%h, %wg), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %r = f32[16,128]{1,0} all-reduce(%y), channel_id=2, to_apply=%add
  %one = s32[] constant(1)
  %j = s32[] add(%i, %one)
  ROOT %t = (s32[], f32[16,64]{1,0}, f32[64,32]{1,0}) tuple(%j, %h, %w)
}

%cond (q: (s32[], f32[16,64], f32[64,32])) -> pred[] {
  %seven = s32[]{:T(128)} constant(7)
  %q = (s32[], f32[16,64]{1,0}, f32[64,32]{1,0}) parameter(0)
  %k = s32[] get-tuple-element(%q), index=0
  ROOT %lt = pred[] compare(%k, %seven), direction=LT
}

ENTRY %main (a: f32[16,64], b: f32[64,32]) -> f32[32,8] {
  %a = f32[16,64]{1,0} parameter(0)
  %b = f32[64,32]{1,0} parameter(1)
  %zero = s32[] constant(0)
  %init = (s32[], f32[16,64]{1,0}, f32[64,32]{1,0}) tuple(%zero, %a, %b)
  %loop = (s32[], f32[16,64]{1,0}, f32[64,32]{1,0}) while(%init), condition=%cond, body=%body
  %act = f32[16,32]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %g = f32[32,32]{1,0} all-gather(%act), channel_id=3, dimensions={0}
  ROOT %c = f32[32,8]{1,0} convolution(%g, %b2), dim_labels=bf_io->bf
  %b2 = f32[32,8]{1,0} parameter(2)
}
"""


def test_trip_count_weighs_the_loop_body():
  stats = hlo.analyze(MODULE)
  assert [(lp.trips, lp.how) for lp in stats.loops] == [(7, "exact")]
  body = 2 * 16 * 128 * 64  # the loop's dot
  entry = 2 * 16 * 32 * 64 + 2 * 32 * 8 * 32  # the entry's dot and convolution
  assert stats.matmul_flops == 7 * body + entry
  assert stats.matmul_flops_once == body + entry


def test_collectives_by_kind_with_loop_weights():
  c = hlo.analyze(MODULE).collectives
  assert c["all-gather"]["count"] == 7 + 1
  assert c["all-gather"]["bytes"] == 7 * 64 * 128 * 4 + 32 * 32 * 4
  assert c["all-gather"]["loop_count"] == 7
  assert c["all-reduce"] == {
    "count": 7,
    "bytes": 7 * 16 * 128 * 4,
    "loop_count": 7,
    "loop_bytes": 7 * 16 * 128 * 4,
  }
  assert c["reduce-scatter"]["count"] == 0


def test_parameter_gathers_tell_weights_from_activations():
  stats = hlo.analyze(MODULE)
  # Both gathered shapes are "parameter-like"; only the loop's reads a parameter.
  shapes = {hlo.shape_key((64, 128)), hlo.shape_key((32, 32))}
  assert stats.gathers(shapes, in_loop=True) == ["f32[64,128]"]
  assert stats.gathers(shapes, in_loop=False) == []  # the entry's gathers an activation
  assert stats.gathers({hlo.shape_key((8, 8))}) == []


def test_data_dependent_condition_is_a_bound():
  bounded = MODULE.replace(
    "ROOT %lt = pred[] compare(%k, %seven), direction=LT",
    "%lt = pred[] compare(%k, %seven), direction=LT\n  %d = pred[] constant(true)\n"
    "  ROOT %and = pred[] and(%lt, %d)",
  )
  assert [(lp.trips, lp.how) for lp in hlo.analyze(bounded).loops] == [(7, "bounded")]
  unknown = MODULE.replace("direction=LT", "direction=NE")
  assert [(lp.trips, lp.how) for lp in hlo.analyze(unknown).loops] == [(1, "unknown")]


@pytest.mark.parametrize(
  "window, size, taps",
  [
    # The TPU compiler's batched matmul: a window of 8 over an input dilated by 8 lands on
    # one real element per output.
    (hlo.Window(size=8, stride=7, lhs_dilate=8), 8, 1.0),
    # A 1-wide input padded by one each side under a window of 2: 2 outputs, one real tap each.
    (hlo.Window(size=2, pad_low=1, pad_high=1), 1, 1.0),
    # A plain 3-tap window without padding over 10 inputs: every tap real.
    (hlo.Window(size=3), 10, 3.0),
    # Padding 1 each side: 10 outputs, the two edge ones lose a tap: (8·3 + 2·2) / 10.
    (hlo.Window(size=3, pad_low=1, pad_high=1), 10, 2.8),
  ],
)
def test_real_taps(window, size, taps):
  assert hlo.real_taps(window, size) == pytest.approx(taps)


def test_type_bytes():
  assert hlo.type_bytes("bf16[8,128]{1,0:T(8,128)(2,1)}") == 8 * 128 * 2
  assert hlo.type_bytes("(s32[], f32[4,4]{1,0}, /*index=2*/pred[3])") == 4 + 64 + 3


def test_a_conditional_runs_one_branch():
  """Two branches of equal cost behind a conditional count once, not twice."""
  module = MODULE.replace(
    "  %act = f32[16,32]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    "  %p = pred[] constant(true)\n"
    "  %act = f32[16,32]{1,0} conditional(%p, %a, %a), true_computation=%left, "
    "false_computation=%right",
  )
  branch = """
%left (l: f32[16,64]) -> f32[16,32] {
  %l = f32[16,64]{1,0} parameter(0)
  %bl = f32[64,32]{1,0} constant({...})
  ROOT %dl = f32[16,32]{1,0} dot(%l, %bl), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%right (r: f32[16,64]) -> f32[16,32] {
  %r = f32[16,64]{1,0} parameter(0)
  %br = f32[64,32]{1,0} constant({...})
  ROOT %dr = f32[16,32]{1,0} dot(%r, %br), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
  module = module.replace("ENTRY %main", branch + "\nENTRY %main")
  stats = hlo.analyze(module)
  body = 2 * 16 * 128 * 64
  entry = 2 * 16 * 32 * 64 + 2 * 32 * 8 * 32
  assert stats.matmul_flops == 7 * body + entry
