"""Strategy-conditioned rollouts (METHODS §5) packed as the update batch, and their evaluation.

Batch layout (N = B·G rows, C = prompt + template slots, R = M + T response slots):
  tokens_NxL          [prompt ⊕ template, left-padded to C | preview ⊕ completion, right-padded]
  completion_mask_NxT completion tokens (+ preview tokens when ``strategy.train_on_preview``)
  sample_logps_NxT    aligned with the response (preview log-probs come from whoever wrote the
                      preview: the initial policy when presampled)
  subgroup_ids_N      global preview index b·K + k (merged previews share the smaller one)
The preview is context, never rewarded: the reward reads the completion text only (prefixed by
the delimiter the preview ended on, so a ``<plan>;<answer>`` grammar still parses).
``strategy.enabled = False`` or K = 1 leaves the plain one-stage path untouched.
"""

from __future__ import annotations

import json
import pathlib
from collections import defaultdict

import jax
import numpy as np
from tqdm.auto import tqdm

from grpo_jax.data.presample import PresampleError, load_presample, write_presample
from grpo_jax.eval import passk
from grpo_jax.sampling import strategy as two_stage
from grpo_jax.sampling import strategy_layout as layout
from grpo_jax.sampling.generate import SampleSettings


class StrategyRollout:
  """Holds the preview source and per-preview success counts of one run."""

  def __init__(self, cfg, task):
    s = cfg.strategy
    self.cfg, self.task = cfg, task
    self.active = bool(s.enabled) and int(s.num_previews) > 1
    self.spec = (
      two_stage.PreviewSpec.from_config(s, task.tokenizer, task.stop_ids) if s.enabled else None
    )
    if s.enabled:
      layout.allocate(cfg.sampling.group_size, s.num_previews)  # validates K <= G
      if cfg.eval.with_strategy:
        layout.allocate(cfg.eval.num_samples, s.num_previews)  # fail now, not after training
      if s.source not in ("presampled", "online"):
        raise ValueError(f"strategy.source must be 'presampled' or 'online', got {s.source!r}")
    template = len(self.spec.template_ids) if self.active else 0
    self.prompt_len = task.prompt_len + template  # P of the update batch
    self.presampled = None
    self.counts = defaultdict(lambda: [0, 0.0])  # normalised preview -> [rollouts, reward sum]

  def describe(self) -> str:
    if not self.active:
      return "strategy sampling off: one-stage GRPO sampling"
    G, K = self.cfg.sampling.group_size, self.spec.num_previews
    counts = layout.allocate(G, K).tolist()
    return (
      f"strategy sampling: K={K} {self.cfg.strategy.source} previews, completions per "
      f"preview {counts} (G={G}, remainder {G % K} spread over the first previews)"
    )

  def prepare(self, graphdef, params, mesh, workdir, step: int, log=print) -> None:
    """Opens the presample file, drawing it first with ``params`` (the initial policy) when it
    does not exist yet and the run is at step 0."""
    if not (self.active and self.cfg.strategy.source == "presampled"):
      return
    s, B = self.cfg.strategy, self.cfg.sampling.prompts_per_step
    path = pathlib.Path(s.presample_path or pathlib.Path(workdir) / "presample")
    per_step = B
    if "dapo" in self.cfg:  # what sample_batch draws: rounds, each rounded to the devices
      from grpo_jax import sharding as shard_lib  # noqa: PLC0415
      from grpo_jax.train import dynamic_sampling  # noqa: PLC0415

      row_multiple = shard_lib.batch_size_multiple(mesh)
      per_step = dynamic_sampling.max_prompts_per_step(self.cfg, row_multiple)
    num = int(s.presample_prompts) or self.cfg.steps * per_step
    if not (path / "meta.json").exists():
      if step > 0:
        raise PresampleError(
          f"no presample at {path} and the run resumes at step {step}: the "
          "initial policy is gone; run --mode=presample on a fresh workdir"
        )
      write_presample(
        path,
        graphdef,
        params,
        self.task,
        self.spec,
        SampleSettings.from_config(self.cfg.sampling),
        mesh,
        num_prompts=num,
        chunk=B,
        seed=self.cfg.seed,
        progress=self.cfg.logging.progress,
        log=log,
      )
    self.presampled = load_presample(path, self.spec, num)

  def sample(
    self, graphdef, params, problems, group_size, rng, settings, mesh, online: bool = False
  ) -> dict:
    """Both stages for ``problems``; graded rows and the update batch (see module doc)."""
    task, spec, K = self.task, self.spec, self.spec.num_previews
    context_BxC, context_mask_BxC = two_stage.make_context(*task.encode_prompts(problems), spec)
    key_preview, key_completion = jax.random.split(rng)
    if self.presampled is not None and not online:
      previews = self.presampled.previews(task, problems)
    else:
      previews = two_stage.draw_previews(
        graphdef,
        params,
        context_BxC,
        context_mask_BxC,
        key_preview,
        spec,
        settings,
        mesh,
        task.decode,
      )
    gen = two_stage.draw_completions(
      graphdef,
      params,
      context_BxC,
      context_mask_BxC,
      previews,
      key_completion,
      spec,
      group_size,
      settings,
      mesh,
    )
    texts_BK = task.decode(previews["tokens_BKxM"], previews["mask_BKxM"])
    completions_N = task.decode(gen["tokens_NxT"], gen["mask_NxT"])
    preview_N = gen["preview_N"]
    delimiter = self.cfg.strategy.delimiter
    graded_N = [
      (delimiter if previews["stopped_BK"][j] else "") + c for j, c in zip(preview_N, completions_N)
    ]
    problems_N = [problems[j // K] for j in preview_N]
    rewards_N = np.asarray(task.rewards(problems_N, graded_N), np.float32)
    merged_BK = layout.preview_ids(texts_BK, K, self.cfg.strategy.merge_identical)
    group_ids_N, subgroup_ids_N, _ = layout.row_ids(merged_BK, group_size, K)
    packed = layout.pack_responses(
      gen["preview_NxM"],
      gen["preview_mask_NxM"],
      gen["preview_logps_NxM"],
      gen["tokens_NxT"],
      gen["mask_NxT"],
      gen["logps_NxT"],
      spec.pad_id,
      self.cfg.strategy.train_on_preview,
    )
    context_N = np.repeat(np.arange(len(problems)), group_size)
    batch = {
      "tokens_NxL": np.concatenate([context_BxC[context_N], packed["tokens_NxR"]], 1),
      "input_mask_NxL": np.concatenate([context_mask_BxC[context_N], packed["input_mask_NxR"]], 1),
      "completion_mask_NxT": packed["loss_mask_NxR"],
      "sample_logps_NxT": packed["logps_NxR"],
      "rewards_N": rewards_N,
      "group_ids_N": group_ids_N,
      "subgroup_ids_N": subgroup_ids_N,
      "truncated_N": np.asarray(gen["truncated_N"], bool),  # stage 2's: no stop token
      "lengths_N": gen["mask_NxT"].sum(1).astype(np.int32),  # completion only (overlong)
    }
    distinct_B = [
      len({layout.normalize_preview(t) for t in texts_BK[b : b + K]})
      for b in range(0, len(texts_BK), K)
    ]
    metrics = layout.subgroup_metrics(
      rewards_N,
      group_ids_N,
      subgroup_ids_N,
      previews["mask_BKxM"].sum(1),
      distinct_B,
      previews["stopped_BK"],
      group_size % K,
    )
    return {
      "batch": batch,
      "metrics": metrics,
      "rewards_N": rewards_N,
      "truncated_N": gen["truncated_N"],
      "lengths_N": gen["mask_NxT"].sum(1),
      "preview_texts_N": [texts_BK[j] for j in preview_N],
      "problems_N": problems_N,
      "completions": [texts_BK[j] + c for j, c in zip(preview_N, completions_N)],
    }

  def rollout(
    self, graphdef, params, task, problems, group_size: int, rng, settings, mesh
  ) -> tuple[dict, dict]:
    """``train.rollout.rollout``'s contract for the two-stage path."""
    del task  # the one given at construction
    out = self.sample(graphdef, params, problems, group_size, rng, settings, mesh)
    for text, r in zip(out["preview_texts_N"], out["rewards_N"]):
      entry = self.counts[layout.normalize_preview(text)]
      entry[0] += 1
      entry[1] += float(r)
    info = {
      "response/truncated_frac": float(np.mean(out["truncated_N"])),
      "completions": out["completions"],
      "problems": out["problems_N"],
      "metrics": out["metrics"],
    }
    return out["batch"], info

  def preview_table(self, top: int = 50) -> list[dict]:
    """Success rate of the completions conditioned on each (normalised) preview, most used
    first; counts since this process started."""
    rows = sorted(self.counts.items(), key=lambda kv: (-kv[1][0], kv[0]))[:top]
    return [{"preview": p, "rollouts": n, "success_rate": s / n} for p, (n, s) in rows]

  def write_stats(self, path) -> None:
    if self.active:
      path = pathlib.Path(path)
      path.parent.mkdir(parents=True, exist_ok=True)
      path.write_text(json.dumps(self.preview_table(), indent=2) + "\n")

  def evaluate(
    self,
    graphdef,
    params,
    problems,
    eval_cfg,
    max_new_tokens: int,
    rng,
    mesh,
    chunk_problems: int,
    progress: bool = True,
    desc: str = "eval",
  ) -> dict:
    """``eval.with_strategy``: pass@k over n = eval.num_samples two-stage samples per problem,
    with fresh previews from ``params`` (held-out prompts are never presampled)."""
    settings = SampleSettings(max_new_tokens, eval_cfg.temperature, 0, eval_cfg.top_p)
    n = eval_cfg.num_samples
    correct, lengths, truncated = [], [], []
    starts = range(0, len(problems), chunk_problems)
    for i, start in enumerate(tqdm(starts, desc=desc, disable=not progress, leave=False)):
      chunk = list(problems[start : start + chunk_problems])
      real = len(chunk)
      chunk += [chunk[-1]] * (chunk_problems - real)  # one compiled shape for every chunk
      out = self.sample(
        graphdef, params, chunk, n, jax.random.fold_in(rng, i), settings, mesh, online=True
      )
      correct.append(out["rewards_N"][: real * n].reshape(real, n) > 0.5)
      lengths.append(out["lengths_N"][: real * n].reshape(real, n))
      truncated.append(out["truncated_N"][: real * n].reshape(real, n))
    summary = passk.summarize(
      np.concatenate(correct),
      tuple(eval_cfg.ks),
      lengths_PxN=np.concatenate(lengths),
      truncated_PxN=np.concatenate(truncated),
    )
    summary["sampling"] = {
      "temperature": eval_cfg.temperature,
      "top_p": eval_cfg.top_p,
      "n": n,
      "max_new_tokens": max_new_tokens,
      "strategy": {
        "num_previews": self.spec.num_previews,
        "max_preview_tokens": self.spec.max_preview_tokens,
      },
    }
    return summary


__all__ = ["StrategyRollout"]
