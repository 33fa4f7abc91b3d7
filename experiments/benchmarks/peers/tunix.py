"""Google Tunix's GRPO learner (``google-tunix``, the ``tunix`` extra) on ``step.py``'s work.

``python -m experiments.benchmarks.step --peer tunix`` calls ``run`` once per variant and β. Each
run is a child process (this module, run with ``-m``), so that nothing traced under one variant
(Tunix's module-level jitted log-prob pass, say) is reused by another. The child builds Tunix's
Llama 3 model from the checkpoint's safetensors, an ``RLCluster`` (actor, rollout and reference on
one CPU mesh, the vanilla rollout engine) and a ``GRPOLearner``, and runs ``learner.train`` for
``steps`` steps.
After each step it prints the step's times and waits while the parent runs one of our steps, so
both sides sample the same minutes of a machine whose speed drifts.

Variants: ``shipped`` is Tunix as installed; ``patched`` applies two fixes by monkeypatching
inside the child (nothing in site-packages changes):
  (a) RoPE: llama3 ``Attention.block`` calls ``apply_rope`` without ``rope_theta``, so every
      checkpoint runs at θ = 1e6; SmolLM2's is 1e5. The patch binds the checkpoint's θ.
  (b) masks: Tunix makes every mask from ``ids != pad_id`` (sampler prefill and decode, the
      learner's prompt and completion masks, its log-prob pass). SmolLM2's pad is
      ``<|im_end|>`` (id 2), also its eos and twice in every chat prompt: shipped Tunix drops
      those prompt tokens from attention (and shifts the positions after them), and drops a
      sampled ``<|im_end|>`` from the rest of its row and from the loss. The patch gives Tunix's
      tokenizer adapter a pad id no token has (the vocabulary size).
The parity check shows (a): the largest |logit| difference between Tunix's model and ours on
the same chat prompts, with the same (true) mask; ``masked_prompt_tokens`` and
``masked_completion_tokens`` show (b): the real tokens of a step's batch that Tunix's masks
leave out.

The same work on both sides: checkpoint (float32), the 8 chat prompts in the same P slots (the
child checks that Tunix tokenizes them into our ids), G completions of exactly T tokens (no
early stop: Tunix's ``eos_tokens`` is an id no token has), temperature 1 without top-k / top-p,
the same reward, μ = 1, ε = 0.2, token-mean aggregation, the k3 KL estimator at β, our AdamW
(``make_optimizer``, lr 1e-6), no checkpoint saves; both samplers take all B·G rows in one batch
over a P + T slot KV cache. What differs (``differences()``, printed
with the results):
  - micro-batches: Tunix's ``train_micro_batch_size`` counts prompts of G rows
    (``--tunix_micro_batch``, default 1 = 8 rows, as our 8: its one pass over all 64 rows does
    not fit this 23 GB machine); its reference log-probs (β > 0) run in micro-batches of the
    same size;
  - the prompt: Tunix runs each row's prompt in every forward pass of the update and unembeds
    all P + T positions; ours runs each group's prompt once (``loss.share_prompt``) and
    unembeds only the completion's;
  - the reference pass (β > 0) is in Tunix's rollout phase and in our update.
"""

from __future__ import annotations

import argparse
import functools
import json
import pathlib
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[3]  # where ``-m`` finds ``experiments``
TAG = "TUNIX "  # the child's report lines on stdout; the rest of its output is Tunix's own


def differences() -> list[str]:
  """The docstring's list of what differs between the two sides' work, one string each."""
  items = __doc__.split("What differs")[1].split("\n  - ")[1:]
  return [" ".join(item.split()) for item in items]


def run(model_dir: str, variant: str, work: dict, micro: int, steps: int, between=None) -> dict:
  """One child run of ``variant`` (shipped | patched) on ``work`` (B, G, P, T, kl_coef); after
  each of its steps ``between()`` (one of our steps) runs and its ``total_s`` is kept."""
  args = [sys.executable, "-m", "experiments.benchmarks.peers.tunix", "--model", model_dir]
  args += ["--variant", variant]
  args += ["--micro", str(micro), "--steps", str(steps), "--work", json.dumps(work)]
  child = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
  steps_out, ours_after, summary = [], [], None
  for line in child.stdout:
    if not line.startswith(TAG):
      continue
    msg = json.loads(line[len(TAG) :])
    if "step" in msg:
      steps_out.append(msg)
      print(json.dumps({"tunix": variant, **msg}), flush=True)
      if between is not None:
        ours_after.append(between()["total_s"])
      child.stdin.write("\n")
      child.stdin.flush()
    else:
      summary = msg
  code = child.wait()
  assert code == 0 and summary is not None, f"the Tunix {variant} run failed (exit {code}; -9: "
  "killed, as by the kernel when out of memory)"
  return {"variant": variant, "tunix_micro": micro, "steps": steps_out, "ours_after": ours_after,
          **summary}  # fmt: skip


# ---- the child ------------------------------------------------------------------------------


def patch(theta: float, vocab: int) -> None:
  """Fixes (a) and (b) above, for this process only."""
  from tunix.generate import tokenizer_adapter
  from tunix.models.llama3 import model as llama3

  llama3.apply_rope = functools.partial(llama3.apply_rope, rope_theta=theta)
  tokenizer_adapter.TokenizerAdapter.pad_id = lambda self: vocab


def tunix_config(hf: dict):
  """Tunix's Llama 3 ``ModelConfig`` of a HF Llama ``config.json``."""
  from tunix.models.llama3 import model as llama3

  assert hf["model_type"] == "llama", "the Tunix peer covers Llama-architecture checkpoints"
  theta = hf.get("rope_theta") or hf["rope_parameters"]["rope_theta"]
  return llama3.ModelConfig(
    num_layers=hf["num_hidden_layers"],
    vocab_size=hf["vocab_size"],
    embed_dim=hf["hidden_size"],
    hidden_dim=hf["intermediate_size"],
    num_heads=hf["num_attention_heads"],
    head_dim=hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"],
    num_kv_heads=hf["num_key_value_heads"],
    rope_theta=theta,
    norm_eps=hf["rms_norm_eps"],
    weight_tying=hf.get("tie_word_embeddings", False),
  )


def logit_gap(model, model_dir: str, prompts_BxP, mask_BxP) -> float:
  """max |logit| of Tunix's model − ours over the prompts' real tokens, same positions and
  causal mask (cumulative over the real tokens) on both sides."""
  import jax.numpy as jnp

  from grpo_jax import models

  ours_BxPxV = np.asarray(models.load_hf(model_dir, dtype="float32")(prompts_BxP, mask_BxP))
  positions_BxP = np.maximum(np.cumsum(mask_BxP, axis=1) - 1, 0)
  P = mask_BxP.shape[1]
  attn_BxPxP = np.tril(np.ones((P, P), bool))[None] & (mask_BxP[:, None, :] > 0)
  theirs_BxPxV, _ = model(jnp.asarray(prompts_BxP), jnp.asarray(positions_BxP), None,
                          jnp.asarray(attn_BxPxP))  # fmt: skip
  real = mask_BxP > 0
  return float(np.abs(np.asarray(theirs_BxPxV) - ours_BxPxV)[real].max())


def learner_of(model_dir, cfg, mesh, actor, reference, work: dict, P: int, micro: int, steps: int):
  """Tunix's ``RLCluster`` (actor, rollout and ``reference``, None at β = 0, on one CPU
  ``mesh``) and ``GRPOLearner`` for ``work``."""
  import transformers
  from tunix.rl import rl_cluster as rl
  from tunix.rl.grpo import grpo_learner
  from tunix.rl.rollout import base_rollout

  from experiments.benchmarks import workload
  from grpo_jax.train.optimizer import make_optimizer

  B, G, T, beta = work["B"], work["G"], work["T"], work["kl_coef"]
  optimizer = make_optimizer(workload.bench_config(B, G, T, 0, beta).optimizer)
  training = rl.RLTrainingConfig(
    actor_optimizer=optimizer,
    eval_every_n_steps=10**9,
    max_steps=steps,
    mini_batch_size=B,
    train_micro_batch_size=micro,
    rollout_micro_batch_size=B,  # all B·G rows in one sampler batch, as ours
  )
  rollout = base_rollout.RolloutConfig(
    max_tokens_to_generate=T,
    max_prompt_length=P,
    kv_cache_size=P + T,
    temperature=1.0,
    top_p=1.0,
    top_k=None,
    eos_tokens=[cfg.vocab_size],  # no token: every row runs to T, as ours
  )
  roles = {rl.Role.ACTOR: mesh, rl.Role.REFERENCE: mesh, rl.Role.ROLLOUT: mesh}
  cluster = rl.RLCluster(
    actor=actor,
    reference=reference,
    tokenizer=transformers.AutoTokenizer.from_pretrained(model_dir),
    cluster_config=rl.ClusterConfig(
      role_to_mesh=roles, training_config=training, rollout_config=rollout
    ),
  )
  algo = grpo_learner.GRPOConfig(num_generations=G, num_iterations=1, beta=beta, epsilon=0.2,
                                 loss_agg_mode="token-mean", kl_loss_mode="low_var_kl")  # fmt: skip
  reward = lambda prompts, completions, **kw: [workload.reward_of(c) for c in completions]
  learner = grpo_learner.GRPOLearner(rl_cluster=cluster, algo_config=algo, reward_fns=reward)
  return cluster, learner


def child(model_dir: str, variant: str, work: dict, micro: int, steps: int) -> None:
  import jax
  import jax.numpy as jnp
  from flax import nnx
  from tunix.models.llama3 import params as llama3_params

  from experiments.benchmarks import workload

  B, G = work["B"], work["G"]
  hf = json.loads((pathlib.Path(model_dir) / "config.json").read_text())
  cfg = tunix_config(hf)
  if variant == "patched":
    patch(cfg.rope_theta, cfg.vocab_size)
  prompts = workload.prompts_of(model_dir, B, work["P"])
  P = prompts["prompts_BxP"].shape[1]
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("fsdp", "tp"))
  load = lambda: llama3_params.create_model_from_safe_tensors(model_dir, cfg, mesh, jnp.float32)
  actor = load()
  n = min(B, 2)
  gap = logit_gap(actor, model_dir, prompts["prompts_BxP"][:n], prompts["mask_BxP"][:n])

  reference = load() if work["kl_coef"] > 0 else None
  cluster, learner = learner_of(model_dir, cfg, mesh, actor, reference, work, P, micro, steps)

  # Timers around Tunix's own phases (instance attributes: its code is unchanged). Each blocks
  # on its result, so that no work of one phase (or of this child) runs on into the next.
  now = {}

  def timed(obj, name, key, after=lambda out: out):
    fn = getattr(obj, name)

    def wrapper(*a, **kw):
      t0 = time.perf_counter()
      out = jax.block_until_ready(fn(*a, **kw))
      after(out)
      now[key] = now.get(key, 0.0) + time.perf_counter() - t0
      return out

    setattr(obj, name, wrapper)

  def masked(ex):
    """Real tokens of the step's batch that Tunix's masks leave out, and whether its prompt ids
    are ours."""
    ids_NxP, ours_NxP = np.asarray(ex.prompt_ids)[:, -P:], np.repeat(prompts["prompts_BxP"], G, 0)
    real_NxP = np.repeat(prompts["mask_BxP"], G, 0) > 0
    now["prompt_ids_match"] = bool(np.array_equal(ids_NxP[real_NxP], ours_NxP[real_NxP]))
    now["masked_prompt_tokens"] = int(real_NxP.sum() - np.asarray(ex.prompt_mask).sum())
    now["masked_completion_tokens"] = int((~np.asarray(ex.completion_mask)).sum())

  timed(cluster, "generate", "sampling_s")
  timed(cluster, "get_ref_per_token_logps", "ref_logps_s")
  timed(learner, "_generate_and_compute_advantage", "rollout_s", masked)
  step, done = learner._run_global_step, []

  def global_step(*a, **kw):
    now.clear()
    t0 = time.perf_counter()
    step(*a, **kw)
    jax.block_until_ready(nnx.state(cluster.actor_trainer.model))
    total = time.perf_counter() - t0
    done.append({"step": len(done) + 1, "step_s": total, **now,
                 "update_s": total - now["rollout_s"]})  # fmt: skip
    print(TAG + json.dumps(done[-1]), flush=True)
    sys.stdin.readline()  # the parent runs one of ours meanwhile

  learner._run_global_step = global_step
  learner.train([{"prompts": prompts["texts"]}] * steps)
  assert len(done) == steps, (len(done), steps)
  summary = {"logits_max_abs_diff": gap, "tunix_P": P, "rope_theta": cfg.rope_theta}
  print(TAG + json.dumps(summary), flush=True)


def main():
  ap = argparse.ArgumentParser(description="one Tunix GRPO run (a child of benchmarks.step)")
  ap.add_argument("--model", required=True)
  ap.add_argument("--variant", choices=("shipped", "patched"), required=True)
  ap.add_argument("--work", required=True, help="JSON: B, G, P, T, kl_coef")
  ap.add_argument("--micro", type=int, default=1)
  ap.add_argument("--steps", type=int, default=3)
  a = ap.parse_args()
  child(a.model, a.variant, json.loads(a.work), a.micro, a.steps)


if __name__ == "__main__":
  main()
