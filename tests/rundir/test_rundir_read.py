"""The run-directory readers: absent files read as empty, damaged ones fail naming the file."""

import pytest

from grpo_jax.rundir import names, read


def test_absent_files_read_as_empty(tmp_path):
  assert read.metrics(tmp_path) == [] and read.samples(tmp_path) == []
  assert read.config(tmp_path) is None and read.results(tmp_path) is None
  assert not read.is_run(tmp_path)


def test_lines_and_files_round_trip(tmp_path):
  (tmp_path / names.METRICS).write_text('{"step": 1, "a": 0.5}\n\n{"step": 2, "a": 1.0}\n')
  (tmp_path / names.CONFIG).write_text('{"config": {"seed": 3}}')
  assert [m["step"] for m in read.metrics(tmp_path)] == [1, 2]
  assert read.config(tmp_path)["config"]["seed"] == 3 and read.is_run(tmp_path)


def test_a_damaged_file_names_the_file_and_line(tmp_path):
  (tmp_path / names.METRICS).write_text('{"step": 1}\n{"step": 2, "a": \n')
  with pytest.raises(ValueError, match=rf"{names.METRICS}:2 is not valid JSON"):
    read.metrics(tmp_path)
  (tmp_path / names.RESULTS).write_text("{")
  with pytest.raises(ValueError, match=rf"{names.RESULTS} is not valid JSON"):
    read.results(tmp_path)
