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


def test_appends_on_cloud_storage_upload_each_line_once(monkeypatch):
  """On a GCS API server (127.0.0.1): every append uploads only its own text, composed onto the
  object, and leaves no part object behind; what a reader sees is every line in order."""
  import fsspec

  from tests.support.gcs_emulator import BUCKET, emulator, patched_environ

  uploaded, real_url_to_fs = [], fsspec.core.url_to_fs

  class Counting:  # the store, counting the bytes each upload sends
    def __init__(self, fs):
      self.fs = fs

    def pipe_file(self, path, data):
      uploaded.append(len(data))
      return self.fs.pipe_file(path, data)

    def __getattr__(self, name):
      return getattr(self.fs, name)

  def url_to_fs(url):
    fs, path = real_url_to_fs(url)
    return Counting(fs), path

  monkeypatch.setattr(fsspec.core, "url_to_fs", url_to_fs)
  with emulator() as env, patched_environ(env):
    uri = f"gs://{BUCKET}/run/metrics.jsonl"
    lines = [f'{{"step": {i}, "x": "{"y" * 50}"}}\n' for i in range(6)]
    for line in lines:
      paths.append_text(uri, line)
    fs, _ = real_url_to_fs(uri)
    fs.invalidate_cache()
    assert fs.cat_file(uri).decode() == "".join(lines)
    assert uploaded == [len(line) for line in lines]  # no rewrite of what came before
    assert fs.ls(f"{BUCKET}/run") == [f"{BUCKET}/run/metrics.jsonl"]
