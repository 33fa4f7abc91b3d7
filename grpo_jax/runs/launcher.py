"""The launcher (``experiments/launch.py``): one experiment from a config file, with
``--config.key=value`` overrides.

  python experiments/launch.py --config configs/quickstart.py [--workdir DIR] [--config.steps=20]

Re-running the same command on the same workdir resumes from the last checkpoint.
``--mode=presample`` only warm-starts and draws the strategy previews (METHODS §5) into the
workdir; the training command on the same workdir then resumes from there.
``--mode=export --out DIR [--step N]`` writes the workdir's checkpoint as a Hugging Face directory.
``--mode=profile`` writes the training problems' pass rates under the policy to
``profile/pass_rates.jsonl`` (``data.pass_rate_band`` trains on a band of them).
A workdir resumes only under the config it started with (``grpo_jax.config.resume``);
``--allow_config_change`` resumes under a changed one and records the change in config.json.
``--sweep`` / ``--pod`` load every run's config before starting any; ``--sweep --dry_run``
prints every run's plan and trains none. ``--pod`` prints, per run, one
``gcloud compute tpus tpu-vm ssh --worker=all`` command that trains it on every host of a TPU
pod slice (``--distributed_auto``); ``docs/scaling.md`` walks from one host to a pod.

``--mode=eval`` needs a checkpoint in the workdir, or ``--allow_init`` to evaluate the model as
built; ``--sweep --mode=eval`` evaluates every member. ``--print_config`` prints the resolved
config and stops. What cannot run fails before any file is written (``grpo_jax.runs.preflight``;
a malformed data row or a ``loss.pack_width`` under the longest row once the data is read,
before any model is built), with exit status 2 and no traceback.

Exit status: 0 done, 2 config error, 75 preempted: SIGTERM (what a preempted TPU VM gets) saved
the checkpoint of the current step on every host; the same command resumes from it.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

from grpo_jax import config as config_lib
from grpo_jax.config import files as config_file
from grpo_jax.runs import preflight
from grpo_jax.runs.modes import MODES


def parse_args(argv: list[str]):
  parser = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  parser.add_argument("--config", required=True, help="configs/<name>.py[:key=value,...]")
  parser.add_argument("--workdir", default=None, help="run directory (default runs/<name>)")
  parser.add_argument(
    "--mode",
    default="train",
    choices=["train", "presample", "eval", "export", "profile", "compile"],
    help="compile: compile every program of one RL step for --target / --topology with "
    "abstract weights (no TPU needed: the [tpu] extra's libtpu compiles for a slice from a CPU "
    "host) and write XLA's memory and cost to <workdir>/plan/compiled.{json,md}; "
    "presample: warm start, then draw the strategy previews and stop; "
    "profile: sample profile.num_samples completions of each training problem with the "
    "workdir's latest checkpoint (a fresh workdir: the warm-started model.hf_path or init) "
    "and write profile/pass_rates.jsonl (profile/pass_rates_step<k>.jsonl at step k); "
    "eval: evaluate the workdir's checkpoint (or model.hf_path) on the "
    "config's benchmarks; export: write it as a Hugging Face directory",
  )
  parser.add_argument(
    "--step",
    type=int,
    default=None,
    help="with --mode=eval/export: the checkpoint step (default: the latest)",
  )
  parser.add_argument("--out", default=None, help="with --mode=export: the output directory")
  parser.add_argument(
    "--sweep",
    action="store_true",
    help="run the config's sweep(add) one run after another under --workdir",
  )
  parser.add_argument(
    "--launcher",
    default="local",
    choices=["local", "ray"],
    help="with --sweep: local runs the members one after another in this process; ray "
    "submits each to a Ray cluster (grpo_jax.runs.ray_sweep), concurrently as it has room",
  )
  parser.add_argument(
    "--ray_address",
    default="",
    help="with --launcher=ray: the cluster to join ('auto', host:port; default: a new local one)",
  )
  parser.add_argument(
    "--ray_processes",
    type=int,
    default=1,
    help="with --launcher=ray: launcher processes per member (one per host of a slice), "
    "gang-scheduled, process 0 the jax.distributed coordinator",
  )
  parser.add_argument(
    "--ray_bundle",
    default='{"CPU": 1}',
    help="with --launcher=ray: Ray resources of one process, as JSON (e.g. '{\"TPU\": 4}')",
  )
  parser.add_argument(
    "--ray_strategy",
    default="PACK",
    choices=["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"],
    help="with --launcher=ray: placement of a member's processes (STRICT_SPREAD: one per node)",
  )
  parser.add_argument(
    "--ray_max_concurrent",
    type=int,
    default=0,
    help="with --launcher=ray: members in flight at most (0: as many as the cluster fits)",
  )
  parser.add_argument(
    "--ray_script",
    default="",
    help="with --launcher=ray: the script each member process runs with the launcher's flags "
    "(default: this launcher; e.g. a wrapper that registers a task or reward first)",
  )
  parser.add_argument(
    "--ray_retries",
    type=int,
    default=2,
    help="with --launcher=ray: restarts of a member after a process fails (each resumes)",
  )
  parser.add_argument(
    "--pod",
    action="store_true",
    help="print, per sweep member, one `gcloud compute tpus tpu-vm ssh --worker=all` command "
    "that runs it on every host of a TPU pod slice with --distributed_auto",
  )
  parser.add_argument(
    "--tpu_name",
    default="$TPU_NAME",
    help="with --pod: the TPU VM name (default: left to the shell as $TPU_NAME)",
  )
  parser.add_argument(
    "--tpu_zone", default="$ZONE", help="with --pod: its zone (default: left as $ZONE)"
  )
  parser.add_argument(
    "--repo_dir",
    default="grpo_jax",
    help="with --pod: this checkout's directory on the TPU VMs (relative to the ssh home)",
  )
  parser.add_argument(
    "--dry_run",
    action="store_true",
    help="build mesh and model shapes, print a memory estimate, allocate nothing "
    "(with --sweep: for every run of the sweep)",
  )
  parser.add_argument(
    "--target",
    default="auto",
    help="with --dry_run: the chips to plan for (auto: this machine's; v5p-64, v5e-8, v6e-8, "
    "h100-8, cpu); with --mode=compile: a TPU slice (v5p-8 … v5p-512, v5e-4 … v5e-256, "
    "v6e-4 … v6e-256), or auto / cpu (this host's devices)",
  )
  parser.add_argument(
    "--topology",
    default="",
    help="with --mode=compile: a TPU topology instead of a named slice, e.g. v5p:4x4x8, v5e:2x4",
  )
  parser.add_argument(
    "--allow_init",
    action="store_true",
    help="with --mode=eval on a run directory without a checkpoint: evaluate the model as "
    "built (model.hf_path, or a fresh init)",
  )
  parser.add_argument(
    "--print_config",
    action="store_true",
    help="print the resolved config (every key, after the overrides) as JSON and stop",
  )
  parser.add_argument(
    "--allow_config_change",
    action="store_true",
    help="resume a workdir whose config.json differs from this config (the changed keys are "
    "recorded in config.json); without it such a resume is an error naming them",
  )
  # Multi-host (grpo_jax.sharding.distributed): every host runs the same command with its own
  # --process_id; or set JAX_COORDINATOR_ADDRESS / JAX_NUM_PROCESSES / JAX_PROCESS_ID.
  parser.add_argument("--coordinator_address", default="", help="host0:port of process 0")
  parser.add_argument("--num_processes", type=int, default=0)
  parser.add_argument("--process_id", type=int, default=-1)
  parser.add_argument(
    "--distributed_auto",
    action="store_true",
    help="jax.distributed.initialize() with cluster auto-detection (TPU pods)",
  )
  parser.add_argument(
    "--heartbeat_timeout",
    type=int,
    default=100,
    help="seconds before the job fails when a process stops responding",
  )
  overrides = [a[len("--config.") :] for a in argv if a.startswith("--config.")]
  rest = [a for a in argv if not a.startswith("--config.")]
  args = parser.parse_args(rest)
  if args.distributed_auto and (
    args.coordinator_address or args.num_processes or args.process_id >= 0
  ):
    parser.error(
      "--distributed_auto detects the coordinator, process count and process id itself; "
      "drop --coordinator_address / --num_processes / --process_id, or drop --distributed_auto"
    )
  if args.launcher == "ray" and not args.sweep:
    parser.error("--launcher=ray runs a sweep's members: add --sweep")
  if args.sweep and args.mode not in ("train", "eval"):
    parser.error(f"--mode={args.mode} runs on one run directory: drop --sweep")
  if args.sweep and args.mode == "eval" and args.launcher != "local":
    parser.error("--sweep --mode=eval evaluates the members here: drop --launcher=ray")
  if args.pod and (args.mode != "train" or args.step is not None):
    parser.error("--pod prints training commands: drop --mode / --step")
  if args.step is not None and args.mode not in ("eval", "export"):
    parser.error("--step picks the checkpoint of --mode=eval or --mode=export")
  if args.workdir is None:
    args.workdir = str(pathlib.Path("runs") / pathlib.Path(args.config.split(":")[0]).stem)
  return args, overrides


def _config_error(e: Exception) -> int:
  print(f"config error: {e.args[0] if e.args else e}", file=sys.stderr)
  return 2


def _initialize(args) -> None:
  from grpo_jax.sharding import distributed

  distributed.initialize(
    args.coordinator_address,
    args.num_processes,
    args.process_id,
    auto=args.distributed_auto,
    heartbeat_timeout_seconds=args.heartbeat_timeout,
  )


def _ray_sweep(args, overrides, bundle: dict, script: str) -> int:
  """``--sweep --launcher=ray``: every member on the Ray cluster (grpo_jax.runs.ray_sweep)."""
  import ray

  from grpo_jax.runs.ray_sweep import Gang, RaySweep

  if args.ray_address:
    ray.init(address=args.ray_address, log_to_driver=False)
  else:  # a new cluster of this machine alone, on its loopback address
    ray.init(_node_ip_address="127.0.0.1", include_dashboard=False, log_to_driver=False)
  try:
    gang = Gang(
      processes=args.ray_processes,
      bundle=bundle,
      strategy=args.ray_strategy,
      max_concurrent=args.ray_max_concurrent,
      max_retries=args.ray_retries,
      script=os.path.abspath(args.ray_script or script),
    )
    sweep_ = RaySweep(args.config, args.workdir, overrides, gang, print, args.allow_config_change)
    entries = sweep_.run()
  finally:
    ray.shutdown()
  print("\n".join(f"{e['status']:>8}  {e['name']}" for e in entries))
  return int(any(e["status"] == "failed" for e in entries))


def _sweep_eval(args, overrides) -> int:
  """``--sweep --mode=eval``: every member's checkpoint (each member checked first)."""
  from grpo_jax.runs import sweep
  from grpo_jax.train.modes import evaluate_run

  members = []
  try:
    for run in sweep.expand(args.config, args.workdir):
      workdir = os.path.join(args.workdir, run.name)
      preflight.check_checkpoint(workdir, "eval", args.step, args.allow_init)
      members.append((sweep.load_run_config(args.config, run, overrides), workdir))
  except (KeyError, ValueError, FileNotFoundError) as e:
    return _config_error(e)
  _initialize(args)
  for cfg, workdir in members:
    evaluate_run(cfg, workdir, args.step)
    print(f"evaluated: {workdir}")
  return 0


def main(argv: list[str], script: str = "experiments/launch.py") -> int:
  """Runs the launcher on ``argv``; returns its exit status. ``script``: the file each Ray
  member process runs (the launcher itself unless ``--ray_script``)."""
  args, overrides = parse_args(argv)
  if args.sweep or args.pod:
    from grpo_jax.runs import sweep

    try:
      if args.pod:
        pod = sweep.Pod(args.tpu_name, args.tpu_zone, args.repo_dir)
        commands = sweep.pod_commands(args.config, args.workdir, overrides, pod)
        print(sweep.format_pod_commands(commands))
        return 0
      if args.dry_run:
        print(sweep.plan(args.config, args.workdir, overrides, target=args.target))
        return 0
      sweep.validate(args.config, sweep.expand(args.config), overrides)
      bundle = json.loads(args.ray_bundle)
    except (KeyError, ValueError, FileNotFoundError) as e:
      return _config_error(e)
    if args.launcher == "ray":
      return _ray_sweep(args, overrides, bundle, script)
    if args.mode == "eval":
      return _sweep_eval(args, overrides)
    _initialize(args)  # every host of a multi-host sweep runs this same command
    from grpo_jax.train.preemption import EXIT_CODE, Preempted

    try:
      entries = sweep.run_local(
        args.config, args.workdir, overrides, allow_config_change=args.allow_config_change
      )
    except Preempted as e:  # the machine is going away: stop the sweep, rerun resumes it
      print(e)
      return EXIT_CODE
    print("\n".join(f"{e['status']:>8}  {e['name']}" for e in entries))
    return int(any(e["status"] == "failed" for e in entries))
  try:
    cfg = config_file.load(args.config, overrides)
    if args.print_config:
      print(json.dumps(config_lib.to_dict(cfg), indent=2, sort_keys=True))
      return 0
    if args.dry_run:  # shapes only: nothing is read, loaded or written
      from grpo_jax.planning import dry_run

      print(dry_run.report(cfg, target=args.target))
      from grpo_jax.planning import compiled  # the compiler's numbers, where --mode=compile ran

      beside = compiled.compiled_beside_plan(args.workdir, cfg)
      if beside:
        print(beside)
      return 0
    if args.mode == "compile":
      return MODES["compile"](cfg, args)
    preflight.check_model_path(cfg.model.hf_path)
    preflight.check_engine(cfg.sampling.engine)
    preflight.check_storage(args.workdir)
    preflight.check_checkpoint(args.workdir, args.mode, args.step, args.allow_init)
  except (KeyError, ValueError, FileNotFoundError) as e:
    return _config_error(e)
  from grpo_jax.config.fields import ConfigError
  from grpo_jax.data.dataset_task import DataError

  _initialize(args)
  try:
    preflight.check_mesh(cfg.mesh)
    return MODES[args.mode](cfg, args)
  # A malformed data row, a pack width under the prompt's: found once the data is read, before
  # any model is built or file written; a resume under a changed config.
  except (preflight.PreflightError, ConfigError, DataError) as e:
    return _config_error(e)
