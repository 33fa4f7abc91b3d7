"""The run directory's writers read back by its readers: JSON files indented with sorted keys,
per-step line files appended and cut back to a step on resume, and the evaluation's, strategy's,
sweeps' and plan's files byte for byte in the layouts they have always had."""

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


def test_eval_files_sit_under_eval_with_their_layouts(tmp_path):
  path = write.eval_result(tmp_path, "aime24", 3, {"pass@1": 0.5, "by_level": {"1": {"n": 2}}})
  assert path == tmp_path / "eval" / "aime24_step3.json"
  assert path.read_text() == (
    '{\n  "benchmark": "aime24",\n  "by_level": {\n    "1": {\n      "n": 2\n    }\n  },\n'
    '  "pass@1": 0.5,\n  "step": 3\n}\n'
  )
  problems = write.eval_problems(tmp_path, "aime24", 3, [{"gold": "1", "answers": ["1"]}])
  assert problems.read_text() == '{"answers": ["1"], "gold": "1"}\n'
  assert problems.name == "aime24_step3_problems.jsonl"
  assert write.eval_summary(tmp_path, "| a |").read_text() == "| a |\n"


def test_line_files_replace_and_append(tmp_path):
  path = tmp_path / "profile" / "pass_rates.jsonl"
  write.json_lines(path, [{"id": "a", "k": 1}, {"id": "b"}])
  write.append_json_lines(path, [{"k": 2, "id": "c"}])
  write.append_json_lines(path, [])
  assert path.read_text() == '{"id": "a", "k": 1}\n{"id": "b"}\n{"id": "c", "k": 2}\n'
  write.json_lines(path, [{"id": "a"}])
  assert read.json_lines(path) == [{"id": "a"}]


def test_strategy_sweep_and_plan_files_keep_their_key_order(tmp_path):
  rows = [{"preview": "p", "rollouts": 2, "success_rate": 0.5}]
  path = write.strategy_previews(tmp_path, rows)
  assert read.strategy_previews(tmp_path) == rows and path.name == "strategy_previews.json"
  assert path.read_text().startswith('[\n  {\n    "preview": "p",')
  meta = write.presample_meta(tmp_path / "presample", {"z": 1, "a": 2})
  assert meta.read_text() == '{\n  "z": 1,\n  "a": 2\n}\n'
  write.presample_part_done(tmp_path / "presample")
  assert (tmp_path / "presample" / "done").read_text() == ""
  write.run_info(tmp_path, {"name": "r", "hash": tmp_path})
  assert read.run_info(tmp_path) == {"name": "r", "hash": str(tmp_path)}
  write.sweep_info(tmp_path, {"spec": "s", "runs": []})
  assert (tmp_path / "sweep.json").read_text() == '{\n  "spec": "s",\n  "runs": []\n}\n'
  write.error(tmp_path / "failed", "Traceback")
  assert (tmp_path / "failed" / "error.txt").read_text() == "Traceback"
  js, md = write.compiled_report(tmp_path / "plan", {"target": "cpu", "fits": True}, "| x |")
  assert js.read_text() == '{\n  "target": "cpu",\n  "fits": true\n}\n'
  assert md.read_text() == "| x |\n" and md.name == "compiled.md"
