"""The declaration of the run's config groups: model, data, profile, sampling, warmstart, mesh,
eval, checkpoint, logging. Each field is one key with its default, rules and doc
(:func:`grpo_jax.config.fields.spec`); ``base_config`` and the validation derive from them.
The method's groups (strategy, advantage, hadw, loss, dapo, optimizer) are in ``groups_method``.
"""

from __future__ import annotations

from grpo_jax.config.fields import Group, auto_spec, fail, group, nested, spec

DTYPES = ("bfloat16", "float32")
RULES = ("replicated", "sample", "train")


@group("model.lora")
class Lora(Group):
  """Low-rank adapters W' = W + (alpha/rank)·A·B on the decoder's linear layers; the base W
  stays frozen (METHODS §9, docs/models.md)."""

  rank: int = spec(0, ge=0, doc="r, the adapters' rank; 0 = off (every weight trains)")
  alpha: float = spec(
    32.0,
    gt=0,
    doc="alpha: the update A·B is scaled by alpha/rank (32: TRL's LoRA-without-regret recipe)",
  )
  targets: tuple[str, ...] = spec(
    ("all_linear",),
    choices=("all_linear", "down", "gate", "k", "o", "q", "up", "v"),
    registry="grpo_jax.models.lora.TARGETS",
    doc=(
      "the adapted projections: q, k, v, o (self_attn.{q,k,v,o}_proj), gate, up, down "
      "(mlp.*_proj); all_linear = all seven (the embeddings and lm_head never)"
    ),
  )

  sampler: str = spec(
    "merged",
    choices=("merged", "unmerged"),
    registry="grpo_jax.models.lora.SAMPLERS",
    doc=(
      "what the sampler reads: merged = W + (alpha/rank)·A·B in a copy after each update; "
      "unmerged = the frozen base and the adapters beside it (no second copy of the weights; "
      "jax engine only)"
    ),
  )

  def check(self):
    if self.rank and not self.targets:
      fail("config key model.lora.targets = () names no projection; model.lora.rank > 0 needs one")


@group("model")
class Model(Group):
  """The decoder: a Hugging Face checkpoint (``hf_path``), a named shape (``preset``) or the
  shape fields below, randomly initialised (docs/models.md)."""

  family: str = spec(
    "qwen3",
    choices=("llama", "olmo3", "qwen3"),
    doc="architecture family",
    registry="grpo_jax.models.families.FAMILIES",
  )
  vocab_size: int = spec(0, ge=0, doc="0 = the task tokenizer's size")
  hidden_dim: int = spec(128, ge=1, doc="width of the residual stream")
  num_layers: int = spec(4, ge=1, doc="decoder layers")
  num_heads: int = spec(4, ge=1, doc="query heads")
  num_kv_heads: int = spec(2, ge=1, doc="key/value heads (grouped-query attention)")
  head_dim: int = spec(32, ge=1, doc="width of one head")
  mlp_dim: int = spec(384, ge=1, doc="hidden width of the gated MLP")
  rope_theta: float = spec(10_000.0, gt=0, doc="RoPE base frequency")
  norm_eps: float = spec(1e-6, gt=0, doc="RMSNorm epsilon")
  tie_embeddings: bool = spec(True, doc="the output head reuses the input embedding")
  dtype: str = spec(
    "float32",
    choices=DTYPES,
    doc="compute dtype; log-softmax runs in float32",
    registry="grpo_jax.models.model_config.DTYPES",
  )
  param_dtype: str = spec(
    "float32", choices=DTYPES, doc="parameter dtype", registry="grpo_jax.models.model_config.DTYPES"
  )
  remat: str = spec(
    "auto",
    choices=(
      "auto",
      "dots_saveable",
      "dots_with_no_batch_dims_saveable",
      "full",
      "none",
      "offload",
    ),
    doc=(
      "recompute each layer's activations in the backward pass: full keeps only the layer "
      "input, dots_saveable also every matmul output, dots_with_no_batch_dims_saveable the "
      "projections' outputs, offload moves the layer input to host memory "
      "(grpo_jax/models/remat.py); auto = none if the compiled update fits the devices, else "
      "full (grpo_jax/train/autofit.py)"
    ),
  )
  scan_layers: bool = spec(
    False,
    doc=(
      "stack the decoder layers' params along a leading axis and run them with one lax.scan "
      "(compiled once, not once per layer)"
    ),
  )
  logps_vocab_chunk: int | str = auto_spec(
    "auto",
    ge=0,
    doc=(
      "log-probs over vocabulary chunks of this many entries (online logsumexp), so the "
      "N x T x V logits are never materialised; 0 = one pass over the whole vocabulary; auto "
      "= 0 if the compiled update fits the devices, else 16384 (grpo_jax/train/autofit.py)"
    ),
  )
  hf_path: str = spec(
    "",
    doc=(
      "a Hugging Face checkpoint directory (or hub id) to start from; its config.json sets the "
      "architecture and the shape fields are ignored"
    ),
  )
  preset: str = spec("", doc="a named shape from grpo_jax.models.PRESETS, randomly initialised")
  lora: Lora = nested(Lora, doc="low-rank adapters (model.lora.rank > 0)")

  def check(self):
    if self.preset:
      from grpo_jax.models.presets import PRESETS  # noqa: PLC0415

      if self.preset not in PRESETS:
        fail(f"config key model.preset = {self.preset!r} is not one of {sorted(PRESETS)}")
    # The shape fields only count when neither a checkpoint nor a preset sets the shape.
    if not (self.hf_path or self.preset) and self.num_heads % self.num_kv_heads:
      fail(
        f"config key model.num_heads = {self.num_heads} must be a multiple of "
        f"model.num_kv_heads = {self.num_kv_heads} (grouped-query attention)"
      )


@group("data")
class Data(Group):
  """The prompts, answers and verifier: 'countdown' (the built-in CPU task), 'math', or
  'dataset' (your own rows)."""

  task: str = spec(
    "countdown",
    choices=("countdown", "dataset", "math"),
    doc="the built-in countdown or math task, or your own rows (docs/custom_task.md)",
    registry="grpo_jax.data.registry.TASKS",
  )
  num_numbers: int = spec(3, ge=1, doc="countdown: digits per problem")
  max_number: int = spec(9, ge=1, doc="countdown: the largest digit")
  max_target: int = spec(99, ge=1, doc="countdown: the largest target")
  eval_size: int = spec(
    200,
    ge=0,
    doc="held-out problems, disjoint from the training problems (dataset: with no eval_paths)",
  )
  train_set: str = spec(
    "dapo_math_17k_dedup", doc="math: a catalogue name (grpo_jax.data.math.CATALOGUE)"
  )
  train_path: str = spec(
    "",
    doc="math: a local copy of the training set ('' = the catalogue's); dataset: the rows",
  )
  train_limit: int = spec(
    0,
    ge=0,
    doc=(
      "math: read only the training set's first N rows (after malformed and repeated rows are "
      "dropped, before the prompt-length filter); 0 = every row"
    ),
  )
  eval_sets: tuple[str, ...] = spec(("aime24",), doc="math: the benchmarks evaluated")
  eval_paths: tuple[str, ...] = spec(
    (), doc="math: local copies of eval_sets, in their order; dataset: the evaluation sets"
  )
  template: str = spec(
    "dapo",
    choices=("boxed", "dapo", "hadw"),
    doc="math: the prompt template",
    registry="grpo_jax.data.math.templates.TEMPLATES",
  )
  prompt_key: str = spec(
    "prompt", doc="dataset: the prompt column (a string, or a list of chat messages)"
  )
  answer_key: str = spec("", doc="dataset: the answer column a grader reads ('' = none)")
  bad_rows: str = spec(
    "error",
    choices=("error", "skip"),
    doc="dataset: a malformed row stops the load, or is dropped and counted",
    registry="grpo_jax.data.dataset_task.BAD_ROWS",
  )
  chat_template: str = spec(
    "auto",
    doc=(
      "auto (the tokenizer's chat template with the generation prompt, when it has one; raw "
      "text otherwise) | none (raw text) | the path of a Jinja chat template file"
    ),
  )
  max_prompt_tokens: int = spec(
    512, ge=1, doc="math: the static prompt width; longer prompts are dropped and counted"
  )
  reward_timeout_s: float = spec(5.0, gt=0, doc="math: wall-clock limit of one verifier check")
  reward_workers: int = spec(
    0,
    ge=0,
    doc="math: verifier processes; 0 = one per host core given to the process, <= 64",
    resumable=True,
  )
  level_weights: tuple[float, ...] = spec(
    (),
    ge=0,
    doc=(
      "the generated arithmetic set's relative frequencies of levels 1-5, in training and "
      "held-out problems; () = grpo_jax.data.math.arithmetic.DEFAULT_WEIGHTS"
    ),
  )
  pass_rate_band: tuple[float, ...] = spec(
    (),
    ge=0,
    le=1,
    doc=(
      "(lo, hi): train only on problems whose profiled pass rate (--mode=profile) lies in "
      "[lo, hi]; a group of G is informative with probability 1 - p^G - (1 - p)^G; () = all"
    ),
  )
  pass_rate_file: str = spec("", doc="the profile read by the band; '' = the workdir's")
  reprofile_every: int = spec(
    0, ge=0, doc="re-profile the band's pool with the current policy every k steps; 0 = off"
  )

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


@group("profile")
class Profile(Group):
  """The difficulty profile (--mode=profile; grpo_jax.train.profile), at the sampling settings."""

  num_problems: int = spec(256, ge=0, doc="the first n training problems; 0 = all")
  num_samples: int = spec(16, ge=1, doc="samples per problem")


@group("sampling")
class Sampling(Group):
  """Rollouts: B prompts a step, G responses each."""

  prompts_per_step: int = spec(64, ge=1, doc="B")
  group_size: int = spec(8, ge=1, doc="G")
  max_new_tokens: int = spec(12, ge=1, doc="the response budget (after any preview)")
  temperature: float = spec(1.0, ge=0, doc="0 = greedy")
  top_k: int = spec(0, ge=0, doc="0 = off")
  top_p: float = spec(1.0, gt=0, le=1, doc="1.0 = off")
  decode_slots: int = spec(
    0,
    ge=0,
    doc=(
      "continuous batching: S decode slots serve the rows and a stopped row's slot takes the "
      "next waiting one; a multiple of the mesh's batch devices; 0 = off"
    ),
  )
  engine: str = spec(
    "jax",
    choices=("jax", "vllm"),
    doc=(
      "jax (the jitted sampler on the mesh) | vllm (vLLM in this process on model.hf_path, "
      "weights pushed in memory after each update; the .[vllm] extra)"
    ),
    registry="grpo_jax.sampling.engine.ENGINES",
  )


@group("rollout")
class Rollout(Group):
  """How rollouts and updates interleave (``grpo_jax.train.overlap``)."""

  off_policy_steps: int = spec(
    0,
    ge=0,
    le=1,
    doc=(
      "0 = on-policy; 1 = step k+1's batch is sampled by the parameters before update k, on a "
      "host thread while that update runs (one update stale; loss.rollout_correction weighs it)"
    ),
  )
  join_timeout_s: float = spec(
    60.0,
    gt=0,
    doc=(
      "off_policy_steps = 1, after a failed step: the seconds the loop waits for a rollout "
      "still drawing (once the checkpoints are saved) before it stops without it"
    ),
    resumable=True,
  )


@group("warmstart")
class Warmstart(Group):
  """Supervised warm start on the task's reference solutions, until held-out pass@1 reaches
  ``target_pass1`` (checked every ``check_every`` steps) or ``max_steps``."""

  enabled: bool = spec(True, doc="run the warm start before RL")
  max_steps: int = spec(1500, ge=0, doc="the most supervised steps")
  batch_size: int = spec(32, ge=1, doc="solutions per step")
  learning_rate: float = spec(1e-3, ge=0, doc="AdamW learning rate")
  target_pass1: float = spec(0.2, ge=0, le=1, doc="stop once held-out pass@1 reaches this")
  check_every: int = spec(100, ge=1, doc="steps between pass@1 checks")
  check_problems: int = spec(64, ge=1, doc="held-out problems per check")
  supervise: str = spec(
    "all",
    choices=("all", "format"),
    doc=(
      "all (the reference solution's tokens) | format (the answer line without its digits, and "
      "the end token: how the answer is written, none of the working)"
    ),
    registry="grpo_jax.train.warmstart.SUPERVISE",
  )


@group("mesh")
class Mesh(Group):
  """The device mesh (docs/scaling.md)."""

  data: int = spec(-1, ge=1, off=-1, doc="data-parallel axis; -1 = all remaining devices")
  fsdp: int = spec(1, ge=1, off=-1, doc="parameter-sharded axis; -1 = all remaining devices")
  tensor: int = spec(1, ge=1, off=-1, doc="tensor-parallel axis; -1 = all remaining devices")
  train_rules: str = spec(
    "train",
    choices=RULES,
    doc="logical-axis rules of the update: 'train' splits params and Adam over fsdp x tensor",
    registry="grpo_jax.sharding.rules.PRESETS",
  )
  sample_rules: str = spec(
    "sample",
    choices=RULES,
    doc="logical-axis rules of sampling: 'sample' splits over tensor",
    registry="grpo_jax.sharding.rules.PRESETS",
  )
  constrain_activations: bool = spec(
    True, doc="constrain activations at layer boundaries to rows over data x fsdp"
  )

  def check(self):
    if [self.data, self.fsdp, self.tensor].count(-1) > 1:
      fail("config keys mesh.data / fsdp / tensor: at most one may be -1 (the remaining devices)")


@group("eval")
class Eval(Group):
  """Held-out evaluation: n samples per problem, pass@k for k in ks."""

  num_problems: int = spec(200, ge=0, doc="problems per benchmark; 0 = all")
  num_samples: int = spec(8, ge=1, doc="n")
  ks: tuple[int, ...] = spec((1, 8), ge=1, doc="the k of pass@k, each <= n")
  temperature: float = spec(1.0, ge=0, doc="0 = greedy")
  top_p: float = spec(1.0, gt=0, le=1, doc="1.0 = off")
  with_strategy: bool = spec(False, doc="two-stage (preview, then completions) evaluation")
  every_steps: int = spec(
    0, ge=0, doc="also evaluate every k RL steps; 0 = before and after", resumable=True
  )
  before: bool = spec(True, doc="evaluate before the first RL step", resumable=True)
  after: bool = spec(True, doc="evaluate after the last RL step", resumable=True)


@group("checkpoint")
class Checkpoint(Group):
  """Orbax checkpoints of the train state."""

  RESUMABLE = True  # how often and how many: may change on resume

  every: int = spec(10, ge=1, doc="steps between checkpoints")
  keep: int = spec(2, ge=1, doc="checkpoints kept")


@group("logging")
class Logging(Group):
  """metrics.jsonl always; TensorBoard, plots, samples and Weights & Biases as set here."""

  RESUMABLE = True  # what is written, never what a step computes: may change on resume

  tensorboard: bool = spec(True, doc="TensorBoard event files")
  plot: bool = spec(True, doc="plots of the metrics at the end")
  progress: bool = spec(True, doc="a progress bar")
  samples_per_step: int = spec(4, ge=0, doc="rollouts written per step to samples.jsonl")
  wandb: bool = spec(False, doc="Weights & Biases (pip install grpo_jax[wandb])")
  wandb_project: str = spec("grpo_jax", doc="the W&B project")
  wandb_entity: str = spec("", doc="the W&B entity; '' = the account's default")
  wandb_mode: str = spec(
    "online",
    choices=("disabled", "offline", "online"),
    doc="the W&B mode",
    registry="grpo_jax.train.wandb_tracker.MODES",
  )


__all__ = [
  "Checkpoint",
  "Data",
  "Eval",
  "Logging",
  "Mesh",
  "Model",
  "Profile",
  "Rollout",
  "Sampling",
]
