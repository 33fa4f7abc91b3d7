"""Benchmarks of the library, each a module run from the repository root:

  python -m experiments.benchmarks.step --help

``common`` holds the checkpoints, prompts, timers and tables they share; ``workload`` the RL
step ``step`` times, which its peers (``peers.trl``, ``peers.tunix``) run on the same work;
``accel`` the sections of ``accelerator`` (one GPU or TPU)."""
