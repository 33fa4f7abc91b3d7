"""docs/coming_from_trl_verl_tunix.md cannot drift: every key its "ours" column names exists in
the base config, and every ``key=value`` there loads."""

import pathlib
import re

import pytest

from grpo_jax.config import base_config
from grpo_jax.config import files as config_file
from grpo_jax.config.resume import flatten

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs/coming_from_trl_verl_tunix.md"
TINY = str(ROOT / "configs/tiny_test.py")


def table_rows(text: str) -> list[tuple[str, str, str]]:
  """(theirs, ours, differences) of every body row of the doc's three-column tables."""
  rows = []
  for line in text.splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if not line.startswith("|") or len(cells) != 3 or set(cells[0]) <= set("-: "):
      continue
    if cells[1] == "ours":  # a header
      continue
    rows.append(tuple(cells))
  return rows


def our_names(cell: str) -> list[str]:
  return re.findall(r"`([^`]+)`", cell)


ROWS = table_rows(DOC.read_text())


def test_the_doc_has_the_tables():
  theirs = " ".join(r[0] for r in ROWS)
  for name in (
    "num_generations",
    "epsilon_high",
    "importance_sampling_level",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "mask_truncated_completions",
    "actor_rollout_ref.rollout.n",
    "ppo_mini_batch_size",
    "ppo_micro_batch_size_per_gpu",
    "clip_ratio_high",
    "loss_agg_mode",
    "use_kl_loss",
    "algorithm.adv_estimator",
    "data.max_response_length",
  ):
    assert name in theirs, name
  assert len(ROWS) >= 40


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r[0][:60])
def test_every_key_in_the_table_exists_and_every_value_loads(row):
  keys = set(flatten(base_config().to_dict()))
  names = our_names(row[1])
  assert names or row[1] == "—", f"row {row[0]} names none of our keys"
  for name in names:
    key, sep, value = name.partition("=")
    assert key in keys, f"{key} (row {row[0]}) is not a config key"
    if sep:
      config_file.load(TINY, [name])


def test_the_parser_catches_a_wrong_key():
  (row,) = table_rows("| a | `loss.kl_coeff` | b |\n|---|---|---|\n")
  assert row[1] == "`loss.kl_coeff`"
  assert our_names(row[1])[0] not in flatten(base_config().to_dict())
