"""LoRA over the params pytree (``grpo_jax.models.lora``, METHODS §9): the targets select their
kernels, A is drawn as PEFT's kaiming-uniform (against torch's own initialiser), at B = 0 the
merged and unmerged logits are the base's bit for bit, with B ≠ 0 merged and unmerged agree and
leave the base, the merge is W + (α/r)·A·B (float64 by hand), adapter gradients match the chain
rule through W', and stacked layers (``scan_layers``) draw and compute the same."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from scipy import stats

from grpo_jax import models
from grpo_jax.models import lora

CFG = models.ModelConfig(
  vocab_size=61,
  hidden_dim=32,
  num_layers=2,
  num_heads=4,
  num_kv_heads=2,
  head_dim=8,
  mlp_dim=48,
  tie_embeddings=False,
)
R, ALPHA = 4, 8.0
PROJ = {
  "q": "self_attn.q_proj",
  "k": "self_attn.k_proj",
  "v": "self_attn.v_proj",
  "o": "self_attn.o_proj",
  "gate": "mlp.gate_proj",
  "up": "mlp.up_proj",
  "down": "mlp.down_proj",
}


def _model(scan: bool = False, dtype: str = "float32"):
  cfg = dataclasses.replace(CFG, scan_layers=scan, dtype=dtype, param_dtype=dtype)
  return models.init_params(cfg, 0)


def _dotted(paths):
  return {".".join(map(str, p)) for p in paths}


def _batch():
  tokens = np.random.RandomState(0).randint(0, 61, (3, 9))
  mask = np.ones_like(tokens)
  mask[1, :3] = 0  # left padding
  return jnp.asarray(tokens), jnp.asarray(mask)


def _random_b(adapters, seed: int = 1, scale: float = 0.3):
  """The adapters with every B drawn N(0, scale²): a trained-looking update."""
  leaves, tree = jax.tree_util.tree_flatten_with_path(adapters)
  keys = jax.random.split(jax.random.key(seed), len(leaves))
  out = [
    scale * jax.random.normal(k, x.shape) if kp[-1].key == lora.B else x
    for (kp, x), k in zip(leaves, keys)
  ]
  return jax.tree.unflatten(jax.tree.structure(adapters), out)


_logits = jax.jit(models.forward, static_argnums=0)


@pytest.mark.parametrize("scan", [False, True], ids=["unrolled", "stacked"])
@pytest.mark.parametrize("target", [*PROJ, "all_linear"])
def test_targets_select_their_kernels(target, scan):
  _, params = _model(scan)
  names = PROJ.values() if target == "all_linear" else [PROJ[target]]
  layers = [""] if scan else [f"{i}." for i in range(CFG.num_layers)]
  want = {f"layers.{i}{n}.kernel" for i in layers for n in names}
  assert _dotted(lora.target_paths(params, (target,))) == want
  adapters = lora.init_adapters(params, R, (target,), jax.random.key(0))
  leaves = jax.tree_util.tree_flatten_with_path(adapters)[0]
  flat = _dotted(tuple(k.key for k in kp) for kp, _ in leaves)
  assert flat == {w.replace(".kernel", f".{ab}") for w in want for ab in (lora.A, lora.B)}
  assert lora.modules((target,)) == tuple(n.split(".")[1] for n in names)


def test_unknown_target_and_bad_spec_fail():
  _, params = _model()
  with pytest.raises(ValueError, match="all_linear"):
    lora.target_paths(params, ("qkv",))
  with pytest.raises(ValueError, match="rank > 0"):
    lora.LoraSpec(0, 8.0)
  assert lora.modules(("v", "q", "all_linear")) == tuple(n.split(".")[1] for n in PROJ.values())


def test_a_is_peft_kaiming_uniform_and_b_is_zero():
  """PEFT: ``nn.init.kaiming_uniform_(lora_A.weight, a=√5)`` on the (r, d_in) torch weight. Our A
  is (d_in, r): its entries must follow torch's distribution for that weight (fan_in d_in = 32,
  not r = 4: a transposed convention would draw from a bound twice as wide)."""
  _, params = _model()
  adapters = lora.init_adapters(params, R, ("q", "k", "v", "gate", "up"), jax.random.key(7))
  a_leaves = [
    x for kp, x in jax.tree_util.tree_flatten_with_path(adapters)[0] if kp[-1].key == lora.A
  ]
  b_leaves = [
    x for kp, x in jax.tree_util.tree_flatten_with_path(adapters)[0] if kp[-1].key == lora.B
  ]
  assert all(a.shape == (32, R) and a.dtype == jnp.float32 for a in a_leaves)
  assert all(not np.any(np.asarray(b)) and b.dtype == jnp.float32 for b in b_leaves)
  ours = np.concatenate([np.ravel(a) for a in a_leaves])
  torch.manual_seed(0)
  ref = torch.cat(
    [torch.nn.init.kaiming_uniform_(torch.empty(R, 32), a=math.sqrt(5)).ravel() for _ in range(40)]
  )
  bound = torch.nn.init.calculate_gain("leaky_relu", math.sqrt(5)) * math.sqrt(3 / 32)
  assert np.abs(ours).max() <= bound and np.abs(ours).max() > 0.95 * bound
  assert stats.ks_2samp(ours, ref.numpy()).pvalue > 1e-3
  wrong = np.random.RandomState(0).uniform(-1 / math.sqrt(R), 1 / math.sqrt(R), ref.numel())
  assert stats.ks_2samp(wrong, ref.numpy()).pvalue < 1e-6  # the test tells the conventions apart
  # Each (layer, projection) draws its own numbers.
  assert len({float(a[0, 0]) for a in a_leaves}) == len(a_leaves)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("scan", [False, True], ids=["unrolled", "stacked"])
def test_at_init_merged_and_unmerged_logits_are_the_base_bit_for_bit(scan, dtype):
  graphdef, params = _model(scan, dtype)
  spec = lora.LoraSpec(R, ALPHA, ("all_linear",))
  adapters = lora.init_adapters(params, R, spec.targets, jax.random.key(0))
  lm = lora.adapt(graphdef, params, spec)
  tokens, mask = _batch()
  base = np.asarray(_logits(*lm.view(params, adapters, "base"), tokens, mask))
  for mode in ("unmerged", "merged"):
    np.testing.assert_array_equal(
      np.asarray(_logits(*lm.view(params, adapters, mode), tokens, mask)), base
    )
  logps = jax.jit(models.token_logps, static_argnums=0)
  np.testing.assert_array_equal(
    np.asarray(logps(*lm.view(params, adapters), tokens, mask)),
    np.asarray(logps(graphdef, params, tokens, mask)),
  )


@pytest.mark.parametrize("targets", [("all_linear",), ("q", "v"), ("down",)])
def test_trained_adapters_merged_equals_unmerged_and_leaves_the_base(targets):
  graphdef, params = _model()
  spec = lora.LoraSpec(R, ALPHA, targets)
  adapters = _random_b(lora.init_adapters(params, R, targets, jax.random.key(0)))
  lm = lora.adapt(graphdef, params, spec)
  tokens, mask = _batch()
  keep = np.asarray(mask, bool)
  base = np.asarray(_logits(*lm.view(params, adapters, "base"), tokens, mask))[keep]
  unmerged = np.asarray(_logits(*lm.view(params, adapters, "unmerged"), tokens, mask))[keep]
  merged = np.asarray(_logits(*lm.view(params, adapters, "merged"), tokens, mask))[keep]
  np.testing.assert_allclose(unmerged, merged, atol=2e-5, rtol=0)
  assert np.abs(merged - base).max() > 0.05
  # The merge, by hand in float64: W' = W + (α/r)·A·B at the targets, every other leaf as it was.
  merged_params = lora.merge(params, adapters, ALPHA, R)
  chosen = _dotted(lora.target_paths(params, targets))
  for kp, w in jax.tree_util.tree_flatten_with_path(params)[0]:
    path = tuple(k.key for k in kp)
    got = np.asarray(
      merged_params[path[0]][path[1]][path[2]][path[3]][path[4]] if len(path) == 5 else w
    )
    if ".".join(map(str, path)) in chosen:
      ab = adapters[path[0]][path[1]][path[2]][path[3]]
      want = np.float64(w) + ALPHA / R * np.float64(ab[lora.A]) @ np.float64(ab[lora.B])
      np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)
      assert np.abs(got - np.asarray(w)).max() > 1e-3
    elif len(path) == 5:
      np.testing.assert_array_equal(got, np.asarray(w))


@pytest.mark.parametrize("at_init", [True, False], ids=["B0", "trained"])
def test_adapter_gradients_follow_the_chain_rule_through_the_merged_kernel(at_init):
  """∂L/∂A = s·G·Bᵀ and ∂L/∂B = s·Aᵀ·G with G = ∂L/∂W' of the merged model and s = α/r: the
  unmerged forward differentiated w.r.t. the adapters alone. At B = 0, ∂L/∂A = 0 and ∂L/∂B ≠ 0
  (the first step moves B only, as in PEFT)."""
  graphdef, params = _model()
  spec = lora.LoraSpec(R, ALPHA, ("all_linear",))
  adapters = lora.init_adapters(params, R, spec.targets, jax.random.key(0))
  adapters = adapters if at_init else _random_b(adapters, scale=0.1)
  lm = lora.adapt(graphdef, params, spec)
  tokens, mask = _batch()

  def loss_of(g, p):
    return -jnp.mean(models.token_logps(g, p, tokens, mask))

  grads = jax.jit(jax.grad(lambda ad: loss_of(*lm.view(params, ad))))(adapters)
  # Only the adapters are differentiated: the gradient tree is theirs, no base leaf in it.
  assert jax.tree.structure(grads) == jax.tree.structure(adapters)
  merged = lora.merge(params, adapters, ALPHA, R)
  g_w = jax.jit(jax.grad(lambda p: loss_of(graphdef, p)))(merged)
  s = ALPHA / R
  for path in lora.target_paths(params, spec.targets):
    module = path[:-1]
    G = np.float64(g_w[module[0]][module[1]][module[2]][module[3]]["kernel"])
    ad = adapters[module[0]][module[1]][module[2]][module[3]]
    gr = grads[module[0]][module[1]][module[2]][module[3]]
    a, b = np.float64(ad[lora.A]), np.float64(ad[lora.B])
    want_a, want_b = s * G @ b.T, s * a.T @ G
    np.testing.assert_allclose(gr[lora.A], want_a, atol=1e-6 + 1e-4 * np.abs(want_a).max())
    np.testing.assert_allclose(gr[lora.B], want_b, atol=1e-6 + 1e-4 * np.abs(want_b).max())
    assert np.abs(gr[lora.B]).max() > 1e-5
    if at_init:
      assert not np.any(np.asarray(gr[lora.A]))
    else:
      assert np.abs(gr[lora.A]).max() > 1e-6


def test_stacked_layers_draw_and_compute_as_unrolled():
  graphdef, params = _model()
  graphdef_s, params_s = _model(scan=True)
  spec = lora.LoraSpec(R, ALPHA, ("q", "o", "up"))
  adapters = _random_b(lora.init_adapters(params, R, spec.targets, jax.random.key(3)))
  stacked = lora.init_adapters(params_s, R, spec.targets, jax.random.key(3))
  # The same A per layer and projection; B zeros of the stacked shape.
  want = models.stack_layers(lora.init_adapters(params, R, spec.targets, jax.random.key(3)))
  jax.tree.map(np.testing.assert_array_equal, stacked, want)
  adapters_s = models.stack_layers(adapters)
  tokens, mask = _batch()
  keep = np.asarray(mask, bool)
  lm, lm_s = lora.adapt(graphdef, params, spec), lora.adapt(graphdef_s, params_s, spec)
  for mode in ("unmerged", "merged"):
    ref = np.asarray(_logits(*lm.view(params, adapters, mode), tokens, mask))[keep]
    got = np.asarray(_logits(*lm_s.view(params_s, adapters_s, mode), tokens, mask))[keep]
    np.testing.assert_allclose(got, ref, atol=2e-5, rtol=0, err_msg=mode)
  # attach / detach are inverse on both layouts.
  for p, ad in ((params, adapters), (params_s, adapters_s)):
    base, back = lora.detach(lora.attach(p, ad))
    jax.tree.map(np.testing.assert_array_equal, back, ad)
    jax.tree.map(np.testing.assert_array_equal, base, p)


def test_string_layer_keys_of_a_checkpoint_round_trip_find_their_kernels():
  graphdef, params = _model()
  spec = lora.LoraSpec(R, ALPHA, ("q", "down"))
  adapters = _random_b(lora.init_adapters(params, R, spec.targets, jax.random.key(0)))
  restored = {"layers": {str(i): v for i, v in adapters["layers"].items()}}
  lm = lora.adapt(graphdef, params, spec)
  tokens, mask = _batch()
  for mode in ("unmerged", "merged"):
    g, p = lm.view(params, restored, mode)
    assert sorted(p["layers"]) == [0, 1]  # no second, string-keyed copy of a layer
    want = _logits(*lm.view(params, adapters, mode), tokens, mask)
    np.testing.assert_array_equal(np.asarray(_logits(g, p, tokens, mask)), np.asarray(want))


def test_misfit_adapters_and_unknown_views_fail():
  graphdef, params = _model()
  spec = lora.LoraSpec(R, ALPHA, ("q",))
  other = lora.init_adapters(_model(scan=True)[1], R, ("q",), jax.random.key(0))
  with pytest.raises((ValueError, KeyError)):
    lora.attach(params, other)
  wide = lora.init_adapters(params, R, ("q",), jax.random.key(0))
  wide["layers"][1]["self_attn"]["q_proj"][lora.B] = jnp.zeros((R + 1, 32))
  with pytest.raises(ValueError, match="do not fit the kernel"):
    lora.attach(params, wide)
  lm = lora.adapt(graphdef, params, spec)
  with pytest.raises(ValueError, match="unmerged"):
    lm.view(params, {}, "fused")


def test_the_sampler_reads_unmerged_adapters_on_stacked_layers():
  """Greedy tokens of the unmerged view equal the merged view's, unrolled and stacked (the
  cached decode slices layer i's adapters out of the stacked ones, as its kernels)."""
  from grpo_jax import sampling  # noqa: PLC0415

  prompt = np.random.RandomState(4).randint(1, 61, (2, 5))
  decode = sampling.Decode(max_new_tokens=8, eos_id=-1, pad_id=0, temperature=0.0)
  seeds = np.asarray([0, 0], np.uint32)
  spec = lora.LoraSpec(R, ALPHA, ("all_linear",))
  runs = {}
  for scan in (False, True):
    graphdef, params = _model(scan)
    adapters = lora.init_adapters(params, R, spec.targets, jax.random.key(0))
    adapters = _random_b(models.unstack_layers(adapters) if scan else adapters, scale=0.5)
    adapters = models.stack_layers(adapters) if scan else adapters
    lm = lora.adapt(graphdef, params, spec)
    for mode in ("unmerged", "merged", "base"):
      g, p = lm.view(params, adapters, mode)
      out = sampling.sample(g, p, prompt, np.ones_like(prompt), seeds, decode)
      runs[scan, mode] = np.asarray(out.tokens_NxT)
  for scan in (False, True):
    np.testing.assert_array_equal(runs[scan, "unmerged"], runs[False, "merged"])
    np.testing.assert_array_equal(runs[scan, "merged"], runs[False, "merged"])
  assert np.any(runs[False, "merged"] != runs[False, "base"])  # the adapters change the tokens


def test_adapter_shapes_without_memory():
  """``init_adapters`` under ``jax.eval_shape`` on abstract params: the adapters' layout (for
  shardings and a memory plan) with nothing allocated."""
  graphdef, abstract = models.abstract_params(dataclasses.replace(CFG, scan_layers=True))
  shapes = jax.eval_shape(
    lambda p: lora.init_adapters(p, R, ("o", "up"), jax.random.key(0)), abstract
  )
  o, up = shapes["layers"]["self_attn"]["o_proj"], shapes["layers"]["mlp"]["up_proj"]
  assert (o[lora.A].shape, o[lora.B].shape) == ((2, 32, R), (2, R, 32))
  assert (up[lora.A].shape, up[lora.B].shape) == ((2, 32, R), (2, R, 48))
  assert {x.dtype for x in jax.tree.leaves(shapes)} == {jnp.dtype(jnp.float32)}


def test_the_base_fingerprint_tells_checkpoints_apart(tmp_path):
  """``fingerprint`` hashes a checkpoint's files (names, sizes, sampled blocks): the same bytes
  give the same hash wherever they lie, other weights another hash."""
  rng = np.random.default_rng(0)
  for name, seed in (("a", 0), ("b", 0), ("c", 1)):
    (tmp_path / name).mkdir()
    data = np.random.default_rng(seed).standard_normal(300_000).astype(np.float32)
    (tmp_path / name / "model.safetensors").write_bytes(data.tobytes())
    (tmp_path / name / "config.json").write_text('{"hidden_size": 8}')
  (tmp_path / "a" / "notes.txt").write_text(str(rng.random()))  # not a weight or config file
  a, b, c = (lora.fingerprint(tmp_path / n) for n in "abc")
  assert a == b and a != c
  assert lora.fingerprint(tmp_path / "a" / "model.safetensors") != a  # one file, not the dir
