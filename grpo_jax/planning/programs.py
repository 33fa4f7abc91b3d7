"""Every jitted program one RL step of a config runs, with abstract arguments at the config's
shapes and shardings, built as the loop builds them: nothing is allocated, no weight is read.

  reshard       train layout -> sampler layout of the parameters (``train.step.draw_batch``)
  sample        the rollout sampler (prefill + decode loops; ``sampling.sampler.program``);
                two-stage: ``sample_previews`` (B·K rows, M new tokens) and
                ``sample_completions`` (B·G rows after context + preview). DAPO's refill
                rounds run the same programs again.
  eval_sample   evaluation's sampler (chunks of problems × eval.num_samples rows)
  update        the update (``train.update.make_update_step``): advantages, the reference
                log-probs when loss.kl_coef != 0, μ optimizer steps over minibatches and
                micro-batches, at the widest bucket (the sampled T), packed with loss.pack
  prefill, decode_step
                the sampler's two passes compiled on their own (not run by the loop), so one
                decoded token's FLOPs and bytes can be read: the decode step at a full cache
                of P + T slots, its cache laid out as the prefill leaves it

Shape letters: B prompts, G group size, K previews, N = B·G rows, P prompt slots, M preview
tokens, T new tokens.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from grpo_jax import sharding as shard_lib
from grpo_jax.config.experiment import Experiment
from grpo_jax.models import lora
from grpo_jax.models.hf_io import abstract_params
from grpo_jax.models.shared_prompt import group_run
from grpo_jax.models.transformer import compute_params
from grpo_jax.planning import dry_run
from grpo_jax.sampling import kv_cache, sampler
from grpo_jax.sampling.policy import SampleSettings
from grpo_jax.sampling.weights import copy_program
from grpo_jax.strategy import layout
from grpo_jax.train import autofit, fit
from grpo_jax.train.optimizer import make_optimizer
from grpo_jax.train.state import init_state
from grpo_jax.train.update import make_update_step

STOP_IDS = (1, 2)  # any ids: the sampler's shapes do not depend on them
PAD_ID = 0


@dataclasses.dataclass(frozen=True)
class Program:
  """One jitted program and the abstract arguments the loop calls it with.

  ``resident``: it takes the resident train state (the update), whose bytes the step's peak
  counts once; ``model_flops``: the model's own FLOPs per device (module ``flops`` below);
  ``tokens``: tokens it processes (a report's tokens per second); ``decode_steps``: for
  decode_step, the steps one rollout runs (T)."""

  name: str
  fn: object  # jitted: .lower(*args, **kwargs)
  args: tuple
  kwargs: dict
  model_flops: float
  tokens: int = 0
  resident: bool = False
  analysis: bool = False  # compiled for its numbers only; the loop does not run it
  decode_steps: int = 0
  shared: float = 0.0  # bytes of its arguments that are resident buffers (sampler_shared_bytes)


abstract = fit.abstract  # ShapeDtypeStructs carrying shardings


@dataclasses.dataclass(frozen=True)
class Shapes:
  """The config's model and widths on a mesh: what every program is built from."""

  cfg: Experiment
  mesh: jax.sharding.Mesh
  model: object  # ModelConfig
  graphdef: object
  params: dict  # ShapeDtypeStructs
  prompt: int  # P (two-stage: the context)
  preview: int  # M (0 one-stage)
  new_tokens: int  # T

  @property
  def devices(self) -> int:
    return shard_lib.batch_size_multiple(self.mesh)


def shapes(cfg: Experiment, mesh) -> Shapes:
  """``cfg``'s shapes on ``mesh``; an auto key (``grpo_jax.train.autofit``) at the value it is
  tried with first (the run's log names the one it picks)."""
  cfg = autofit.first_candidate(cfg)
  prompt, response, vocab = dry_run.widths(cfg)
  mcfg = dry_run.model_config(cfg, vocab)
  graphdef, params = abstract_params(mcfg)
  two = cfg.strategy.enabled and cfg.strategy.num_previews > 1
  preview = cfg.strategy.max_preview_tokens if two else 0
  return Shapes(cfg, mesh, mcfg, graphdef, params, prompt, preview, response - preview)


# ---- model FLOPs (per device; module doc of grpo_jax.planning.compiled) ----------------------


def matmul_params(params) -> tuple[int, int]:
  """(parameters in the decoder layers' matmuls, D·V of the unembedding)."""
  layer = unembed = 0
  for path, x in jax.tree_util.tree_flatten_with_path(params)[0]:
    name = ".".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)
    if len(x.shape) < 2:
      continue
    if "embed_tokens" in name or "lm_head" in name:
      unembed = max(unembed, math.prod(x.shape))
    else:
      layer += math.prod(x.shape)
  return layer, unembed


def forward_flops(s: Shapes, rows: int, length: int, scored: int) -> float:
  """One forward pass over ``rows`` rows of ``length`` tokens, ``scored`` of them unembedded:
  2 · matmul params per token, causal attention 2 · layers · H · Dh · L² per row."""
  layer, unembed = matmul_params(s.params)
  m = s.model
  attention = 2.0 * m.num_layers * m.num_heads * m.head_dim * length**2
  return rows * (2.0 * layer * length + 2.0 * unembed * scored + attention)


def decode_flops(s: Shapes, rows: int, context: float) -> float:
  """One decoded token per row over ``context`` cached slots."""
  layer, unembed = matmul_params(s.params)
  m = s.model
  return rows * (2.0 * (layer + unembed) + 4.0 * m.num_layers * m.num_heads * m.head_dim * context)


def sample_flops(s: Shapes, rows: int, prompt: int, new: int, share: int) -> float:
  """Prefill (each shared prompt once, its last position unembedded) + ``new`` decode steps."""
  prefill = forward_flops(s, rows // share, prompt, 1)
  return prefill + new * decode_flops(s, rows, prompt + (new - 1) / 2)  # linear in the context


# ---- programs --------------------------------------------------------------------------------


def _rows(s: Shapes, n: int, width: int, dtype=jnp.int32):
  return jax.ShapeDtypeStruct((n, width), dtype, sharding=shard_lib.batch_sharding(s.mesh))


def unmerged(s: Shapes) -> bool:
  """LoRA's sampler reads the base with the adapters beside it (``model.lora.sampler``)."""
  return bool(s.cfg.model.lora.rank) and s.cfg.model.lora.sampler == "unmerged"


def sampler_tree(s: Shapes):
  """The weights the sampler reads, as shapes: the model's, or LoRA unmerged the base with the
  adapters attached (``train.run.Setup.weights``)."""
  if not unmerged(s):
    return s.params
  _, state, _ = train_state(s)
  return jax.eval_shape(lora.attach, state.base, state.params)


def sampler_graphdef(s: Shapes):
  """The graphdef the sampler runs (``train.run.Setup.sampler_graphdef``)."""
  if not unmerged(s):
    return s.graphdef
  return lora.adapt(s.graphdef, s.params, lora.LoraSpec.from_config(s.cfg.model.lora)).graphdef


def sampler_shared_bytes(s: Shapes) -> float:
  """Per device, the bytes of the sampler's weights that are the train state's own buffers,
  which the step's peak counts once: LoRA unmerged, the base where it is already in the
  sampler's layout (``sampling.weights.copy_program`` leaves it as it is); else 0."""
  if not unmerged(s):
    return 0.0
  _, state, _ = train_state(s)
  shardings = jax.tree.map(lambda x: x.sharding, sampler_params(s))
  attached = lora.attach(state.base, state.params)
  _, _, moving = copy_program(s.cfg.model.dtype, shardings, attached)
  shard = lambda x: math.prod(x.sharding.shard_shape(x.shape)) * np.dtype(x.dtype).itemsize
  return float(sum(shard(x) for x, m in zip(jax.tree.leaves(attached), moving) if not m))


def sampler_params(s: Shapes):
  """The sampler's copy (``sampling.weights``): the masters in the compute dtype, in the sampler
  layout (``mesh.sample_rules``), as ``train.step.draw_batch`` hands them."""
  rules = shard_lib.rules_for(s.cfg.mesh, "sample")
  cast = jax.eval_shape(lambda p: compute_params(p, s.cfg.model.dtype), sampler_tree(s))
  return abstract(cast, shard_lib.state_shardings(cast, s.mesh, rules))


def sample_program(s: Shapes, name: str, rows: int, prompt: int, new: int, group: int) -> Program:
  """The sampler over ``rows`` rows (padded to the batch devices, as ``draw_rows`` pads them) of
  ``prompt`` slots, ``new`` tokens, in runs of ``group`` identical prompts."""
  rows += -rows % s.devices
  blocks = s.devices if rows % s.devices == 0 else 1
  share = group_run(group, rows, 1, blocks)
  settings = SampleSettings.from_config(s.cfg.sampling)
  settings = dataclasses.replace(settings, max_new_tokens=new)
  decode = settings.decode(STOP_IDS, PAD_ID, prompt_share=share, row_blocks=blocks)
  rng = jax.ShapeDtypeStruct((2,), jnp.uint32, sharding=shard_lib.replicated(s.mesh))
  args = (sampler_params(s), _rows(s, rows, prompt), _rows(s, rows, prompt), rng)
  kwargs = {"graphdef": sampler_graphdef(s), "decode": decode}
  flops = sample_flops(s, rows, prompt, new, share) / s.mesh.size
  fn = sampler.program(decode, rows)
  return Program(name, fn, args, kwargs, flops, rows * new, shared=sampler_shared_bytes(s))


def rollout_programs(s: Shapes, prefix: str, prompts: int, group: int) -> list[Program]:
  """The sampler programs one rollout of ``prompts`` × ``group`` rows runs."""
  cfg = s.cfg
  if not s.preview:
    return [sample_program(s, prefix, prompts * group, s.prompt, s.new_tokens, group)]
  K = cfg.strategy.num_previews
  share = int(np.gcd.reduce(layout.allocate(group, K)))
  return [
    sample_program(s, f"{prefix}_previews", prompts * K, s.prompt, s.preview, K),
    sample_program(
      s, f"{prefix}_completions", prompts * group, s.prompt + s.preview, s.new_tokens, share
    ),
  ]


def eval_programs(s: Shapes) -> list[Program]:
  """Evaluation's sampler: ``train.modes.evaluator``'s chunks of problems × eval.num_samples
  rows."""
  cfg = s.cfg
  B, G, n = cfg.sampling.prompts_per_step, cfg.sampling.group_size, cfg.eval.num_samples
  chunk = B * G // n if (B * G) % n == 0 else B
  ev = dataclasses.replace(s, cfg=_eval_cfg(cfg))
  if not cfg.eval.with_strategy:
    ev = dataclasses.replace(ev, preview=0)
  return rollout_programs(ev, "eval_sample", chunk, n)


def _eval_cfg(cfg: Experiment) -> Experiment:
  """The config as evaluation samples: eval's temperature and top-p, no top-k."""
  e = cfg.eval
  sampling = dataclasses.replace(cfg.sampling, temperature=e.temperature, top_p=e.top_p, top_k=0)
  return dataclasses.replace(cfg, sampling=sampling)


def reshard_program(s: Shapes) -> Program:
  """The masters' move to the sampler's copy (``train.run.setup``'s ``to_sampler``: the leaves
  not yet in the compute dtype and the sampler's layout, ``sampling.weights.copy_program``);
  with LoRA the frozen base with the adapters merged in and moved to the sampler's layout, or
  (unmerged) the adapters cast and moved beside the base, which moves only where the sampler's
  layout differs (``train.run.Setup.weights``, then ``to_sampler``)."""
  shardings = jax.tree.map(lambda x: x.sharding, sampler_params(s))
  dtype = s.cfg.model.dtype
  spec = lora.LoraSpec.from_config(s.cfg.model.lora)
  if spec is None:
    train = shard_lib.state_shardings(s.params, s.mesh, shard_lib.rules_for(s.cfg.mesh))
    fn, args, _ = copy_program(dtype, shardings, abstract(s.params, train))
    return Program("reshard", fn, (args,), {}, 0.0)
  _, state, _ = train_state(s)
  if unmerged(s):
    fn, args, _ = copy_program(dtype, shardings, lora.attach(state.base, state.params))
    return Program("reshard", fn, (args,), {}, 0.0)
  merged = lambda base, adapters: lora.merge(base, adapters, spec.alpha, spec.rank)
  fn = jax.jit(lambda b, a: compute_params(merged(b, a), dtype), out_shardings=shardings)
  return Program("reshard", fn, (state.base, state.params), {}, 0.0)


def update_batch(s: Shapes):
  """The update's batch at its widest (``train.fit.widest_batch``): every row's prompt and
  response real (full length), so packing (loss.pack) needs its most rows."""
  return fit.widest_batch(s.cfg, s.mesh, s.prompt, s.preview + s.new_tokens)


def train_state(s: Shapes):
  """(optimizer, abstract train state with its shardings)."""
  optimizer = make_optimizer(s.cfg.optimizer)
  state = jax.eval_shape(lambda p: init_state(p, optimizer, s.cfg), s.params)
  shardings = shard_lib.state_shardings(state, s.mesh, shard_lib.rules_for(s.cfg.mesh))
  return optimizer, abstract(state, shardings), shardings


def update_program(s: Shapes) -> Program:
  cfg = s.cfg
  optimizer, state, shardings = train_state(s)
  R = s.preview + s.new_tokens
  spec = lora.LoraSpec.from_config(cfg.model.lora)  # LoRA: the update runs the adapted model
  model = s.graphdef if spec is None else lora.adapt(s.graphdef, s.params, spec)
  fn = make_update_step(model, optimizer, cfg, s.mesh, shardings, s.prompt, R)
  batch = update_batch(s)
  N, L = batch.tokens_NxL.shape
  passes = 3 * cfg.loss.num_iterations  # forward + backward of every optimizer step
  passes += 1 if cfg.loss.kl_coef != 0 else 0  # the reference (with LoRA: the base)
  passes += 1 if cfg.loss.num_iterations * cfg.loss.num_minibatches > 1 else 0  # old log-probs
  flops = passes * forward_flops(s, N, L, R) / s.mesh.size
  return Program("update", fn, (state, batch), {}, flops, N * L, resident=True)


def step_programs(s: Shapes) -> list[Program]:
  """The loop's programs in the order one RL step runs them."""
  cfg = s.cfg
  out = [reshard_program(s)]
  if cfg.sampling.engine == "jax":
    B, G = cfg.sampling.prompts_per_step, cfg.sampling.group_size
    out += rollout_programs(s, "sample", B, G)
  out.append(update_program(s))
  if cfg.eval.before or cfg.eval.after or cfg.eval.every_steps:
    out += eval_programs(s)
  return out


# ---- the decode step on its own --------------------------------------------------------------


def _model(graphdef, params_c):
  return nnx.merge(graphdef, params_c)


def prefill_program(s: Shapes, rows: int, slots: int) -> Program:
  """The prefill alone over ``rows`` rows into a cache of ``slots`` slots (prompts unshared)."""
  dtype = s.model.compute_dtype

  def prefill(params, prompt_NxP, mask_NxP):
    model = _model(sampler_graphdef(s), compute_params(params, dtype))
    return kv_cache.prefill(model, prompt_NxP, mask_NxP, slots)

  args = (sampler_params(s), _rows(s, rows, s.prompt), _rows(s, rows, s.prompt))
  flops = forward_flops(s, rows, s.prompt, 1) / s.mesh.size
  return Program("prefill", jax.jit(prefill), args, {}, flops, rows * s.prompt, analysis=True)


def decode_step_program(s: Shapes, rows: int, cache) -> Program:
  """One decode step at a full cache (``cache``: abstract, laid out as the prefill leaves it),
  reading the weights in the compute dtype as the sampler's loop does."""
  params_c = sampler_params(s)
  token = jax.ShapeDtypeStruct((rows,), jnp.int32, sharding=shard_lib.batch_sharding(s.mesh))

  def step(params_c, token_N, cache):
    return kv_cache.decode_step(_model(sampler_graphdef(s), params_c), token_N, cache)

  slots = s.prompt + s.preview + s.new_tokens
  flops = decode_flops(s, rows, slots) / s.mesh.size
  return Program(
    "decode_step",
    jax.jit(step, donate_argnums=2),
    (params_c, token, cache),
    {},
    flops,
    rows,
    analysis=True,
    decode_steps=s.new_tokens,
  )


__all__ = [
  "Program",
  "Shapes",
  "abstract",
  "decode_step_program",
  "eval_programs",
  "prefill_program",
  "rollout_programs",
  "sample_program",
  "shapes",
  "step_programs",
  "update_program",
]
