"""``loss.micro_batch_size``, ``model.logps_vocab_chunk`` and ``model.remat`` = "auto": the
update's memory knobs picked at load by compiling the update (``grpo_jax.train.fit``).

Candidates, tried in order until one's compiled update fits the device budget:

* micro-batch: the minibatch's rows m = B·G / loss.num_minibatches (one micro-batch, written 0),
  then m/2, m/4, ... while they divide m (``train.microbatch.num_parts``' rule): the largest
  micro-batch that fits, the fewest gradient-accumulation passes;
* vocabulary chunk, for each micro-batch: 0 (one pass over the whole vocabulary, no chunking
  overhead), then :data:`VOCAB_CHUNK` entries when the vocabulary is larger;
* ``model.remat = "auto"``, for each of those: none, then full (only the layer inputs kept; a
  third more compute), the graphdef rebuilt with it (:func:`with_remat`).

A key set to an int is its only candidate. Where the first candidate fits (every small run),
``auto`` resolves to the old defaults, 0 and 0, and the run's numbers are those of before. The
winning candidate's compiled update is returned with the resolved experiment, so the loop runs
that executable instead of compiling the update again. None fitting is :class:`fit.DoesNotFit`
naming the smallest candidate's bytes.
"""

from __future__ import annotations

import dataclasses

import jax
from flax import nnx

from grpo_jax.config.experiment import Experiment
from grpo_jax.config.fields import AUTO, as_int
from grpo_jax.models import remat as remat_lib
from grpo_jax.models.build import abstract_graphdef
from grpo_jax.train import fit

VOCAB_CHUNK = 16_384  # the README's SmolLM2 example's chunk


def micro_candidates(cfg: Experiment) -> list[int]:
  """0 (the whole minibatch), then the minibatch's rows halved while they divide it."""
  rows = cfg.sampling.prompts_per_step * cfg.sampling.group_size // cfg.loss.num_minibatches
  out, micro = [0], rows // 2
  while micro >= 1 and rows % micro == 0:
    out.append(micro)
    if micro % 2:
      break
    micro //= 2
  return out


def vocab_size(params) -> int:
  """V: the rows of the token embedding (the widest 2-D leaf named ``embed``)."""
  sizes = [
    x.shape[0]
    for path, x in jax.tree_util.tree_flatten_with_path(params)[0]
    if len(x.shape) == 2 and "embed" in jax.tree_util.keystr(path)
  ]
  return max(sizes, default=0)


def vocab_candidates(vocab: int) -> list[int]:
  return [0, VOCAB_CHUNK] if vocab > VOCAB_CHUNK else [0]


def with_knobs(cfg: Experiment, micro: int, chunk: int, remat: str | None = None):
  """``cfg`` (a ``experiment.Experiment``) with the keys set (frozen: a replaced copy); ``remat``
  None keeps the config's."""
  loss = dataclasses.replace(cfg.loss, micro_batch_size=micro)
  remat = cfg.model.remat if remat is None else remat
  model = dataclasses.replace(cfg.model, logps_vocab_chunk=chunk, remat=remat)
  return dataclasses.replace(cfg, loss=loss, model=model)


def with_remat(graphdef, params, remat: str):
  """``graphdef`` rebuilt with ``model.remat = remat`` (the same parameters)."""
  model_cfg = nnx.merge(graphdef, params).cfg
  if model_cfg.remat == remat:
    return graphdef
  return abstract_graphdef(dataclasses.replace(model_cfg, remat=remat))


def candidates(cfg: Experiment, vocab: int) -> list[tuple[int, int, str]]:
  """(micro_batch_size, logps_vocab_chunk, remat) in the order tried (module doc)."""
  micro, chunk, remat = cfg.loss.micro_batch_size, cfg.model.logps_vocab_chunk, cfg.model.remat
  micros = micro_candidates(cfg) if micro == AUTO else [micro]
  chunks = vocab_candidates(vocab) if chunk == AUTO else [chunk]
  remats = ["none", "full"] if remat == AUTO else [remat]
  return [(m, c, r) for m in micros for c in chunks for r in remats]


def first_candidate(cfg: Experiment):
  """``cfg`` with each auto key at its first candidate, 0 (the old defaults): the memory plan
  and ``--mode=compile`` (``grpo_jax.planning``) read this, the program ``auto`` tries first."""
  micro, chunk = as_int(cfg.loss.micro_batch_size), as_int(cfg.model.logps_vocab_chunk)
  return with_knobs(cfg, micro, chunk, remat_lib.built(cfg.model.remat))


@dataclasses.dataclass(frozen=True)
class UpdateShapes:
  """What the update is compiled for: ``build(cfg) -> jitted update`` at the sampled width
  (with the graphdef of ``cfg.model.remat``),
  the abstract train state (with shardings), prompt and response slots, the mesh, and the
  mesh to lower under (``mesh.constrain_activations``) or None."""

  build: object
  state: object
  prompt: int
  response: int
  mesh: object
  lower_mesh: object = None


def fit_update(cfg: Experiment, u: UpdateShapes, vocab: int, log=print, host_bytes: float = 0.0):
  """(``cfg`` with both keys resolved to ints, the compiled update that fits: ``fit.Fitted``).
  ``host_bytes``: host memory an external rollout engine holds, out of a CPU budget
  (``fit.host_share``). Raises ``fit.DoesNotFit`` when no candidate fits."""
  held = fit.host_share(u.mesh, host_bytes)
  budget = fit.device_budget(u.mesh) - held
  device = fit.device_name(u.mesh)
  if held:
    device += f" less the rollout engine's {fit.gib(held)}"
  tried = candidates(cfg, vocab)
  last = None
  for micro, chunk, remat in tried:
    e = with_knobs(cfg, micro, chunk, remat)
    batch = fit.widest_batch(e, u.mesh, u.prompt, u.response)
    last = fit.compile_program("update", u.build(e), (u.state, batch), u.lower_mesh)
    knobs = f"loss.micro_batch_size = {micro}, model.logps_vocab_chunk = {chunk}"
    knobs += f", model.remat = {remat}" if cfg.model.remat == AUTO else ""
    if last.bytes <= budget:
      if len(tried) > 1:
        engine = f", the rollout engine's {fit.gib(held)} out" if held else ""
        log(f"auto: {knobs} (update {fit.gib(last.bytes)} of {fit.gib(budget)} per device{engine})")
      return e, last
    if len(tried) > 1:
      log(f"auto: {knobs} does not fit (update {fit.gib(last.bytes)})")
  hint = f" (tried {len(tried)} settings of the auto keys, this the last)" if len(tried) > 1 else ""
  fit.check(last, budget, device, hint)
  raise AssertionError("unreachable: check raises")


__all__ = [
  "UpdateShapes",
  "candidates",
  "first_candidate",
  "fit_update",
  "micro_candidates",
  "vocab_size",
]
