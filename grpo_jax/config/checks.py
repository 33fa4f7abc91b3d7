"""The cross-group rules of an experiment (:func:`check_experiment`): combinations the code
would reject, or silently make meaningless, minutes into a run (loss.num_minibatches not
dividing B·G, more previews than completions, the subgroup-offset baseline without strategy
sampling, ...). Each fails with a ValueError naming the keys. A single field's type, choices and
range are checked where it is declared (``grpo_jax.config.fields``).
"""

from __future__ import annotations

import os

from grpo_jax.config.fields import AUTO, fail


def check_experiment(e) -> None:
  """Cross-group rules of a whole experiment (``experiment.Experiment``)."""
  s, st, adv, loss, dapo, ev = e.sampling, e.strategy, e.advantage, e.loss, e.dapo, e.eval
  rows = s.prompts_per_step * s.group_size
  active = st.enabled and st.num_previews > 1  # as grpo_jax.strategy.is_two_stage
  if st.enabled and st.num_previews > s.group_size:
    fail(
      f"config key strategy.num_previews = {st.num_previews} must be in [1, "
      f"sampling.group_size = {s.group_size}] (each preview needs a completion)"
    )
  if st.enabled and ev.with_strategy and st.num_previews > ev.num_samples:
    fail(
      f"config key strategy.num_previews = {st.num_previews} must be in [1, eval.num_samples = "
      f"{ev.num_samples}] with eval.with_strategy"
    )
  if ev.with_strategy and not active:
    fail(
      "config key eval.with_strategy = True needs strategy sampling (strategy.enabled = True "
      "and strategy.num_previews > 1); without it the evaluation is silently one-stage"
    )
  if adv.baseline == "subgroup_offset" and not active:
    fail(
      "config key advantage.baseline = 'subgroup_offset' needs strategy sampling "
      "(strategy.enabled = True and strategy.num_previews > 1): without it every subgroup is "
      "its group and every offset is 0; use advantage.baseline = 'group'"
    )
  if adv.offset_control != "none" and adv.baseline != "subgroup_offset":
    fail(
      f"config key advantage.offset_control = {adv.offset_control!r} has no effect with "
      f"advantage.baseline = {adv.baseline!r}: it replaces the offsets of 'subgroup_offset' "
      "(or set advantage.offset_control = 'none')"
    )
  lora = e.model.lora
  if lora.rank and lora.sampler == "unmerged" and s.engine != "jax":
    fail(
      f"config key model.lora.sampler = 'unmerged' needs sampling.engine = 'jax', not "
      f"{s.engine!r}: that engine is sent merged weights (model.lora.sampler = 'merged')"
    )
  if rows % loss.num_minibatches:
    fail(
      f"config key loss.num_minibatches = {loss.num_minibatches} must divide the B·G = "
      f"{s.prompts_per_step}·{s.group_size} = {rows} rows of a step"
    )
  mb_rows = rows // loss.num_minibatches
  micro = loss.micro_batch_size
  if micro != AUTO and 0 < micro < mb_rows and mb_rows % micro:
    fail(
      f"config key loss.micro_batch_size = {loss.micro_batch_size} must divide the {mb_rows} "
      "rows of a minibatch (B·G / loss.num_minibatches), or be 0"
    )
  if dapo.overlong_penalty and dapo.overlong_buffer <= 0:
    fail(
      f"config key dapo.overlong_buffer = {dapo.overlong_buffer} must be > 0 tokens with "
      "dapo.overlong_penalty"
    )
  batch_devices = e.mesh.data * e.mesh.fsdp  # negative while one of them is -1 (auto)
  if s.decode_slots and batch_devices > 0 and s.decode_slots % batch_devices:
    fail(
      f"config key sampling.decode_slots = {s.decode_slots} must be a multiple of the "
      f"mesh's batch devices (mesh.data x mesh.fsdp = {batch_devices}), or 0"
    )
  if ev.ks and max(ev.ks) > ev.num_samples:
    fail(f"config key eval.ks = {ev.ks} must be in [1, eval.num_samples = {ev.num_samples}]")
  _check_engine(e)
  _check_data(e)


def _check_engine(e) -> None:
  """An external engine (``sampling.engine``) reads a Hugging Face checkpoint and samples
  on-policy."""
  engine = e.sampling.engine
  if engine == "jax":
    return
  hf = e.model.hf_path
  if not hf or hf.endswith(".gguf"):
    fail(
      f"config key sampling.engine = {engine!r} needs model.hf_path to name a Hugging Face "
      f"checkpoint directory (the engine reads its architecture and tokenizer), not {hf!r}"
    )
  if e.rollout.off_policy_steps:
    fail(
      f"config key rollout.off_policy_steps = {e.rollout.off_policy_steps} needs "
      f"sampling.engine = 'jax' (not {engine!r})"
    )


def _check_data(e) -> None:
  d = e.data
  if d.pass_rate_band and d.task != "math":
    fail(
      f"config key data.pass_rate_band = {d.pass_rate_band} needs a fixed pool of training "
      f"problems to profile: data.task = 'math', not {d.task!r}"
    )
  if d.train_limit and d.task != "math":
    fail(
      f"config key data.train_limit = {d.train_limit} cuts the math task's training set: it "
      f"needs data.task = 'math', not {d.task!r}"
    )
  if d.level_weights and not (d.task == "math" and d.train_set == "arithmetic"):
    fail(
      "config key data.level_weights weights the generated set's levels: it needs "
      f"data.task = 'math' and data.train_set = 'arithmetic', not {d.train_set!r}"
    )
  if d.task == "dataset" and not (d.train_path and e.model.hf_path and e.reward.functions):
    fail(
      "config key data.task = 'dataset' needs data.train_path (the rows), model.hf_path (the "
      "tokenizer) and reward.functions (the rewards; docs/custom_task.md)"
    )
  if d.chat_template not in ("auto", "none") and not os.path.isfile(d.chat_template):
    fail(
      f"config key data.chat_template = {d.chat_template!r} is neither 'auto', 'none' nor an "
      "existing template file"
    )
  if d.task == "math" and e.warmstart.enabled and not d.train_path:
    from grpo_jax.data.math import TRAIN_SETS, has_solutions

    if not has_solutions(d.train_set):
      with_solutions = sorted(n for n in TRAIN_SETS if has_solutions(n))
      fail(
        f"warmstart.enabled needs reference solutions, and data.train_set = {d.train_set!r} "
        f"has none; sets with solutions: {with_solutions} (or warmstart.enabled = False)"
      )


__all__ = ["check_experiment"]
