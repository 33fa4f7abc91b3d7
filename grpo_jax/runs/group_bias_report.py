"""H4 of the study measured (``experiments/group_bias.py``): per seed the warm-started policy's
samples of the held-out problems, cut into groups of G, E[p̂ − p | mixed group] by difficulty
bin (``group_bias.bias_by_bin``), pooled over seeds with a 95% t interval, as JSON and
Markdown."""

from __future__ import annotations

import json
import math
import pathlib

from grpo_jax.config import files as config_file
from grpo_jax.rundir import tables
from grpo_jax.runs import aggregate, group_bias, study

ONE_STAGE = ["strategy.enabled=false", "advantage.baseline=group", "hadw.enabled=false"]
HALVES = (0.0, 0.5, 1.0)  # the pre-registered split: hard (p < 1/2) and easy prompts


def seed_correct(config: str, seed: int, samples: int, workdir: pathlib.Path):
  """(G, correct_PxM) of one seed's warm-started policy on the held-out problems."""
  overrides = [f"seed={seed}", *ONE_STAGE, f"eval.num_samples={samples}", "eval.ks=(1,)"]
  overrides += ["logging.progress=false", "logging.tensorboard=false", "logging.plot=false"]
  cfg = config_file.load(config, overrides)
  run_dir = workdir / f"seed{seed}"
  files = study.problem_files(run_dir) if (run_dir / "eval").exists() else {}
  if 0 not in files:
    from grpo_jax.train.modes import evaluate_run, train  # noqa: PLC0415 (loads jax)

    train(cfg, run_dir, presample_only=True)  # the warm start, checkpointed at step 0
    evaluate_run(cfg, run_dir, step=0)
    files = study.problem_files(run_dir)
  return int(cfg.sampling.group_size), study.correct_PxN(files[0])


def pooled(per_seed: dict[int, list[dict]]) -> list[dict]:
  """Per bin over seeds: mean bias with a 95% t interval (unit: seed; seeds without a mixed
  group in the bin do not count), mixed groups summed."""
  bins = [r["bin"] for r in next(iter(per_seed.values()))]
  out = []
  for i, name in enumerate(bins):
    members = [seed_rows[i] for seed_rows in per_seed.values()]
    mean, lo, hi = aggregate.t_interval([r["bias"] for r in members])
    pred = aggregate.t_interval([r["predicted"] for r in members])[0]
    mixed = sum(r["mixed"] for r in members)
    out.append(
      {"bin": name, "seeds": sum(math.isfinite(r["bias"]) for r in members), "mixed": mixed}
      | {"bias": mean}
      | {"lo": lo, "hi": hi, "predicted": pred}
    )
  return out


def markdown(rows: list[dict], G: int, samples: int) -> str:
  head = (
    f"E[p̂ − p | mixed group] by difficulty (G = {G}; {samples} samples per problem: each group "
    "against independent halves of the other samples for the bin and for p). Mean over seeds "
    "[95% t interval]; β(p, G) the closed form at the measured p."
  )
  row = lambda r: [
    r["bin"], r["seeds"], r["mixed"], tables.interval(r["bias"], r["lo"], r["hi"], signed=True),
    tables.number(r["predicted"], signed=True),
  ]  # fmt: skip
  header = ["p bin", "seeds", "mixed groups", "measured bias", "β(p, G)"]
  return f"{head}\n\n{tables.markdown(header, map(row, rows))}\n"


def measure(config: str, seeds: list[int], samples: int, workdir: str, out: str) -> str:
  """Each seed's bias by bin (its evaluation under ``workdir/seed<s>``, read back where it is
  there), pooled; writes ``<out>.json`` and ``<out>.md`` and returns the Markdown."""
  workdir = pathlib.Path(workdir)
  halves, fine, G = {}, {}, None
  for seed in seeds:
    G, correct_PxM = seed_correct(config, seed, samples, workdir)
    halves[seed] = group_bias.bias_by_bin(correct_PxM, G, HALVES)
    fine[seed] = group_bias.bias_by_bin(correct_PxM, G)
    print(f"seed {seed}: " + ", ".join(f"{r['bin']} {r['bias']:+.3f}" for r in fine[seed]))
  rows, fine_rows = pooled(halves), pooled(fine)
  out = pathlib.Path(out)
  out.parent.mkdir(parents=True, exist_ok=True)
  record = {"G": G, "samples": samples, "pooled": rows, "pooled_fine": fine_rows}
  record |= {"per_seed": halves, "per_seed_fine": fine}
  out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
  text = markdown(rows, G, samples) + "\n" + markdown(fine_rows, G, samples)
  out.with_suffix(".md").write_text(text)
  return text
