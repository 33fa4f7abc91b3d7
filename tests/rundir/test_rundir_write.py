"""The run directory's writers read back by its readers: JSON files indented with sorted keys,
per-step line files appended and cut back to a step on resume."""

from grpo_jax.rundir import read, write


def test_json_file_round_trips_sorted_and_indented(tmp_path):
  path = tmp_path / "sub" / "config.json"  # the folder is created
  write.json_file(path, {"b": 1, "a": [1, 2], "p": tmp_path})
  assert read.json_file(path) == {"a": [1, 2], "b": 1, "p": str(tmp_path)}
  text = path.read_text()
  assert text.startswith('{\n  "a": [') and text.endswith("}\n")
  write.json_file(path, {"c": 3})  # replaced whole
  assert read.json_file(path) == {"c": 3}


def test_step_lines_append_and_keep_steps_through(tmp_path):
  path = tmp_path / "metrics.jsonl"
  write.step_lines(path, 1, [{"y": 2.0, "x": 1.0}])
  write.step_lines(path, 2, [{"x": 3.0}, {"x": 4.0}])
  write.step_lines(path, 3, [])  # nothing to write, no line
  assert path.read_text().splitlines()[0] == '{"step": 1, "x": 1.0, "y": 2.0}'
  assert [r["step"] for r in read.json_lines(path)] == [1, 2, 2]
  write.keep_steps_through(path, 1)  # a run resumed from step 1 redoes step 2
  assert read.json_lines(path) == [{"step": 1, "x": 1.0, "y": 2.0}]
  write.keep_steps_through(tmp_path / "absent.jsonl", 1)  # no file: nothing happens
  assert not (tmp_path / "absent.jsonl").exists()
