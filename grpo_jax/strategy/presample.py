"""Presampled strategy previews (METHODS §5, ``strategy.source = 'presampled'``): drawn once by
the initial policy for the training prompts and stored with them as a ``datasets`` dataset.

Layout of ``path`` (a local folder or a URI such as ``gs://``): ``parts/00000 ...`` (one dataset
per chunk of prompts, complete once its ``done`` marker is written, so an interrupted run resumes
at the first missing chunk), then ``data/`` (the concatenation) and ``meta.json`` (written last:
its presence marks a complete file). Chunk i uses the key
``fold_in(presample_key(seed), i)``, so the file is a pure function of (seed, policy, settings)
whether or not it was interrupted.

Columns, one row per prompt: ``index`` (position in the task's training stream), ``prompt``
(text), ``preview_ids`` (K token lists, no padding), ``preview_logps`` (K float lists),
``preview_text`` (K strings), ``preview_stopped`` (K bools: ended on the delimiter).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import jax
import numpy as np
from etils import epath
from tqdm.auto import tqdm

from grpo_jax.rundir import names, read, write
from grpo_jax.sampling.policy import Policy
from grpo_jax.sharding import distributed
from grpo_jax.strategy.previews import Previews, PreviewSpec, draw_previews, make_context

if TYPE_CHECKING:
  import datasets

COLUMNS = ("index", "prompt", "preview_ids", "preview_logps", "preview_text", "preview_stopped")


class PresampleError(ValueError):
  """A presample file that is missing, unreadable, or does not match the run."""


@dataclasses.dataclass(frozen=True)
class PresamplePlan:
  """Which prompts a presample holds and how it is drawn: training prompts
  0 .. num_prompts−1 (rounded up to whole chunks), ``chunk`` per sampler call, keys from
  ``seed`` (:func:`presample_key`)."""

  num_prompts: int
  chunk: int
  seed: int
  progress: bool = True  # a bar over chunks; False on processes other than 0


def stream_index(problem) -> int:
  """A training problem's position in the task's stream: countdown problems carry it as
  ``.index``, math rows as ``["index"]`` (``MathTask.train_problems``)."""
  return int(problem["index"] if isinstance(problem, dict) else problem.index)


def presample_key(seed: int) -> jax.Array:
  return jax.random.fold_in(jax.random.PRNGKey(seed), 2**31 - 2)  # never a step or eval key


def _meta(spec: PreviewSpec, num_prompts: int, chunk: int, seed: int) -> dict:
  return {
    "num_prompts": num_prompts,
    "chunk": chunk,
    "seed": seed,
    "num_previews": spec.num_previews,
    "max_preview_tokens": spec.max_preview_tokens,
    "template_ids": list(spec.template_ids),
    "delimiter": spec.delimiter,
  }


def _chunk_rows(task, start: int, previews: Previews, problems, spec: PreviewSpec) -> dict:
  K = spec.num_previews
  texts = task.decode(previews.tokens_BKxM, previews.mask_BKxM)
  rows = {c: [] for c in COLUMNS}
  for b, p in enumerate(problems):
    ks = range(b * K, (b + 1) * K)
    rows["index"].append(start + b)
    rows["prompt"].append(task.prompt_text(p))
    rows["preview_ids"].append(
      [previews.tokens_BKxM[j][previews.mask_BKxM[j] != 0].tolist() for j in ks]
    )
    rows["preview_logps"].append(
      [previews.logps_BKxM[j][previews.mask_BKxM[j] != 0].tolist() for j in ks]
    )
    rows["preview_text"].append([texts[j] for j in ks])
    rows["preview_stopped"].append([bool(previews.stopped_BK[j]) for j in ks])
  return rows


def write_presample(
  path, policy: Policy, task, spec: PreviewSpec, plan: PresamplePlan, log=print
) -> epath.Path:
  """Draws K previews with ``policy`` (the initial one) for the prompts of ``plan``.

  Multi-host: every process draws the previews of its share of each chunk's prompts
  (``distributed.problem_share``: the sampler sees the one-process chunk), the previews are
  gathered, process 0 writes the files, and every process returns once they are complete."""
  path, chunk, seed = epath.Path(path), plan.chunk, plan.seed
  num_prompts, progress = plan.num_prompts, plan.progress
  num_chunks = -(-num_prompts // chunk)
  meta = _meta(spec, num_chunks * chunk, chunk, seed)
  if distributed.agree((path / names.PRESAMPLE_META).exists()):
    load_presample(path, spec, meta["num_prompts"])  # validates; raises on a mismatch
    return path
  primary = distributed.is_primary()
  parts = path / names.PRESAMPLE_PARTS
  if primary:
    parts.mkdir(parents=True, exist_ok=True)
  done = [
    distributed.agree((parts / f"{i:05d}" / names.PRESAMPLE_PART_DONE).exists())
    for i in range(num_chunks)
  ]
  if any(done):
    log(f"presample: resuming at chunk {sum(done)}/{num_chunks} in {path}")
  key = presample_key(seed)
  p0, p1 = distributed.problem_share(policy.mesh, chunk, spec.num_previews)
  import datasets  # noqa: PLC0415 (0.5 s of pandas and pyarrow, only where a presample is written)

  was_enabled = datasets.is_progress_bar_enabled()
  datasets.disable_progress_bars()  # one bar over chunks, not one per saved part
  try:
    for i in tqdm(range(num_chunks), disable=not progress, desc="presample"):
      part = parts / f"{i:05d}"
      if done[i]:
        continue
      problems = task.train_problems(i * chunk, chunk)
      context_BxC, mask_BxC = make_context(*task.encode_prompts(problems[p0:p1]), spec)
      previews = draw_previews(
        policy, context_BxC, mask_BxC, jax.random.fold_in(key, i), spec, task.decode
      )
      previews = Previews(**distributed.gather_rows(vars(previews)))  # the chunk's, everywhere
      if not primary:
        continue
      rows = _chunk_rows(task, i * chunk, previews, problems, spec)
      if part.exists():  # cut short by a kill
        part.rmtree()
      datasets.Dataset.from_dict(rows).save_to_disk(str(part))
      write.presample_part_done(part)
    if primary:
      merged = datasets.concatenate_datasets(
        [datasets.load_from_disk(str(parts / f"{i:05d}")) for i in range(num_chunks)]
      )
      if (path / names.PRESAMPLE_DATA).exists():
        (path / names.PRESAMPLE_DATA).rmtree()
      merged.save_to_disk(str(path / names.PRESAMPLE_DATA))
  finally:
    if was_enabled:
      datasets.enable_progress_bars()
  if primary:
    write.presample_meta(path, meta)
    parts.rmtree()
  distributed.barrier("presample written")  # the others read it next
  log(f"presample: {meta['num_prompts']} prompts × {spec.num_previews} previews -> {path}")
  return path


class PresampledPreviews:
  """Row lookup by training-stream position; every access is checked against the task."""

  def __init__(self, dataset: datasets.Dataset, spec: PreviewSpec, path):
    self.spec, self.path = spec, path
    # Plain lists once: per-row dataset access costs far more than the lookup.
    self._columns = {c: dataset[c] for c in COLUMNS}
    self._row = {int(i): n for n, i in enumerate(self._columns["index"])}

  def __len__(self) -> int:
    return len(self._row)

  def previews(self, task, problems) -> Previews:
    """The stage-1 previews (as ``draw_previews`` draws them) for ``problems`` (each carries its
    stream position, :func:`stream_index`); raises if a prompt is absent or its text differs
    from the stored one."""
    K, M = self.spec.num_previews, self.spec.max_preview_tokens
    tokens = np.full((len(problems) * K, M), self.spec.pad_id, np.int32)
    mask, logps = np.zeros(tokens.shape, np.int32), np.zeros(tokens.shape, np.float32)
    stopped = np.zeros(len(problems) * K, bool)
    for b, p in enumerate(problems):
      index = stream_index(p)
      if index not in self._row:
        raise PresampleError(
          f"presample {self.path} has no prompt at stream position {index} "
          f"(it holds {len(self)}); raise strategy.presample_prompts and "
          "re-run --mode=presample"
        )
      row = {c: v[self._row[index]] for c, v in self._columns.items()}
      if row["prompt"] != task.prompt_text(p):
        raise PresampleError(
          f"presample {self.path} row {index} is for prompt "
          f"{row['prompt']!r}, the run has {task.prompt_text(p)!r} (another "
          "seed or data config?)"
        )
      for k, (ids, lps) in enumerate(zip(row["preview_ids"], row["preview_logps"])):
        tokens[b * K + k, : len(ids)], logps[b * K + k, : len(ids)] = ids, lps
        mask[b * K + k, : len(ids)] = 1
        stopped[b * K + k] = row["preview_stopped"][k]
    return Previews(tokens, mask, logps, stopped)


def load_presample(path, spec: PreviewSpec, num_prompts: int) -> PresampledPreviews:
  """Opens and validates a presample file for a run that needs ``num_prompts`` prompts."""
  path = epath.Path(path)
  if not (path / names.PRESAMPLE_META).exists():
    raise PresampleError(
      f"no complete presample at {path} (meta.json missing); run "
      "`python experiments/launch.py --config ... --mode=presample` first"
    )
  try:
    import datasets  # noqa: PLC0415 (as in write_presample)

    meta = read.json_file(path / names.PRESAMPLE_META)
    dataset = datasets.load_from_disk(str(path / names.PRESAMPLE_DATA))
  except (OSError, ValueError, FileNotFoundError) as e:
    raise PresampleError(f"cannot read presample {path}: {e}") from e
  missing = [c for c in COLUMNS if c not in dataset.column_names]
  if missing:
    raise PresampleError(f"presample {path} is missing column(s) {missing}; expected {COLUMNS}")
  if len(dataset) != meta.get("num_prompts"):
    raise PresampleError(
      f"presample {path} is corrupted: {len(dataset)} rows but meta.json "
      f"says {meta.get('num_prompts')}"
    )
  if len(dataset) < num_prompts:
    raise PresampleError(
      f"presample {path} holds {len(dataset)} prompts, the run needs "
      f"{num_prompts}; re-run --mode=presample with the run's config"
    )
  want = _meta(spec, meta["num_prompts"], meta.get("chunk"), meta.get("seed"))
  diff = {k: (meta.get(k), v) for k, v in want.items() if meta.get(k) != v}
  if diff:
    raise PresampleError(f"presample {path} was drawn with other settings (stored, run): {diff}")
  widths = {len(x) for x in dataset["preview_ids"]}
  if widths != {spec.num_previews}:
    raise PresampleError(
      f"presample {path} rows hold {sorted(widths)} previews, not "
      f"strategy.num_previews = {spec.num_previews}"
    )
  return PresampledPreviews(dataset, spec, path)


__all__ = [
  "COLUMNS",
  "PresampleError",
  "PresamplePlan",
  "PresampledPreviews",
  "load_presample",
  "presample_key",
  "write_presample",
]
