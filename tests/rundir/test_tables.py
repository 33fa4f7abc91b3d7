"""rundir.tables against hand-written tables: numbers, intervals (signed, missing bounds,
non-finite values, numpy scalars) and the row-length check."""

import math

import numpy as np
import pytest

from grpo_jax.rundir import tables


def test_number_and_interval():
  assert tables.number(0.12345) == "0.123" and tables.number(0.5, signed=True) == "+0.500"
  assert tables.number(np.float32(0.25)) == "0.250" and tables.number(np.int64(7)) == "7"
  assert tables.number(math.nan) == tables.DASH and tables.number(True) == "True"
  assert tables.interval(0.2, 0.1, 0.3) == "0.200 [0.100, 0.300]"
  assert tables.interval(-0.01, -0.03, 0.01, signed=True) == "-0.010 [-0.030, +0.010]"
  assert tables.interval(0.2) == tables.interval(0.2, math.nan, math.nan) == "0.200"
  assert tables.interval(0.2, None, None) == "0.200"


def test_markdown():
  got = tables.markdown(["a", "b"], [["x", 0.5], [3, tables.interval(0.1, 0.0, 0.2)]])
  assert got == "| a | b |\n|---|---|\n| x | 0.500 |\n| 3 | 0.100 [0.000, 0.200] |"
  assert tables.markdown(["a"], []) == "| a |\n|---|"
  with pytest.raises(ValueError, match="a table row has 1 cells for 2 columns"):
    tables.markdown(["a", "b"], [["x"]])
