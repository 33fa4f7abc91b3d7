"""Run-directory paths: URIs stay URIs, local files append and replace as they should."""

import os
import tempfile

from grpo_jax.rundir import paths


def test_uris_stay_uris_and_local_paths_become_absolute(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert paths.is_uri("gs://b/runs/x") and not paths.is_uri("runs/x")
  assert str(paths.absolute("gs://b/runs/x")) == "gs://b/runs/x"  # not <cwd>/gs:/b/runs/x
  assert str(paths.absolute("runs/x")) == os.path.join(str(tmp_path), "runs/x")
  staged = paths.local_staging("gs://b/runs/x", "logs")
  assert staged == os.path.join(tempfile.gettempdir(), "grpo_jax_logs", "b/runs/x")


def test_append_and_replace_on_local_files(tmp_path):
  f = tmp_path / "m.jsonl"
  paths.append_text(f, "a\n")
  paths.append_text(f, "b\n")
  assert f.read_text() == "a\nb\n"
  paths.write_text(f, "c\n")
  assert f.read_text() == "c\n" and not (tmp_path / "m.jsonl.tmp").exists()
