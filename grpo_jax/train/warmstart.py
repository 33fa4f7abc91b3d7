"""Supervised warm start on the task's reference solutions.

Cross-entropy on completion tokens (EOS included), stopped as soon as pass@1 on a validation slice
of the *training* stream (never the held-out set), sampled at the run's temperature, reaches
``warmstart.target_pass1``, so RL starts from a policy with signal: neither hopeless nor solved.

``warmstart.supervise = "format"`` keeps the solution out of the loss: only the reference's last
line (the answer line, ``So the answer is \\boxed{N}.``) and the end token are supervised, and
in it no token whose text holds a digit, so the policy learns where and how to write the answer
and none of the arithmetic; the working and the numbers it writes stay its own. A full
supervised cold start (``"all"``) peaks the policy on the reference solutions, and with every
group of a peaked policy all-correct or all-wrong RL gets no signal (SimpleRL-Zoo reports that a
standard SFT cold start harms RL).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from grpo_jax import models
from grpo_jax import sharding as shard_lib
from grpo_jax.config.experiment import Experiment
from grpo_jax.eval.runner import EvalLoop
from grpo_jax.rollout.one_stage import OneStageRollout
from grpo_jax.sampling.policy import Policy, SampleSettings
from grpo_jax.train import console
from grpo_jax.train.optimizer import make_optimizer

SUPERVISE = ("all", "format")
SFT_STREAM_START = 1_000_000  # warm-start problems come from their own part of the stream
VALID_STREAM_START = 2_000_000


def make_sft_step(graphdef, optimizer, mesh, prompt_len: int = 0):
  """``prompt_len``: the rows' first ``prompt_len`` slots are the prompt (never supervised),
  whose vocabulary-wide logits are then not computed (``token_logps``'s window)."""

  def step(params, opt_state, batch):
    def loss_fn(p):
      logps_BxT = models.token_logps(
        graphdef, p, batch["tokens_BxL"], batch["input_mask_BxL"], window=models.Window(prompt_len)
      )
      mask_BxT = batch["loss_mask_BxL"][:, prompt_len:].astype(jnp.float32)
      return -jnp.sum(logps_BxT * mask_BxT) / jnp.maximum(jnp.sum(mask_BxT), 1.0)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  rep = shard_lib.replicated(mesh)
  return jax.jit(
    step,
    in_shardings=(rep, rep, shard_lib.batch_sharding(mesh)),
    out_shardings=(rep, rep, rep),
    donate_argnums=(0, 1),
  )


def token_classes(tokenizer) -> tuple[np.ndarray, np.ndarray]:
  """bool ``digit_V`` and ``newline_V`` over the tokenizer's ids: whose text holds a digit, a
  line break."""
  texts = tokenizer.batch_decode([[i] for i in range(len(tokenizer))])
  digit_V = np.array([any(ch.isdigit() for ch in t) for t in texts], bool)
  newline_V = np.array(["\n" in t for t in texts], bool)
  return digit_V, newline_V


def format_mask(tokens_BxL, loss_mask_BxL, digit_V, newline_V) -> np.ndarray:
  """``loss_mask_BxL`` cut to each row's last supervised line (the tokens after its last line
  break) without its digit tokens (``supervise='format'``)."""
  supervised_BxL = loss_mask_BxL.astype(bool)
  breaks_BxL = supervised_BxL & newline_V[tokens_BxL]
  L = tokens_BxL.shape[1]
  last_B = np.where(breaks_BxL.any(1), L - 1 - np.argmax(breaks_BxL[:, ::-1], axis=1), -1)
  after_BxL = np.arange(L)[None, :] > last_B[:, None]
  return (supervised_BxL & after_BxL & ~digit_V[tokens_BxL]).astype(loss_mask_BxL.dtype)


def warm_start(graphdef, params, task, cfg: Experiment, mesh, log=print) -> tuple[dict, list[dict]]:
  """Returns the warm-started params and the validation history ``[{step, loss, pass@1}]``."""
  ws = cfg.warmstart
  optimizer = make_optimizer(cfg.optimizer, learning_rate=ws.learning_rate)
  # On the mesh from the start, as the step returns it (no second compile at step 2).
  opt_state = shard_lib.replicate(optimizer.init(params), mesh)
  # Both tasks lay rows out as [prompt (task.prompt_len slots) | completion].
  step_fn = make_sft_step(graphdef, optimizer, mesh, task.prompt_len)
  rng = np.random.default_rng(cfg.seed)
  valid = task.train_problems(VALID_STREAM_START, ws.check_problems)
  settings = SampleSettings(cfg.sampling.max_new_tokens, cfg.sampling.temperature)
  classes = token_classes(task.tokenizer) if ws.supervise == "format" else None
  # Validation: G one-stage samples per problem, whatever the run's rollout kind.
  check = EvalLoop(
    OneStageRollout(cfg, task), cfg.sampling.group_size, ws.check_problems, progress=False
  )
  history = []
  steps = range(1, ws.max_steps + 1)
  bar = console.progress_bar(steps, cfg.logging.progress, desc="warm start")
  for step in bar:
    tokens_BxL, input_mask_BxL, loss_mask_BxL = task.sft_batch(
      SFT_STREAM_START + step * ws.batch_size, ws.batch_size, rng
    )
    if classes is not None:
      loss_mask_BxL = format_mask(tokens_BxL, loss_mask_BxL, *classes)
    # Every process draws the step's rows (one random stream) and hands over those its
    # devices hold: the global batch is the one-process batch.
    r0, r1 = shard_lib.process_rows(mesh, ws.batch_size)
    batch = shard_lib.shard_batch(
      {
        "tokens_BxL": tokens_BxL[r0:r1],
        "input_mask_BxL": input_mask_BxL[r0:r1],
        "loss_mask_BxL": loss_mask_BxL[r0:r1],
      },
      mesh,
    )
    params, opt_state, loss = step_fn(params, opt_state, batch)
    if step % ws.check_every == 0 or step == ws.max_steps:
      policy = Policy(graphdef, params, mesh, settings)
      out = check.sample_and_grade(policy, valid, jax.random.PRNGKey(step))
      pass1 = float(out["correct_PxN"].mean())
      history.append({"step": step, "loss": float(loss), "pass@1": pass1})
      bar.set_postfix(loss=f"{float(loss):.3f}", pass1=f"{pass1:.3f}")
      if pass1 >= ws.target_pass1:
        log(f"warm start reached validation pass@1 {pass1:.3f} at step {step}")
        break
  return params, history
