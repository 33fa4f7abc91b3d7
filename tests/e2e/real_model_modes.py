"""Two RL steps of every training mode on SmolLM2-135M-Instruct, through the launcher, in one
process (so the modes that sample the same shapes share the sampler's compilation).

  python tests/e2e/real_model_modes.py ROOT HF_DIR [sharded]

``HF_DIR`` is the checkpoint cut to its first 2 of 30 layers (``real_model.truncated_dir``): the
real tokenizer, chat template and embeddings at a fifteenth of the compile time. The modes run
on one CPU device, except those of ``SHARDED`` (the online two-stage rollout, whose preview and
completion rows split over the mesh): they run with ``sharded``, in a process of two simulated
devices (a step on two simulated devices of this 2-core machine takes about three times as
long, so one mode stands for the sharded path; ``tests/e2e/test_multihost*.py`` cover the rest
on the tiny model). Each mode runs
``configs/smollm2_arithmetic.py:tiny=1`` (the math task on generated arithmetic) into
``ROOT/<mode>``; the GRPO run also warm-starts (two supervised steps on the worked solutions in
the chat format) and evaluates after RL. It is then exported to ``ROOT/export``.
The band run profiles its initial policy first, and ``--mode=profile`` profiles its last
checkpoint twice (the second time resuming a cut file). ``tests/e2e/test_real_model_launch.py``
reads the run directories.
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

ONE_STAGE = ["--config.strategy.enabled=false", "--config.advantage.baseline=group"]
PRESAMPLED = [
  "--config.strategy.source=presampled",
  "--config.advantage.offset_coef=-0.5",
]
# Two warm-start steps, each checked on 2 training-stream problems (32-token completions: the
# shortest worked solutions need more than the tiny config's 16); the held-out evaluation after
# RL on the tiny config's 4 problems x 2 samples.
WARM_START_AND_EVAL = [
  "--config.sampling.max_new_tokens=32",
  "--config.warmstart.enabled=true",
  "--config.warmstart.max_steps=2",
  "--config.warmstart.check_every=1",
  "--config.warmstart.check_problems=2",
  "--config.warmstart.batch_size=2",
  "--config.eval.after=true",
]
MODES = {
  "grpo": ONE_STAGE + ["--config.hadw.enabled=false"] + WARM_START_AND_EVAL,
  "dapo": ONE_STAGE
  + [
    "--config.hadw.enabled=false",
    "--config.loss.kind=dapo",
    "--config.dapo.dynamic_sampling=true",
    "--config.dapo.max_sampling_rounds=2",
    "--config.dapo.overlong_penalty=true",
    "--config.dapo.overlong_buffer=4",
  ],
  "gspo": ONE_STAGE
  + [
    "--config.hadw.enabled=false",
    "--config.loss.kind=gspo",
    "--config.loss.aggregation=seq_mean_token_mean",
  ],
  "hadw": ONE_STAGE + ["--config.hadw.enabled=true"],
  "presampled": PRESAMPLED + ["--config.hadw.enabled=false"],
  "shuffle": PRESAMPLED
  + ["--config.hadw.enabled=false", "--config.advantage.offset_control=shuffle"],
  "online": ["--config.strategy.source=online", "--config.hadw.enabled=true"],
  # The difficulty profile of the initial policy (8 problems x 2 samples), then RL on its band,
  # re-profiled after step 1 (the curriculum).
  "band": ONE_STAGE
  + [
    "--config.hadw.enabled=false",
    "--config.data.pass_rate_band=(0.0, 0.5)",
    "--config.profile.num_problems=8",
    "--config.profile.num_samples=2",
    "--config.data.reprofile_every=1",
  ],
}


SHARDED = ("online",)


def main(root: str, hf_dir: str, part: str = "") -> int:
  # Compiled programs persist in the suite's cache (``tests/plugin.py``, inherited through
  # the environment): the seven modes' updates take most of the tier's time.
  from grpo_jax.runs import launcher as launch

  root = pathlib.Path(root)
  base = ["--config", str(ROOT / f"configs/smollm2_arithmetic.py:tiny=1,hf_path={hf_dir}")]
  common = ["--config.logging.progress=false", "--config.logging.plot=false"]
  for mode, overrides in MODES.items():
    if (mode in SHARDED) != (part == "sharded"):
      continue
    code = launch.main(base + ["--workdir", str(root / mode)] + common + overrides)
    if code:
      return code
  if part == "sharded":
    return 0
  # docs/custom_task.md's example: its own rows and reward functions, through the launcher.
  custom = ["--config", str(ROOT / f"configs/custom_task.py:tiny=1,hf_path={hf_dir}")]
  code = launch.main(custom + ["--workdir", str(root / "custom")] + common)
  if code:
    return code
  # --mode=profile on the band run's last checkpoint, then once more after cutting the file
  # back to its first chunk and a half-written line (a killed profile): it must end the same.
  profile = base + common + MODES["band"] + ["--workdir", str(root / "band"), "--mode=profile"]
  code = launch.main(profile)
  path = root / "band/profile/pass_rates_step2.jsonl"
  if code or not path.exists():
    return code or 1
  lines = path.read_text().splitlines(keepends=True)
  path.with_suffix(".uninterrupted").write_text("".join(lines))
  path.write_text("".join(lines[:4]) + lines[4][:12])
  code = launch.main(profile)
  if code:
    return code
  export = ["--workdir", str(root / "grpo"), "--mode=export", "--out", str(root / "export")]
  return launch.main(base + common + MODES["grpo"] + export)


if __name__ == "__main__":
  sys.exit(main(*sys.argv[1:]))
