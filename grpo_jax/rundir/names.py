"""Every file name of a run directory and of a sweep's root, read and written by the loop, the
sweeps, the evaluation and the aggregation alike (``grpo_jax.rundir.read`` reads them)."""

# A run directory.
CONFIG = "config.json"  # the config, its hashes, provenance and recorded changes
METRICS = "metrics.jsonl"  # one line of scalars per step
SAMPLES = "samples.jsonl"  # a few sampled rollouts per step
RESULTS = "results.json"  # a finished run's summary
WARMSTART = "warmstart.json"  # the warm start's loss and pass@1 history
LORA_BASE = "lora_base.json"  # LoRA: the base the adapters belong to (path, content hash)
LORA_WARM_BASE = "lora_base"  # LoRA after a warm start: the warm-started base, saved once
STRATEGY_PREVIEWS = "strategy_previews.json"  # success rate per preview (two-stage runs)
WANDB_ID = "wandb_id.txt"  # the W&B run id, so a resumed run continues it
CHECKPOINTS = "checkpoints"  # orbax step directories
TENSORBOARD = "tb"  # TensorBoard event files
PLOTS = "plots"  # figures drawn at the end
REWARD_CURVE = "reward_curve.png"  # under PLOTS
EVAL = "eval"  # one benchmark's results per evaluated step, and their summary
EVAL_RESULT = "{benchmark}_step{step}.json"  # under EVAL: pass@k, maj@k, lengths, per level
EVAL_PROBLEMS = "{benchmark}_step{step}_problems.jsonl"  # under EVAL: one line per problem
EVAL_SUMMARY = "summary.md"  # under EVAL: pass@k over steps
PROFILE = "profile"  # the difficulty profile
PASS_RATES = "pass_rates.jsonl"  # under PROFILE: the pool's pass rates at step 0
PASS_RATES_AT = "pass_rates_step{step}.jsonl"  # under PROFILE: re-profiled after step k
BAND_AT = "band_step{step}.json"  # under PROFILE: the difficulty band after step k
PREFETCH = "prefetch"  # the batch drawn for a checkpoint's step (rollout.off_policy_steps = 1)
PRESAMPLE = "presample"  # presampled strategy previews
PRESAMPLE_META = "meta.json"  # under PRESAMPLE (or strategy.presample_path), written last
PRESAMPLE_PARTS = "parts"  # under PRESAMPLE: one dataset per chunk of prompts, 00000 ...
PRESAMPLE_PART_DONE = "done"  # under a part: the marker of a complete part
PRESAMPLE_DATA = "data"  # under PRESAMPLE: the parts concatenated
PLAN = "plan"  # the compiled step's report (launch.py --mode=compile)
COMPILED_JSON = "compiled.json"  # under PLAN: per-program bytes, fits, formula vs compiled
COMPILED_MD = "compiled.md"  # under PLAN: the same as Markdown

# A sweep's members and root.
ERROR = "error.txt"  # a failed run's traceback
RUN_INFO = "sweep_run.json"  # one run's name, overrides and status
SWEEP_INFO = "sweep.json"  # the sweep's summary at its root
LOG = "log.txt"  # one run's console log
LOGS = "logs"  # a Ray member's per-process logs

__all__ = [
  "BAND_AT",
  "CHECKPOINTS",
  "COMPILED_JSON",
  "COMPILED_MD",
  "CONFIG",
  "ERROR",
  "EVAL",
  "EVAL_PROBLEMS",
  "EVAL_RESULT",
  "EVAL_SUMMARY",
  "LOG",
  "LOGS",
  "METRICS",
  "PASS_RATES",
  "PASS_RATES_AT",
  "PLAN",
  "PLOTS",
  "PREFETCH",
  "PRESAMPLE",
  "PRESAMPLE_DATA",
  "PRESAMPLE_META",
  "PRESAMPLE_PARTS",
  "PRESAMPLE_PART_DONE",
  "PROFILE",
  "RESULTS",
  "REWARD_CURVE",
  "RUN_INFO",
  "SAMPLES",
  "STRATEGY_PREVIEWS",
  "SWEEP_INFO",
  "TENSORBOARD",
  "WANDB_ID",
  "WARMSTART",
  "LORA_BASE",
  "LORA_WARM_BASE",
]
