"""Sweeps: a config file's ``sweep(add)`` expanded into named run directories (big_vision style).

A config file may define, beside ``get_config(arg)``::

  def sweep(add):                      # or sweep(add, arg) to see the file's argument
    for seed in (0, 1, 2):
      for alpha in (-0.5, 0.0, 0.5):
        add(seed=seed, **{"advantage.offset_coef": alpha})

Each ``add(**overrides)`` is one run: dotted config keys → values, applied after the command
line's ``--config.key=value`` overrides exactly as if typed there. ``add(arg="algo=gspo", ...)``
also replaces the file's ``get_config`` argument (for settings that change several keys). The
run directory is ``<root>/<name>``, the name being the argument's and the overrides' ``key=value``
pairs in call order joined by ``,`` (``advantage.offset_coef=-0.5,seed=0``), so a directory says
what it ran. A run recorded under config keys since replaced keeps its directory
(``grpo_jax.runs.recorded``).

Every run's config is loaded before any run starts (:func:`validate`, for ``run_local``,
``plan`` and ``pod_commands``): a misspelt override fails once, naming the run and the key,
before a run directory exists. ``plan`` (``launch.py --sweep --dry_run``) prints every run's
memory plan and trains none.

``run_local`` trains the runs one after another in this process. A finished run
(``results.json`` present) is skipped; an unfinished one resumes from its checkpoints (the loop
does that by itself); a failing run is recorded (``error.txt`` with the traceback) and the sweep
goes on; an unfinished run resumed under changed overrides fails naming the changed keys
(``grpo_jax.config.resume``) unless ``allow_config_change``; at the end it prints the runs'
held-out pass@k before and after RL side by side. ``pod_commands`` gives, per run,
one ``gcloud compute tpus tpu-vm ssh --worker=all`` line that starts it on every host of a TPU
pod slice with ``--distributed_auto``.
"""

from __future__ import annotations

import dataclasses
import inspect
import pathlib
import re
import shlex
import time
import traceback

from etils import epath

from grpo_jax.config import files as config_file
from grpo_jax.config import resume
from grpo_jax.config.experiment import Experiment
from grpo_jax.rundir import names, paths, read, write
from grpo_jax.runs import aggregate, recorded


def format_value(value) -> str:
  """The ``--config.key=value`` text that :func:`config_file.parse_value` reads back."""
  if isinstance(value, bool):
    return "true" if value else "false"
  if isinstance(value, tuple | list):
    return repr(tuple(value))
  return str(value)


def run_name(overrides: dict, arg: str | None = None) -> str:
  """``{"advantage.offset_coef": -0.5, "seed": 0}`` → ``advantage.offset_coef=-0.5,seed=0``
  (preceded by the config argument's pairs, if any).

  Characters that do not belong in a path (``/``, spaces, quotes, brackets) become ``_``."""
  pairs = [f"{k}={v}" for k, v in config_file.parse_arg(arg).items()]
  text = ",".join(pairs + [f"{k}={format_value(v)}" for k, v in overrides.items()])
  return re.sub(r"[^A-Za-z0-9_.,=+\-]", "_", text) or "default"


@dataclasses.dataclass(frozen=True)
class SweepRun:
  """One run of a sweep: its directory name and its overrides (dotted key → value)."""

  name: str
  overrides: dict
  arg: str | None = None  # the config file's argument for this run (None: the spec's own)

  def spec(self, spec: str) -> str:
    """``path[:arg]`` of this run: the run's argument replaces the spec's."""
    return spec if self.arg is None else f"{spec.partition(':')[0]}:{self.arg}"

  def cli_overrides(self) -> list[str]:
    return [f"{k}={format_value(v)}" for k, v in self.overrides.items()]


def expand(spec: str, root=None) -> list[SweepRun]:
  """The runs declared by ``sweep(add)`` in the config file of ``path[:arg]``, in call order.

  A file without ``sweep`` is one run with no overrides. Duplicate runs are an error. With the
  sweep's ``root``, a run recorded there under config keys since replaced keeps its directory
  (``grpo_jax.runs.recorded.adopt``).
  """
  path, _, arg = spec.partition(":")
  if not pathlib.Path(path).exists():
    raise FileNotFoundError(f"config file {path} not found")
  module = config_file.load_module(path)
  sweep_fn = getattr(module, "sweep", None)
  if sweep_fn is None:
    return [SweepRun("default", {})]
  runs: list[SweepRun] = []

  def add(arg: str | None = None, **overrides):
    runs.append(SweepRun(run_name(overrides, arg), dict(overrides), arg))

  if len(inspect.signature(sweep_fn).parameters) > 1:
    sweep_fn(add, arg or None)
  else:
    sweep_fn(add)
  run_names = [r.name for r in runs]
  dupes = sorted({n for n in run_names if run_names.count(n) > 1})
  if dupes:
    raise ValueError(f"sweep of {path} adds the same run more than once: {dupes}")
  if not runs:
    raise ValueError(f"sweep of {path} adds no runs")
  return runs if root is None else recorded.adopt(root, runs)


def load_run_config(spec: str, run: SweepRun, overrides=()):
  """The locked config of one run: the file, then the command-line overrides, then the run's."""
  return config_file.load(run.spec(spec), [*overrides, *run.cli_overrides()])


def run_status(run_dir: paths.PathLike) -> str:
  """``done`` (results.json), ``failed`` (error.txt), ``partial`` (started) or ``new``."""
  run_dir = epath.Path(run_dir)
  if (run_dir / names.RESULTS).exists():
    return "done"
  if (run_dir / names.ERROR).exists():
    return "failed"
  if (run_dir / names.RUN_INFO).exists():
    return "partial"
  return "new"


def _tee(path: epath.Path, log):
  def write(*parts):
    text = " ".join(str(p) for p in parts)
    paths.append_text(path, text + "\n")
    log(text)

  return write


def _check_same_config(run_dir: epath.Path, cfg: Experiment, allow_change: bool = False) -> None:
  """An unfinished run resumes only under the config it started with: a changed key (other
  than ``grpo_jax.config.resume.RESUMABLE``) is an error naming it, unless ``allow_change``."""
  info_path = run_dir / names.RUN_INFO
  if not info_path.exists():
    return
  old, new = (read.run_info(run_dir) or {}).get("hash"), config_file.content_hash(cfg)
  if not old or old == new:
    return
  saved = resume.read(run_dir)
  if saved is not None:
    resume.check(saved, cfg.to_dict(), run_dir, allow_change)
  elif not allow_change:
    raise ValueError(
      f"{run_dir} was started with config hash {old}, now {new}; the overrides "
      "changed: use a new sweep directory, delete this run or pass --allow_config_change"
    )


def validate(spec: str, runs: list[SweepRun], overrides=()) -> dict:
  """``{name: config}`` of every run, loaded before any run starts: the first run whose config
  does not load (a misspelt override or argument, a bad value) is a ValueError naming it and
  the key, raised once, before any run directory exists."""
  out = {}
  for run in runs:
    try:
      out[run.name] = load_run_config(spec, run, overrides)
    except (KeyError, ValueError, FileNotFoundError) as e:
      msg = e.args[0] if e.args else repr(e)
      raise ValueError(f"sweep run {run.name} ({len(runs)} runs, none started): {msg}") from e
  return out


def prepare_run_dir(spec: str, run_dir, run: SweepRun, overrides=(), allow_change=False):
  """Loads ``run``'s config and readies ``run_dir`` for a (re)start: the config must match an
  unfinished run's (:func:`_check_same_config`), an earlier ``error.txt`` goes, ``sweep_run.json``
  records the member. Returns the config."""
  cfg = load_run_config(spec, run, overrides)
  run_dir = epath.Path(run_dir)
  run_dir.mkdir(parents=True, exist_ok=True)
  _check_same_config(run_dir, cfg, allow_change)
  (run_dir / names.ERROR).unlink(missing_ok=True)
  info = {
    "name": run.name,
    "spec": run.spec(spec),
    "arg": run.arg,
    "overrides": run.overrides,
    "cli_overrides": list(overrides),
    "hash": config_file.content_hash(cfg),
  }
  write.run_info(run_dir, info)
  return cfg


def record_failure(run_dir, text: str) -> None:
  """``error.txt``: the member failed (:func:`run_status` reads it)."""
  write.error(run_dir, text)


def run_one(
  spec: str,
  root,
  run: SweepRun,
  overrides=(),
  train_fn=None,
  log=print,
  allow_config_change: bool = False,
) -> dict:
  """Trains (or resumes, or skips) one run; a failure is written to ``error.txt``, not raised.

  ``allow_config_change``: resume an unfinished run under a changed config (recorded in its
  ``config.json``) instead of failing it."""
  run_dir = epath.Path(root) / run.name
  entry = {"name": run.name, "overrides": run.overrides}
  if run_status(run_dir) == "done":
    return {**entry, "status": "skipped"}
  t0 = time.time()
  try:
    cfg = prepare_run_dir(spec, run_dir, run, overrides, allow_config_change)
    if train_fn is None:
      from grpo_jax.train import train as train_fn  # noqa: PLC0415 (the loop is heavy)
    extra = {"allow_config_change": True} if allow_config_change else {}
    train_fn(cfg, run_dir, log=_tee(run_dir / names.LOG, log), **extra)
    return {**entry, "status": "done", "seconds": time.time() - t0}
  except Exception as e:  # noqa: BLE001 (a sweep records any failure and goes on)
    if _is_preemption(e):
      raise  # not a failure of the run: the sweep stops, and a rerun resumes it
    record_failure(run_dir, traceback.format_exc())
    log(f"run {run.name} failed: {type(e).__name__}: {e}")
    return {**entry, "status": "failed", "seconds": time.time() - t0, "error": repr(e)}


def _is_preemption(e: Exception) -> bool:
  from grpo_jax.train.preemption import Preempted  # noqa: PLC0415 (jax is loaded by now)

  return isinstance(e, Preempted)


def enable_compile_cache(path) -> None:
  """A persistent XLA compilation cache shared by the sweep's runs: runs that differ only in
  seed, or in values that stay data (not baked into the program), reuse compiled programs."""
  import jax  # noqa: PLC0415

  jax.config.update("jax_compilation_cache_dir", str(path))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def run_local(
  spec: str,
  root,
  overrides=(),
  train_fn=None,
  log=print,
  compile_cache=True,
  allow_config_change=False,
) -> list[dict]:
  """Runs every run of the sweep one after another under ``root``; returns one entry per run
  (status skipped | done | failed) and writes them to ``<root>/sweep.json``.

  Every run's config is loaded first (:func:`validate`): a bad one stops the sweep before any
  directory is made. ``compile_cache``: keep compiled programs in ``<root>/.jax_cache``
  (see :func:`enable_compile_cache`). ``allow_config_change``: see :func:`run_one`. At the end
  it logs the runs' held-out results side by side (:func:`summary_table`)."""
  root = epath.Path(root)
  runs = expand(spec, root)
  validate(spec, runs, overrides)
  root.mkdir(parents=True, exist_ok=True)
  if compile_cache:
    enable_compile_cache(root / ".jax_cache")
  entries = []
  for i, run in enumerate(runs):
    log(f"[sweep {i + 1}/{len(runs)}] {run.name}")
    entries.append(run_one(spec, root, run, overrides, train_fn, log, allow_config_change))
    summary = {"spec": spec, "cli_overrides": list(overrides), "runs": entries}
    write.sweep_info(root, summary)
  table = summary_table(root, runs)
  if table:
    log(table)
  return entries


def summary_table(root, runs: list[SweepRun]) -> str:
  """The runs' held-out pass@k before and after RL side by side, a Markdown table with each
  run's bootstrap 95% CIs (``grpo_jax.runs.aggregate.held_out_table``); '' if no run has a
  directory under ``root``."""

  dirs = [epath.Path(root) / r.name for r in runs]
  rows = [aggregate.load_run(d) for d in dirs if d.exists()]
  table = aggregate.held_out_table(rows)
  return f"held-out pass@k before → after RL, bootstrap 95% CIs:\n{table}" if table else ""


def plan(
  spec: str, root, overrides=(), only=None, num_devices: int | None = None, target: str = "auto"
) -> str:
  """``--sweep --dry_run``: every run's status and memory plan
  (``grpo_jax.planning.dry_run``); nothing is trained, allocated or written."""
  from grpo_jax.planning import dry_run  # noqa: PLC0415

  runs = expand(spec, root)
  configs = validate(spec, runs, overrides)
  blocks = []
  for i, run in enumerate(runs):
    status = run_status(epath.Path(root) / run.name)
    header = f"# run {i + 1}/{len(runs)} {run.name} ({status}): {run.spec(spec)}"
    blocks.append(header + "\n" + dry_run.report(configs[run.name], num_devices, target))
  return "\n\n".join(blocks) + f"\n\n# dry run: {len(runs)} runs planned, none trained"


@dataclasses.dataclass(frozen=True)
class PodCommand:
  """One sweep member on a TPU pod slice: ``argv`` is the launcher command every host runs,
  ``command`` the shell line that starts it on all of them at once."""

  name: str
  argv: list[str]
  command: str


SHELL_VARIABLE = re.compile(r"\$[A-Za-z_]\w*|\$\{[A-Za-z_]\w*\}")


def shell_word(text: str) -> str:
  """``text`` quoted for a POSIX shell; a lone ``$NAME`` / ``${NAME}`` stays a variable that
  the shell expands (double quotes), so placeholders like ``$TPU_NAME`` are filled in there."""
  return f'"{text}"' if SHELL_VARIABLE.fullmatch(text) else shlex.quote(text)


def member_argv(spec: str, run_dir, run: SweepRun, overrides=(), python: str = "python"):
  """The launcher argv that trains ``run`` in ``run_dir`` on every host of a TPU pod slice
  (``--distributed_auto``: JAX detects the slice's hosts, coordinator and process ids)."""
  flags = [f"--config.{o}" for o in [*overrides, *run.cli_overrides()]]
  return [
    python,
    "experiments/launch.py",
    "--config",
    run.spec(spec),
    "--workdir",
    str(run_dir),
    *flags,
    "--distributed_auto",
  ]


@dataclasses.dataclass(frozen=True)
class Pod:
  """The TPU slice a pod sweep runs on: its name and zone (shell variables by default), the
  checkout on each VM, and the Python there."""

  tpu_name: str = "$TPU_NAME"
  zone: str = "$ZONE"
  repo_dir: str = "grpo_jax"
  python: str = "python"


def pod_commands(
  spec: str, root, overrides=(), pod: Pod | None = None, skip_done: bool = True
) -> list[PodCommand]:
  """Per sweep member (a config without ``sweep`` is one member, ``default``), one
  ``gcloud compute tpus tpu-vm ssh --worker=all`` line: every host of the slice ``cd``s into
  ``repo_dir`` (the checkout on each VM) and runs :func:`member_argv` with ``--workdir
  <root>/<name>``. The members go one after another, each on the whole slice. ``root`` must be
  a directory every host sees at the same path. Finished members (``results.json`` visible
  here) are left out when ``skip_done`` and ``root`` is local: a ``gs://`` root is never
  contacted, so the commands print offline. Every member's config is loaded first
  (:func:`validate`), so a bad override fails here, not on the pod."""
  pod = pod or Pod()
  tpu_name, zone, repo_dir, python = pod.tpu_name, pod.zone, pod.repo_dir, pod.python
  local = "://" not in str(root)
  runs = expand(spec, root if local else None)
  validate(spec, runs, overrides)
  skip_done = skip_done and local
  out = []
  for run in runs:
    run_dir = epath.Path(root) / run.name
    if skip_done and run_status(run_dir) == "done":
      continue
    argv = member_argv(spec, run_dir, run, overrides, python)
    inner = f"cd {shlex.quote(repo_dir)} && {shlex.join(argv)}"
    command = " ".join(
      [
        "gcloud compute tpus tpu-vm ssh",
        shell_word(tpu_name),
        "--zone=" + shell_word(zone),
        "--worker=all",
        "--command=" + shlex.quote(inner),
      ]
    )
    out.append(PodCommand(run.name, argv, command))
  return out


def format_pod_commands(commands: list[PodCommand]) -> str:
  lines = []
  for i, cmd in enumerate(commands):
    lines.append(f"# run {i + 1}/{len(commands)} {cmd.name}: every host of the slice at once")
    lines.append(cmd.command)
  return "\n".join(lines) if lines else "# every run of this sweep is finished"


__all__ = [
  "Pod",
  "PodCommand",
  "SweepRun",
  "enable_compile_cache",
  "expand",
  "format_pod_commands",
  "format_value",
  "load_run_config",
  "member_argv",
  "plan",
  "pod_commands",
  "prepare_run_dir",
  "record_failure",
  "run_local",
  "run_name",
  "run_one",
  "run_status",
  "shell_word",
  "summary_table",
  "validate",
]
