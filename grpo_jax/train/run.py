"""An open run directory: :func:`open_run` gives the :class:`Run` every mode reads (mesh, task,
model, shardings, checkpointer, writers, the restored or initial ``TrainState``) and closes it
on every exit path.

Re-running on the same workdir resumes from the last checkpoint: the train state holds params,
optimizer, HA-DW anchor, step, base RNG and data cursor, and per-step keys are pure functions of
(base RNG, step), so an interrupted run ends with the same parameters as an uninterrupted one.
A workdir with a checkpoint resumes only under the config it started with (up to the resumable
keys, ``grpo_jax.config.resume``) unless ``allow_config_change``, which records the change.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import time
from collections.abc import Callable, Iterator

import jax
from etils import epath

from grpo_jax import data, models
from grpo_jax import sharding as shard_lib
from grpo_jax.config import files as config_file
from grpo_jax.config import provenance, resume
from grpo_jax.config.experiment import Experiment
from grpo_jax.config.fields import ConfigError
from grpo_jax.models import lora as lora_lib
from grpo_jax.models.transformer import compute_params
from grpo_jax.rollout.registry import build_rollout
from grpo_jax.rundir import names, read, write
from grpo_jax.sampling import engine as engine_lib
from grpo_jax.sampling.policy import Policy, SampleSettings
from grpo_jax.sampling.weights import sampler_copy
from grpo_jax.sharding import distributed
from grpo_jax.train import autofit, console, fit
from grpo_jax.train.checkpoint import Checkpointer, abstract_like, restore_tree, save_tree
from grpo_jax.train.length_buckets import LengthAwareUpdate
from grpo_jax.train.metrics import MetricsWriter
from grpo_jax.train.optimizer import make_optimizer
from grpo_jax.train.packing import Packer, check_width
from grpo_jax.train.state import TrainState, init_state
from grpo_jax.train.update import make_update_step
from grpo_jax.train.warmstart import warm_start

# The modes that write the run directory (config.json, checkpoints, metrics); the others read it.
WRITES = ("train", "profile", "presample")


@dataclasses.dataclass
class Setup:
  """What training and evaluation share: mesh, task, model, optimizer and shardings."""

  mesh: jax.sharding.Mesh
  task: object
  rollout: object  # the rollout kind (``grpo_jax.rollout.registry.ROLLOUTS``)
  graphdef: object
  params: dict
  optimizer: object
  state_shapes: TrainState
  state_shardings: TrainState
  sample_shardings: dict
  # params -> the sampler's copy: compute dtype, sampler layout (``sampling.weights``)
  to_sampler: Callable
  # LoRA (``model.lora.rank`` > 0): the adapted model and (base, adapters) -> merged weights
  lora: lora_lib.LoraModel | None = None
  merge: Callable | None = None
  unmerged: bool = False  # LoRA: the sampler reads base and adapters (model.lora.sampler)

  def weights(self, state: TrainState) -> dict:
    """The policy's weights as the sampler, evaluation and the profile read them (with
    :attr:`sampler_graphdef`): ``state.params``; with LoRA the frozen base with the adapters
    merged in, W' = W + (α/r)·A·B, or (``model.lora.sampler = 'unmerged'``) beside it."""
    if self.lora is None:
      return state.params
    if self.unmerged:
      return lora_lib.attach(state.base, state.params)
    return self.merge(state.base, state.params)

  @property
  def sampler_graphdef(self):
    """The graphdef :meth:`weights` are read with: the adapted model's when unmerged."""
    return self.lora.graphdef if self.unmerged else self.graphdef

  def merged(self, weights: dict) -> dict:
    """:meth:`weights` in the base model's layout (``graphdef``: export): unmerged ones merged."""
    if not self.unmerged:
      return weights
    base, adapters = lora_lib.detach(weights)
    return self.merge(base, adapters)

  def update_model(self, graphdef=None):
    """What the update runs (``train.update.UpdateSpec.graphdef``): ``graphdef`` (default the
    run's), or with LoRA the model adapted from it."""
    graphdef = self.graphdef if graphdef is None else graphdef
    return graphdef if self.lora is None else lora_lib.adapt(graphdef, self.params, self.lora.spec)


@dataclasses.dataclass
class Run:
  """An open run directory (:func:`open_run`). ``state``: the restored (or initial) train state
  of the writing modes; ``update`` (train): the update per sampled width; ``rollouts`` (train):
  the ``Prefetcher`` that hands out each step's batch (``grpo_jax.train.step``)."""

  e: Experiment
  workdir: epath.Path
  s: Setup
  ckpt: Checkpointer
  log: Callable
  t_start: float
  record: dict | None = None  # config.json's content
  writer: MetricsWriter | None = None
  state: TrainState | None = None
  policy: Policy | None = None
  update: LengthAwareUpdate | None = None
  rollouts: object = None  # grpo_jax.train.overlap.Prefetcher
  watch: object = None  # grpo_jax.train.preemption.PreemptionWatch

  def write_json(self, name: str, obj) -> None:
    """``workdir/name`` (process 0 writes the run directory)."""
    if distributed.is_primary():
      write.json_file(self.workdir / name, obj)

  def abstract_state(self) -> TrainState:
    return abstract_like(self.s.state_shapes, self.s.state_shardings)


def load_data(e: Experiment, log=print) -> tuple:
  """``(task, rollout)``: the rows read and checked (a malformed row of the researcher's file
  raises ``DataError``), the rollout kind built on them, and ``loss.pack_width`` checked against
  the longest row it can give (``ConfigError``): before any model is built or file written."""
  task = data.build_task(e)
  rollout = build_rollout(e, task)  # one- or two-stage (METHODS §5) by name
  if e.loss.pack:
    check_width(e.loss.pack_width, rollout.prompt_len, fit.response_slots(e))
  log(rollout.describe())
  return task, rollout


def setup(e: Experiment, log=print, loaded: tuple | None = None) -> Setup:
  """Mesh, data, model and the shardings (logical-axis rules, ``grpo_jax.sharding.rules``: FSDP ×
  TP for the train state incl. optimizer moments and reference; tensor-only for the sampler).
  ``loaded``: ``load_data``'s ``(task, rollout)`` when the caller has read the data."""
  mesh = shard_lib.make_mesh(e.mesh)
  B, G = e.sampling.prompts_per_step, e.sampling.group_size
  if (B * G) % shard_lib.batch_size_multiple(mesh):
    raise ValueError(
      f"B·G = {B * G} rows must divide over {shard_lib.batch_size_multiple(mesh)} "
      "data-parallel devices"
    )
  task, rollout = loaded or load_data(e, log)
  graphdef, params = models.build_policy(e, vocab_size=len(task.tokenizer))
  optimizer = make_optimizer(e.optimizer)
  state_shapes = jax.eval_shape(lambda p: init_state(p, optimizer, e), params)
  state_shardings = shard_lib.state_shardings(state_shapes, mesh, shard_lib.rules_for(e.mesh))
  sample_rules = shard_lib.rules_for(e.mesh, "sample")
  unmerged = bool(e.model.lora.rank) and e.model.lora.sampler == "unmerged"
  weights = state_shapes.params if state_shapes.base is None else state_shapes.base  # LoRA
  if unmerged:  # the adapters beside their kernels, split like them
    weights = lora_lib.attach(state_shapes.base, state_shapes.params)
  sample_shardings = shard_lib.state_shardings(weights, mesh, sample_rules)
  to_sampler = sampler_copy(e.model.dtype, sample_shardings)
  s = Setup(
    mesh,
    task,
    rollout,
    graphdef,
    params,
    optimizer,
    state_shapes,
    state_shardings,
    sample_shardings,
    to_sampler,
  )
  spec = lora_lib.LoraSpec.from_config(e.model.lora)
  if spec is None:
    return s
  merge = functools.partial(lora_lib.merge, alpha=spec.alpha, rank=spec.rank)
  merge = jax.jit(merge, out_shardings=state_shardings.base)
  lm = lora_lib.adapt(graphdef, params, spec)
  return dataclasses.replace(s, lora=lm, merge=merge, unmerged=unmerged)


def fit_update(e: Experiment, s: Setup, log=print):
  """(``e`` with its auto keys resolved, ``s`` with the graphdef of its remat, {T: the compiled
  update}): the update at the sampled width T compiled on the run's mesh and shardings, checked
  against the devices' memory (``grpo_jax.train.fit``, ``autofit``); raises ``fit.DoesNotFit``
  naming its bytes."""
  P, T = s.rollout.prompt_len, fit.response_slots(e)
  graphdef = lambda f: autofit.with_remat(s.graphdef, s.params, f.model.remat)

  def build(f):
    model = s.update_model(graphdef(f))
    return make_update_step(model, s.optimizer, f, s.mesh, s.state_shardings, P, T)

  state = fit.abstract(s.state_shapes, s.state_shardings)
  lower_mesh = s.mesh if e.mesh.constrain_activations else None
  shapes = autofit.UpdateShapes(build, state, P, T, s.mesh, lower_mesh)
  # vLLM (the process's one engine) starts here: on a CPU host its memory leaves the budget.
  held = engine_lib.build_engine(e).host_bytes()
  e, fitted = autofit.fit_update(e, shapes, autofit.vocab_size(s.params), log, held)
  return e, dataclasses.replace(s, graphdef=graphdef(e)), {T: fitted}


def length_aware_update(e: Experiment, s: Setup, fitted: dict, log=print) -> LengthAwareUpdate:
  """The update on each batch cut to its longest completion (one compile per bucket width),
  with ``loss.pack`` its real tokens packed into rows."""

  def make_step(completion_len: int):
    P = s.rollout.prompt_len
    model = s.update_model()
    step = make_update_step(model, s.optimizer, e, s.mesh, s.state_shardings, P, completion_len)
    return shard_lib.under_mesh(step, s.mesh) if e.mesh.constrain_activations else step

  packer = None
  if e.loss.pack:
    devices = shard_lib.batch_size_multiple(s.mesh)
    packer = Packer(e.loss, e.sampling.group_size, devices, jax.process_count())
  return LengthAwareUpdate(make_step, s.mesh, e.loss.length_buckets, log, packer, fitted)


def check_guard(e: Experiment, workdir: epath.Path, allow_change: bool, log) -> dict:
  """The resume guard, then the data, then config.json: a changed config (``ConfigChanged``),
  a bad row or pack width stop the run before any file is written. Returns ``{"record":
  config.json's content, "loaded": load_data's (task, rollout)}``."""
  if e.rollout.off_policy_steps and jax.process_count() > 1:
    raise ValueError(
      "config key rollout.off_policy_steps = 1 runs on one process: the rollout thread's "
      "collectives would interleave with the update's in a different order on each process"
    )
  saved = resume.read(workdir)
  before = saved if resume.has_checkpoint(workdir) else None
  changes = resume.check(before, e.to_dict(), workdir, allow_change)
  if before is not None and e.model.lora.rank:
    check_lora_base(e, workdir)
  loaded = load_data(e, log)
  workdir.mkdir(parents=True, exist_ok=True)
  if changes:
    log(
      f"resuming under a changed config (--allow_config_change):\n{resume.format_changes(changes)}"
    )
  record = resume.record(
    saved, e.to_dict(), config_file.content_hash(e), provenance.collect(), changes
  )
  if saved and "data_band" in saved:  # the band's counts stay when --mode=profile rewrites it
    record["data_band"] = saved["data_band"]
  return {"record": record, "loaded": loaded}


def initial_state(run: Run) -> TrainState:
  """The latest checkpoint's state, or (a fresh run) the warm-started policy's, saved as step 0."""
  e, s = run.e, run.s
  at = run.ckpt.latest_step()
  if at is not None:
    state = restore(run, at)
    run.log(f"resumed from checkpoint at step {int(state.step)}")
    return state
  params = s.params
  if e.warmstart.enabled:
    params = shard_lib.replicate(params, s.mesh)
    params, history = warm_start(s.graphdef, params, s.task, e, s.mesh, log=run.log)
    run.write_json(names.WARMSTART, history)
  init = functools.partial(init_state, optimizer=s.optimizer, e=e)
  shardings = s.state_shardings
  placed = shardings.params if shardings.base is None else shardings.base  # LoRA: the base's
  state = shard_lib.init_sharded(init, params, placed, shardings)
  if s.lora is not None:
    run.write_json(names.LORA_BASE, lora_base(e))
    if e.warmstart.enabled:  # the base is no longer the model as built: kept, once
      save_tree(run.workdir / names.LORA_WARM_BASE, state.base)
  run.ckpt.save(0, state)
  run.ckpt.wait()
  return state


def lora_base(e: Experiment) -> dict:
  """The base LoRA adapters belong to: ``model.hf_path`` and a content hash of its files
  (``models.lora.fingerprint``), or a fresh init's seed and architecture."""
  if e.model.hf_path:
    return {"path": str(e.model.hf_path), "hash": lora_lib.fingerprint(e.model.hf_path)}
  model = {k: v for k, v in e.to_dict()["model"].items() if k != "lora"}
  blob = json.dumps(model, sort_keys=True, default=str).encode()
  return {"path": f"init(seed={e.seed})", "hash": hashlib.sha256(blob).hexdigest()[:16]}


def check_lora_base(e: Experiment, workdir: epath.Path) -> None:
  """A resumed LoRA run's adapters must belong to this base: raises ``ConfigError`` naming both
  (before any file is written)."""
  saved = read.json_file(workdir / names.LORA_BASE)
  if saved is not None and saved != lora_base(e):
    raise ConfigError(
      f"{workdir}'s LoRA adapters belong to the base {saved}, not to {lora_base(e)} "
      "(model.hf_path, or the seed of a fresh init)"
    )


def restore(run: Run, step: int) -> TrainState:
  """The checkpoint of ``step``; with LoRA the adapters on their base (the model as built, or
  the warm-started base saved once), refused (naming both) when they belong to another base."""
  s = run.s
  state = run.ckpt.restore(run.abstract_state(), step)
  if s.lora is None:
    return state
  check_lora_base(run.e, run.workdir)
  warm = run.workdir / names.LORA_WARM_BASE
  if warm.exists():  # the warm-started base, as saved once
    abstract = abstract_like(s.state_shapes.base, s.state_shardings.base)
    return state.replace(base=restore_tree(warm, abstract))
  frozen = compute_params(s.params, run.e.model.dtype)
  return state.replace(base=shard_lib.place(frozen, s.state_shardings.base))


def policy_params(run: Run, step: int | None = None) -> tuple:
  """``(params, step)``: the run directory's checkpoint (the latest, or ``step``) or, with no
  checkpoint there, the policy as built (``model.hf_path`` or a fresh init) at step 0."""
  s, latest = run.s, run.ckpt.latest_step()
  if latest is None:
    run.log(f"no checkpoint in {run.workdir}; the policy as built")
    if s.lora is None:
      return shard_lib.place(s.params, s.state_shardings.params), 0 if step is None else step
    init = functools.partial(init_state, optimizer=s.optimizer, e=run.e)  # B = 0: the base
    state = shard_lib.init_sharded(init, s.params, s.state_shardings.base, s.state_shardings)
    return s.weights(state), 0 if step is None else step
  step = latest if step is None else step
  params = s.weights(restore(run, step))
  run.log(f"policy: checkpoint step {step} of {run.workdir}")
  return params, step


@contextlib.contextmanager
def open_run(
  e: Experiment, workdir, mode: str = "train", allow_config_change: bool = False, log=print
) -> Iterator[Run]:
  """The run of ``e`` in ``workdir`` for ``mode`` (``grpo_jax.runs.modes.MODES``). The writing
  modes (:data:`WRITES`) check the resume guard, write config.json, open the metrics writer
  (and W&B) and restore or initialise the state; ``train`` also compiles the update first, so a
  run that does not fit stops before any rollout or checkpoint, with its auto keys resolved.
  Everything opened is closed on every exit path. ``log`` prints on process 0 only."""
  workdir, log = epath.Path(workdir), console.primary_log(log)
  guard = check_guard(e, workdir, allow_config_change, log) if mode in WRITES else {}
  if guard and distributed.is_primary():
    write.json_file(workdir / names.CONFIG, guard["record"])
  t_start = time.time()
  s = setup(e, log=log, loaded=guard.get("loaded"))
  fitted = {}
  if mode == "train":
    e, s, fitted = fit_update(e, s, log)
  with contextlib.ExitStack() as stack:
    ckpt = Checkpointer(workdir / names.CHECKPOINTS, e.checkpoint.every, e.checkpoint.keep)
    run = Run(e, workdir, s, ckpt, log, t_start, record=guard.get("record"))
    if mode in WRITES:
      tracker = None
      if e.logging.wandb and distributed.is_primary():
        from grpo_jax.train.wandb_tracker import WandbTracker  # noqa: PLC0415 (optional)

        tracker = stack.enter_context(contextlib.closing(WandbTracker(e, workdir)))
      run.writer = MetricsWriter(
        workdir,
        e.logging.tensorboard,
        enabled=distributed.is_primary(),
        resume_step=ckpt.latest_step(),
        tracker=tracker,
      )
      stack.callback(run.writer.close)
    stack.callback(ckpt.close)  # closed first: pending saves hold earlier, finite steps
    if mode in WRITES:
      run.state = initial_state(run)
      settings = SampleSettings.from_config(e.sampling)
      run.policy = Policy(s.sampler_graphdef, s.weights(run.state), s.mesh, settings)
    if mode == "train":
      run.update = length_aware_update(e, s, fitted, log)
    yield run


__all__ = [
  "WRITES",
  "Run",
  "Setup",
  "fit_update",
  "load_data",
  "open_run",
  "policy_params",
  "setup",
]
