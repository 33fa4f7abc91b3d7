"""The real launcher with a reward that has signal for an untrained tiny model (1 for completions
of even length), so multi-host tests compare runs whose updates are not all zero."""

import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "experiments"))

from grpo_jax import data  # noqa: E402


def length_parity_rewards(self, problems, completions):
  return np.asarray([float(len(c) % 2 == 0) for c in completions], np.float32)


if __name__ == "__main__":
  data.CountdownTask.rewards = length_parity_rewards
  import launch  # noqa: E402

  sys.exit(launch.main(sys.argv[1:]))
