"""The declaration of the method's config groups: strategy, advantage, hadw, loss, dapo,
optimizer. Each field is one key with its default, rules and doc
(:func:`grpo_jax.config.fields.spec`); the formulas are in docs/advantages.md, docs/losses.md
and docs/strategy.md.
"""

from __future__ import annotations

from grpo_jax.config.fields import Group, auto_spec, fail, group, spec


@group("strategy")
class Strategy(Group):
  """Strategy-conditioned two-stage sampling (docs/strategy.md): K previews per prompt, then
  G/K completions on prompt + preview; the subgroup id is the preview's index."""

  enabled: bool = spec(False, doc="off (or num_previews = 1) = one-stage GRPO sampling")
  num_previews: int = spec(4, ge=1, doc="K")
  source: str = spec(
    "presampled",
    choices=("online", "presampled", "file"),
    doc=(
      "presampled (drawn once by the initial policy) | online (by the current policy) | file "
      "(K of strategy.file's hints per prompt, drawn each step)"
    ),
  )
  file: str = spec(
    "",
    doc=(
      "with source = 'file': a JSONL of {id, strategies: [text, ...]} rows (id '*' serves "
      "every problem without a row), or a shipped file's name ('arithmetic')"
    ),
  )
  max_preview_tokens: int = spec(4, ge=1, doc="the preview's budget; responses hold it too")
  preview_template: str = spec("", doc="text after the prompt that asks for the preview")
  delimiter: str = spec(
    ";",
    doc=(
      "the stop string that ends a preview: the first token whose decoded text completes it is "
      "the preview's last (also when the tokenizer merges it into a larger token)"
    ),
  )
  merge_identical: bool = spec(
    False, doc="previews equal after whitespace and case folding share a subgroup"
  )
  train_on_preview: bool = spec(False, doc="preview tokens in the loss mask (never rewarded)")
  presample_path: str = spec("", doc="the presampled previews; '' = <workdir>/presample")
  presample_prompts: int = spec(0, ge=0, doc="prompts to presample; 0 = steps x B")

  def check(self):
    if self.enabled and not self.delimiter:
      fail("config key strategy.delimiter = '' must be a non-empty stop string")
    if self.enabled and self.source == "file" and not self.file:
      fail("config key strategy.source = 'file' needs strategy.file (a JSONL path or 'arithmetic')")
    if self.enabled and self.source == "file" and self.train_on_preview:
      fail(
        "config key strategy.train_on_preview = True with strategy.source = 'file': a hint "
        "from the file is not the policy's action, so it cannot be trained on"
      )


@group("reward")
class Reward(Group):
  """Own reward functions (docs/custom_task.md), called as TRL's ``reward_funcs``:
  ``fn(prompts, completions, **columns) -> list[float | None]``; () = the task's grader."""

  functions: tuple[str, ...] = spec(
    (),
    doc="'module:fn', 'path/to/file.py:fn' or a built-in grader ('math', 'countdown')",
  )
  weights: tuple[float, ...] = spec((), doc="one weight per function; () = 1 each")

  def check(self):
    from grpo_jax.rewards.functions import check_name  # noqa: PLC0415

    for name in self.functions:
      problem = check_name(name)
      if problem:
        fail(f"config key reward.functions: {problem}")
    if self.weights and len(self.weights) != len(self.functions):
      fail(
        f"config key reward.weights = {self.weights} needs one weight per function of "
        f"reward.functions = {self.functions}, or ()"
      )


@group("advantage")
class Advantage(Group):
  """The baseline and normalisation (docs/advantages.md)."""

  baseline: str = spec(
    "group",
    choices=("group", "rloo", "subgroup_offset"),
    doc="b_i: the group mean, leave-one-out, or the group mean + alpha x the subgroup's offset",
    registry="grpo_jax.advantages.baselines.BASELINES",
  )
  offset_coef: float = spec(0.0, doc="alpha in b_i = mu_g + alpha * delta_s")
  scale: str = spec(
    "group",
    choices=("batch", "group", "none"),
    doc="the std that divides the advantages",
    registry="grpo_jax.advantages.normalize.SCALES",
  )
  scale_of: str = spec(
    "rewards",
    choices=("advantages", "rewards"),
    doc="what that std is taken of",
    registry="grpo_jax.advantages.normalize.SCALE_OF",
  )
  eps: float = spec(1e-6, ge=0, doc="added to the std")
  offset_control: str = spec(
    "none",
    choices=("magnitude_scramble", "noise", "none", "shuffle"),
    doc=(
      "the offsets the baseline uses: none, the real ones; the controls shuffle (permuted "
      "across subgroups), noise (zero-sum Gaussian noise of each prompt's row-weighted RMS), "
      "magnitude_scramble (each subgroup's own sign, another's magnitude)"
    ),
    registry="grpo_jax.advantages.offset_controls.OFFSET_CONTROLS",
  )
  offset_shuffle_scope: str = spec(
    "prompt",
    choices=("batch", "prompt"),
    doc="the shuffle permutes within a prompt or the batch",
    registry="grpo_jax.advantages.shuffle.SCOPES",
  )
  offset_shuffle_recenter: bool = spec(
    False, doc="recentre the shuffled offsets to zero row-weighted mean per prompt"
  )
  offset_magnitude_scramble_rebalance: bool = spec(
    True, doc="scale both signs' scrambled offsets back to the real mass (zero-sum advantages)"
  )
  offset_strength: str = spec(
    "fixed",
    choices=("fixed", "shrunk"),
    doc=(
      "fixed: b_i = mu_g + alpha * delta_s; shrunk: mu_g + alpha * lambda_g * delta_s, lambda_g "
      "the empirical-Bayes reliability of group g's offsets (METHODS 7.19)"
    ),
    registry="grpo_jax.advantages.partition.STRENGTHS",
  )
  offset_strength_scope: str = spec(
    "batch",
    choices=("batch", "group"),
    doc="shrunk: the between-subgroup variance tau^2 pooled over the step, or each group's own",
    registry="grpo_jax.advantages.partition.STRENGTH_SCOPES",
  )

  def check(self):
    if self.offset_strength == "shrunk" and self.baseline != "subgroup_offset":
      fail(
        "config key advantage.offset_strength = 'shrunk' scales the offsets of "
        f"advantage.baseline = 'subgroup_offset'; with {self.baseline!r} it has no effect "
        "(or set advantage.offset_strength = 'fixed')"
      )


@group("hadw")
class Hadw(Group):
  """HA-DW (arXiv 2601.08521; docs/advantages.md): a history-aware difficulty anchor
  reweights each advantage."""

  enabled: bool = spec(False, doc="reweight the advantages")
  anchor: str = spec(
    "window",
    choices=("fixed", "kalman", "window"),
    doc="how the anchor C_t is tracked",
    registry="grpo_jax.advantages.hadw.ANCHORS",
  )
  history: int = spec(10, ge=1, doc="h (window) and m (kalman sigma buffer)")
  include_current: bool = spec(False, doc="the anchor includes the current step's accuracy")
  lambda_scale: float = spec(1.3, gt=0, doc="lambda, the weight's scale")
  eta: float = spec(0.1, ge=0, doc="kalman: the base forgetting factor")
  sigma_of: str = spec(
    "beliefs",
    choices=("beliefs", "observations"),
    doc="kalman: what sigma is taken of",
    registry="grpo_jax.advantages.hadw.SIGMA_OF",
  )
  fixed_anchor: float = spec(0.5, ge=0, le=1, doc="fixed: the anchor")


@group("loss")
class Loss(Group):
  """The policy loss (docs/losses.md) and the update's passes over a batch."""

  kind: str = spec(
    "grpo",
    choices=("cispo", "dapo", "gmpo", "grpo", "gspo", "sapo"),
    doc="the per-token loss, its ratio and default clip range (docs/losses.md)",
    registry="grpo_jax.losses.policy.LOSS_KINDS",
  )
  aggregation: str = spec(
    "token_mean",
    choices=("seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm", "token_mean"),
    doc="how token terms reduce to the loss",
    registry="grpo_jax.losses.aggregation.AGGREGATIONS",
  )
  clip_low: float = spec(
    -1.0,
    ge=0,
    off=-1.0,
    doc="epsilon_low (<= 1 on a ratio; gmpo: of the log-ratio); -1 = the kind's default",
  )
  clip_high: float = spec(-1.0, ge=0, off=-1.0, doc="epsilon_high; -1 = the kind's default")
  dual_clip: float = spec(
    0.0, gt=1, off=0.0, doc="c > 1 bounds negative-advantage terms (grpo, dapo, gspo); 0 = off"
  )
  sapo_tau_pos: float = spec(1.0, gt=0, doc="sapo: the gate's temperature where A > 0")
  sapo_tau_neg: float = spec(1.05, gt=0, doc="sapo: the gate's temperature where A <= 0")
  entropy_control: str = spec(
    "none",
    choices=("clip_cov", "kl_cov", "none"),
    doc=(
      "the high-covariance tokens' terms: clip_cov drops a random few (no gradient), kl_cov "
      "adds kl_cov_coef x |log-ratio| to the top ones (Clip-Cov / KL-Cov, arXiv 2505.22617)"
    ),
    registry="grpo_jax.losses.entropy_control.CONTROLS",
  )
  clip_cov_ratio: float = spec(
    2e-4, gt=0, le=1, doc="clip_cov: at most max(floor(r x valid tokens), 1) tokens dropped"
  )
  clip_cov_lb: float = spec(1.0, doc="clip_cov: candidates have covariance above it")
  clip_cov_ub: float = spec(5.0, doc="clip_cov: candidates have covariance below it")
  kl_cov_ratio: float = spec(
    2e-4, gt=0, le=1, doc="kl_cov: the max(floor(r x valid tokens), 1) largest covariances"
  )
  kl_cov_coef: float = spec(1.0, gt=0, doc="kl_cov: the penalty's weight (verl's ppo_kl_coef)")
  kl_coef: float = spec(0.0, ge=0, doc="beta of the KL to the reference model; 0 = no reference")
  kl_estimator: str = spec(
    "k3",
    choices=("k1", "k2", "k3"),
    doc="the KL estimator",
    registry="grpo_jax.losses.kl.KL_ESTIMATORS",
  )
  entropy_coef: float = spec(0.0, doc="entropy bonus")
  norm_length: int = spec(
    0, ge=0, doc="T_max of seq_mean_token_sum_norm (Dr. GRPO); 0 = the response slots T"
  )
  ratio_log_clamp: float = spec(
    20.0, gt=0, doc="|log-ratio| bound before exp (per token; GSPO: on log s_i)"
  )
  rollout_correction: str = spec(
    "auto",
    choices=("auto", "geo_mis", "none", "seq_mis", "seq_tis", "token_tis"),
    doc=(
      "sampler-trainer mismatch correction, verl's presets (IS weights, rejection); auto = "
      "token_tis with an external engine or off-policy rollouts, else none (set at load)"
    ),
    registry="grpo_jax.losses.correction.CORRECTIONS",
  )
  rollout_is_cap: float = spec(2.0, gt=1, doc="c: IS weights are truncated above at c")
  rollout_rs_high: float = spec(
    -1.0,
    gt=1,
    off=-1.0,
    doc="the highest row ratio rejection keeps; -1 = the preset's (seq_mis 2.0, geo_mis 1.001)",
  )
  rollout_rs_low: float = spec(
    -1.0, gt=0, lt=1, off=-1.0, doc="the lowest row ratio rejection keeps; -1 = 1/high"
  )
  rollout_veto: float = spec(
    -1.0,
    ge=0,
    lt=1,
    off=-1.0,
    doc="rows with a token ratio below it are rejected; 0 = off, -1 = the preset's (geo_mis 1e-4)",
  )
  num_iterations: int = spec(
    1, ge=1, doc="passes over the batch; with mu > 1 steps the old log-probs are recomputed"
  )
  num_minibatches: int = spec(1, ge=1, doc="optimizer steps per pass (rows split evenly)")
  micro_batch_size: int | str = auto_spec(
    "auto",
    ge=0,
    doc=(
      "rows per gradient-accumulation chunk; 0 = a whole minibatch; auto = the largest "
      "(0, then the minibatch's rows halved) whose compiled update fits the devices "
      "(grpo_jax/train/autofit.py)"
    ),
  )
  share_prompt: bool = spec(
    False,
    doc="each group's prompt runs once in the update's forward passes (Prefix Grouper)",
  )
  length_buckets: int = spec(
    4,
    ge=0,
    doc=(
      "the update runs on the batch cut to its longest completion, rounded up to one of n "
      "widths ceil(T / 2^k); 0 or 1 = always the full width T"
    ),
  )
  pack: bool = spec(
    False,
    doc=(
      "the update's forward passes run on the real tokens packed into rows with segment ids "
      "(padding-free; shared prompts once per segment with share_prompt)"
    ),
  )
  pack_width: int = spec(
    0, ge=0, doc="pack: token slots of a packed row; 0 = the update's row width P + T"
  )

  def check(self):
    if self.pack_width and not self.pack:
      fail(f"config key loss.pack_width = {self.pack_width} needs loss.pack = True (or 0)")
    self._check_kind()
    self._check_entropy_control()
    rejecting = self.rollout_correction in ("seq_mis", "geo_mis")
    for key in ("rollout_rs_high", "rollout_rs_low"):
      if getattr(self, key) != -1.0 and not rejecting:
        fail(
          f"config key loss.{key} = {getattr(self, key)} needs a rejecting "
          f"loss.rollout_correction ('seq_mis' or 'geo_mis'), not {self.rollout_correction!r}"
        )
    if 0 < self.rollout_rs_high <= self.rollout_rs_low:
      fail(
        f"config key loss.rollout_rs_low = {self.rollout_rs_low} must be below "
        f"loss.rollout_rs_high = {self.rollout_rs_high}"
      )

  def _unset(self, *keys: str) -> tuple[str, ...]:
    """Those of ``keys`` (loss keys) set away from their declared default."""
    fields = type(self).__dataclass_fields__
    return tuple(k for k in keys if getattr(self, k) != fields[k].default)

  def _check_kind(self):
    kind = self.kind
    if self.clip_low > 1 and kind != "gmpo":
      fail(
        f"config key loss.clip_low = {self.clip_low} must be <= 1 for loss.kind = {kind!r}: "
        "the ratio's lower bound 1 - clip_low is at least 0 (gmpo clips log-ratios)"
      )
    if self.dual_clip and kind not in ("dapo", "grpo", "gspo"):
      fail(
        f"config key loss.dual_clip = {self.dual_clip} bounds the PPO surrogate of grpo, dapo "
        f"and gspo; loss.kind = {kind!r} has none (set it to 0)"
      )
    clips = ("clip_low", "clip_high")
    for key in self._unset(*clips) if kind == "sapo" else ():
      fail(f"config key loss.{key} = {getattr(self, key)}: loss.kind = 'sapo' has no clip")
    for key in () if kind == "sapo" else self._unset("sapo_tau_pos", "sapo_tau_neg"):
      fail(f"config key loss.{key} = {getattr(self, key)} needs loss.kind = 'sapo'")

  def _check_entropy_control(self):
    control = self.entropy_control
    for name, keys in (
      ("clip_cov", ("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub")),
      ("kl_cov", ("kl_cov_ratio", "kl_cov_coef")),
    ):
      for key in () if control == name else self._unset(*keys):
        fail(
          f"config key loss.{key} = {getattr(self, key)} needs loss.entropy_control = "
          f"{name!r}, not {control!r}"
        )
    if self.clip_cov_lb >= self.clip_cov_ub:
      fail(
        f"config key loss.clip_cov_lb = {self.clip_cov_lb} must be below loss.clip_cov_ub = "
        f"{self.clip_cov_ub}"
      )
    if control == "kl_cov" and self.num_iterations * self.num_minibatches == 1:
      fail(
        "config key loss.entropy_control = 'kl_cov' penalises |log pi - log pi_old|, which is 0 "
        "at one optimizer step a batch (pi_old is pi): set loss.num_minibatches or "
        "loss.num_iterations above 1"
      )


@group("dapo")
class Dapo(Group):
  """DAPO's extras (Yu et al. 2025; docs/losses.md), applied to a step's rollouts before the
  update."""

  dynamic_sampling: bool = spec(
    False, doc="drop groups whose filter_metric is all equal and sample more prompts"
  )
  oversample: float = spec(1.0, ge=1, doc="prompts per sampling round = ceil(oversample x B)")
  max_sampling_rounds: int = spec(3, ge=1, doc="the most sampling rounds a step")
  filter_metric: str = spec(
    "acc",
    choices=("acc", "seq_reward"),
    doc="what 'all equal' is judged on: the verifier's accuracy, or the shaped reward",
    registry="grpo_jax.rollout.dynamic_sampling.FILTER_METRICS",
  )
  require_full_batch: bool = spec(
    False, doc="fail when fewer than B groups survive; else train on them (rows padded)"
  )
  overlong_filter: bool = spec(
    False, doc="mask truncated responses (no end token within the budget) out of the loss"
  )
  overlong_penalty: bool = spec(
    False,
    doc="reward += weight x max(-(L - (L_max - buffer)) / buffer, -1) where L > L_max - buffer",
  )
  overlong_buffer: int = spec(4, ge=0, doc="the penalty's buffer, in tokens")
  overlong_penalty_weight: float = spec(1.0, ge=0, doc="the penalty's weight")


@group("optimizer")
class Optimizer(Group):
  """AdamW with linear warmup, constant after, and global-norm clipping."""

  learning_rate: float = spec(2e-4, ge=0, doc="peak learning rate")
  warmup_steps: int = spec(5, ge=0, doc="linear warmup steps")
  weight_decay: float = spec(0.0, ge=0, doc="decoupled weight decay")
  b1: float = spec(0.9, ge=0, lt=1, doc="Adam beta1")
  b2: float = spec(0.99, ge=0, lt=1, doc="Adam beta2")
  grad_clip: float = spec(1.0, ge=0, doc="global gradient-norm bound; 0 = off")


__all__ = ["Advantage", "Dapo", "Hadw", "Loss", "Optimizer", "Reward", "Strategy"]
