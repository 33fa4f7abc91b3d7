"""Typed, frozen views of the config groups the code reads, built (and so validated) at load.

Each group of :func:`grpo_jax.config.base_config` that the math or the loop reads has a frozen
dataclass here whose field names are the group's keys, so ``cfg.loss.kind`` reads the same on
a ConfigDict and on a view. :func:`build` turns a whole config into an :class:`Experiment`
(``.advantage``, ``.hadw``, ``.loss``, ... and ``.cfg``, the ConfigDict); building checks every
field's type, choices and range and the cross-group rules (``grpo_jax.config.checks``), and
:func:`grpo_jax.config.finalize` runs it before a config is handed out, so a bad value fails
at load with the key and its valid choices, before a model is built or a file written.

The math takes views: ``advantages.compute`` and ``losses.policy_loss`` / ``denominators``
call :func:`of` on what they are given, which passes a view through and converts a ConfigDict
group (tests, notebooks) into its view, with the group's own checks (not the cross-group
ones: a group alone cannot know the others).
"""

from __future__ import annotations

import dataclasses

from ml_collections import ConfigDict

from grpo_jax.config.checks import build_view, check_experiment, fail, spec


class View:
  """Base of the group views: read-only mapping access as on a ConfigDict group."""

  GROUP = ""

  def __getitem__(self, key: str):
    return getattr(self, key)

  def __contains__(self, key: str) -> bool:
    return key in self.keys()

  def keys(self) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(self))

  def get(self, key: str, default=None):
    return getattr(self, key, default)

  def check(self) -> None:
    """The group's cross-field rules (overridden where a group has some)."""

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)


def _view(group: str):
  def wrap(cls):
    cls = dataclasses.dataclass(frozen=True)(cls)
    cls.GROUP = group
    return cls

  return wrap


@_view("model")
class Model(View):
  family: str = spec(choices=True)
  vocab_size: int = spec(ge=0)
  hidden_dim: int = spec(ge=1)
  num_layers: int = spec(ge=1)
  num_heads: int = spec(ge=1)
  num_kv_heads: int = spec(ge=1)
  head_dim: int = spec(ge=1)
  mlp_dim: int = spec(ge=1)
  rope_theta: float = spec(gt=0)
  norm_eps: float = spec(gt=0)
  tie_embeddings: bool = spec()
  dtype: str = spec(choices=True)
  param_dtype: str = spec(choices=True)
  remat: str = spec(choices=True)
  logps_vocab_chunk: int = spec(ge=0)
  hf_path: str = spec()
  preset: str = spec()

  def check(self):
    # The shape fields only count when neither a checkpoint nor a preset sets the shape.
    if not (self.hf_path or self.preset) and self.num_heads % self.num_kv_heads:
      fail(
        f"config key model.num_heads = {self.num_heads} must be a multiple of "
        f"model.num_kv_heads = {self.num_kv_heads} (grouped-query attention)"
      )


@_view("data")
class Data(View):
  task: str = spec(choices=True)
  num_numbers: int = spec(ge=1)
  max_number: int = spec(ge=1)
  max_target: int = spec(ge=1)
  eval_size: int = spec(ge=0)
  train_set: str = spec()
  train_path: str = spec()
  eval_sets: tuple[str, ...] = spec()
  eval_paths: tuple[str, ...] = spec()
  template: str = spec(choices=True)
  chat_template: str = spec()
  max_prompt_tokens: int = spec(ge=1)
  reward_timeout_s: float = spec(gt=0)
  reward_workers: int = spec(ge=0)  # 0 = one per host core
  level_weights: tuple[float, ...] = spec(ge=0)
  pass_rate_band: tuple[float, ...] = spec(ge=0, le=1)
  pass_rate_file: str = spec()
  reprofile_every: int = spec(ge=0, doc="0 = off")

  def check(self):
    if self.level_weights and (len(self.level_weights) != 5 or not sum(self.level_weights)):
      fail(
        f"config key data.level_weights = {self.level_weights} must be 5 non-negative weights "
        "of levels 1-5 with a positive sum, or () for the set's defaults"
      )
    band = self.pass_rate_band
    if band and (len(band) != 2 or band[0] > band[1]):
      fail(f"config key data.pass_rate_band = {band} must be (lo, hi) with lo <= hi, or ()")
    if self.reprofile_every and not band:
      fail("config key data.reprofile_every needs data.pass_rate_band (the band it moves)")


@_view("profile")
class Profile(View):
  num_problems: int = spec(ge=0, doc="0 = every training problem")
  num_samples: int = spec(ge=1)


@_view("sampling")
class Sampling(View):
  prompts_per_step: int = spec(ge=1)
  group_size: int = spec(ge=1)
  max_new_tokens: int = spec(ge=1)
  temperature: float = spec(ge=0)  # 0 = greedy
  top_k: int = spec(ge=0)
  top_p: float = spec(gt=0, le=1)
  decode_slots: int = spec(ge=0, doc="0 = off (no continuous batching)")


@_view("strategy")
class Strategy(View):
  enabled: bool = spec()
  num_previews: int = spec(ge=1)
  source: str = spec(choices=True)
  max_preview_tokens: int = spec(ge=1)
  preview_template: str = spec()
  delimiter: str = spec()
  merge_identical: bool = spec()
  train_on_preview: bool = spec()
  presample_path: str = spec()
  presample_prompts: int = spec(ge=0)

  def check(self):
    if self.enabled and not self.delimiter:
      fail("config key strategy.delimiter = '' must be a non-empty stop string")


@_view("advantage")
class Advantage(View):
  baseline: str = spec(choices=True)
  offset_coef: float = spec()
  scale: str = spec(choices=True)
  scale_of: str = spec(choices=True)
  eps: float = spec(ge=0)
  offset_shuffle: bool = spec()
  offset_shuffle_scope: str = spec(choices=True)
  offset_shuffle_recenter: bool = spec()
  offset_noise: bool = spec()
  offset_magnitude_scramble: bool = spec()
  offset_magnitude_scramble_rebalance: bool = spec()


@_view("hadw")
class Hadw(View):
  enabled: bool = spec()
  anchor: str = spec(choices=True)
  history: int = spec(ge=1)
  include_current: bool = spec()
  lambda_scale: float = spec(gt=0)
  eta: float = spec(ge=0)
  sigma_of: str = spec(choices=True)
  fixed_anchor: float = spec(ge=0, le=1)


@_view("loss")
class Loss(View):
  kind: str = spec(choices=True)
  aggregation: str = spec(choices=True)
  clip_low: float = spec(ge=0, lt=1, off=-1.0, doc="-1 = the kind's default")
  clip_high: float = spec(ge=0, off=-1.0, doc="-1 = the kind's default")
  dual_clip: float = spec(gt=1, off=0.0, doc="0 = off")
  kl_coef: float = spec(ge=0)
  kl_estimator: str = spec(choices=True)
  entropy_coef: float = spec()
  norm_length: int = spec(ge=0)
  ratio_log_clamp: float = spec(gt=0)
  num_iterations: int = spec(ge=1)
  num_minibatches: int = spec(ge=1)
  micro_batch_size: int = spec(ge=0)
  share_prompt: bool = spec()
  length_buckets: int = spec(ge=0, doc="0 = the full width")


@_view("dapo")
class Dapo(View):
  dynamic_sampling: bool = spec()
  oversample: float = spec(ge=1)
  max_sampling_rounds: int = spec(ge=1)
  filter_metric: str = spec(choices=True)
  require_full_batch: bool = spec()
  overlong_filter: bool = spec()
  overlong_penalty: bool = spec()
  overlong_buffer: int = spec(ge=0)
  overlong_penalty_weight: float = spec(ge=0)


@_view("optimizer")
class Optimizer(View):
  learning_rate: float = spec(ge=0)
  warmup_steps: int = spec(ge=0)
  weight_decay: float = spec(ge=0)
  b1: float = spec(ge=0, lt=1)
  b2: float = spec(ge=0, lt=1)
  grad_clip: float = spec(ge=0)  # 0 = off


@_view("warmstart")
class Warmstart(View):
  enabled: bool = spec()
  max_steps: int = spec(ge=0)
  batch_size: int = spec(ge=1)
  learning_rate: float = spec(ge=0)
  target_pass1: float = spec(ge=0, le=1)
  check_every: int = spec(ge=1)
  check_problems: int = spec(ge=1)
  supervise: str = spec(choices=True)


@_view("mesh")
class Mesh(View):
  data: int = spec(ge=1, off=-1, doc="-1 = all remaining devices")
  fsdp: int = spec(ge=1, off=-1, doc="-1 = all remaining devices")
  tensor: int = spec(ge=1, off=-1, doc="-1 = all remaining devices")
  train_rules: str = spec(choices=True)
  sample_rules: str = spec(choices=True)
  constrain_activations: bool = spec()

  def check(self):
    if [self.data, self.fsdp, self.tensor].count(-1) > 1:
      fail("config keys mesh.data / fsdp / tensor: at most one may be -1 (the remaining devices)")


@_view("eval")
class Eval(View):
  num_problems: int = spec(ge=0)
  num_samples: int = spec(ge=1)
  ks: tuple[int, ...] = spec(ge=1)
  temperature: float = spec(ge=0)
  top_p: float = spec(gt=0, le=1)
  with_strategy: bool = spec()
  every_steps: int = spec(ge=0)
  before: bool = spec()
  after: bool = spec()


@_view("checkpoint")
class Checkpoint(View):
  every: int = spec(ge=1)
  keep: int = spec(ge=1)


@_view("logging")
class Logging(View):
  tensorboard: bool = spec()
  plot: bool = spec()
  progress: bool = spec()
  samples_per_step: int = spec(ge=0)
  wandb: bool = spec()
  wandb_project: str = spec()
  wandb_entity: str = spec()
  wandb_mode: str = spec(choices=True)


GROUPS: dict[str, type[View]] = {
  cls.GROUP: cls
  for cls in (
    Model,
    Data,
    Profile,
    Sampling,
    Strategy,
    Advantage,
    Hadw,
    Loss,
    Dapo,
    Optimizer,
    Warmstart,
    Mesh,
    Eval,
    Checkpoint,
    Logging,
  )
}


@dataclasses.dataclass(frozen=True)
class Experiment:
  """Every group's view, plus the top-level keys and the ConfigDict they were built from.

  Reads like the config (``e.loss.kind``, ``"hadw" in e``, ``e["advantage"]``); a key without
  a view falls back to ``cfg``."""

  cfg: ConfigDict
  seed: int
  steps: int
  model: Model
  data: Data
  profile: Profile
  sampling: Sampling
  strategy: Strategy
  advantage: Advantage
  hadw: Hadw
  loss: Loss
  dapo: Dapo
  optimizer: Optimizer
  warmstart: Warmstart
  mesh: Mesh
  eval: Eval
  checkpoint: Checkpoint
  logging: Logging

  def __getattr__(self, key):  # only for names that are not fields
    return getattr(object.__getattribute__(self, "cfg"), key)

  def __getitem__(self, key: str):
    return getattr(self, key)

  def __contains__(self, key: str) -> bool:
    return key in self.cfg


def build(cfg: ConfigDict, cross: bool = True) -> Experiment:
  """The typed views of a whole experiment config; raises ValueError naming the first bad key.

  ``cross=False`` skips the cross-group rules (``checks.check_experiment``)."""
  if isinstance(cfg, Experiment):
    return cfg
  from grpo_jax.config.checks import coerce

  seed, steps = coerce("seed", cfg.seed, int), coerce("steps", cfg.steps, int)
  if steps < 0:
    fail(f"config key steps = {steps} must be >= 0")
  groups = {name: build_view(cls, name, cfg[name]) for name, cls in GROUPS.items()}
  e = Experiment(cfg=cfg, seed=seed, steps=steps, **groups)
  if cross:
    check_experiment(e)
  return e


def of(x, group: str | None = None):
  """The view of ``x``: a view or Experiment as is; a whole ConfigDict config as an Experiment
  (group rules only); a ConfigDict group as its view (``group`` names it, else its key set
  does)."""
  if isinstance(x, View | Experiment):
    return x
  keys = set(x.keys())
  if group is None:
    if {"advantage", "loss"} <= keys:
      return build(x, cross=False)
    matches = [n for n, cls in GROUPS.items() if keys == {f.name for f in dataclasses.fields(cls)}]
    if len(matches) != 1:
      raise ValueError(f"cannot tell which config group has the keys {sorted(keys)}")
    group = matches[0]
  return build_view(GROUPS[group], group, x)


__all__ = ["GROUPS", "Experiment", "View", "build", "of", *(c.__name__ for c in GROUPS.values())]
