"""Run-directory paths on any file system the JAX ecosystem reads, through ``etils.epath`` as
orbax does: local folders, and URIs such as ``gs://bucket/runs/x`` (``gcsfs``, the ``gcs``
extra) where every host of a pod sees the same run directory. (``pathlib`` would turn
``gs://b/x`` into the local folder ``gs:/b/x``.)

Object stores have no append and no atomic rename; the two helpers here give the run directory
the same meaning on both: :func:`append_text` composes the new text onto the object,
:func:`write_bytes` writes a
local file through a temporary name (so a kill never leaves half a file) and an object in one
request (objects are replaced whole).
"""

from __future__ import annotations

import os
import tempfile
import uuid

from etils import epath

from grpo_jax.rundir import names

PathLike = str | os.PathLike


def is_uri(path: PathLike) -> bool:
  """True for ``scheme://...`` paths (object stores), False for local ones."""
  return "://" in os.fspath(path)


def absolute(p: PathLike) -> epath.Path:
  """A local path made absolute (orbax needs one); a URI as it is (``epath``'s ``resolve``
  would prefix the working directory)."""
  return epath.Path(p) if is_uri(p) else epath.Path(os.path.abspath(os.fspath(p)))


def local_staging(p: PathLike, kind: str) -> str:
  """A local folder for tools that write only local files (W&B, process logs) about the run
  directory ``p``: ``<tmp>/grpo_jax_<kind>/<bucket path>`` for a URI. Callers use ``p``
  itself when it is local."""
  return os.path.join(tempfile.gettempdir(), f"grpo_jax_{kind}", os.fspath(p).split("://", 1)[1])


def append_text(p: PathLike, text: str) -> None:
  """Appends ``text`` to the file ``p``: an append locally; on Cloud Storage the new text is
  uploaded alone, as a part object composed onto the file server-side (GCS compose), so a run's
  line files (metrics, samples, logs) cost their size in uploads, not its square. A store
  without compose gets the object rewritten."""
  if not is_uri(p):
    with epath.Path(p).open("a") as f:
      f.write(text)
    return
  import fsspec  # noqa: PLC0415

  fs, path = fsspec.core.url_to_fs(os.fspath(p))
  fs.invalidate_cache(path)  # another process (a resumed run) may have written it
  if not fs.exists(path):
    fs.pipe_file(path, text.encode())
    return
  if not hasattr(fs, "merge"):
    fs.pipe_file(path, fs.cat_file(path) + text.encode())
    return
  part = f"{path}.part-{uuid.uuid4().hex}"
  fs.pipe_file(part, text.encode())
  try:
    fs.merge(path, [path, part])
  finally:
    fs.rm_file(part)


def write_bytes(p: PathLike, data: bytes) -> None:
  """Replaces the file ``p`` whole: locally through ``<name>.tmp`` and a rename."""
  p = epath.Path(p)
  if is_uri(p):
    p.write_bytes(data)
    return
  tmp = p.with_name(p.name + ".tmp")
  tmp.write_bytes(data)
  os.replace(tmp, p)


def write_text(p: PathLike, text: str) -> None:
  write_bytes(p, text.encode())


# Where the files with templated names lie.


def eval_result(workdir: PathLike, benchmark: str, step: int) -> epath.Path:
  """``eval/<benchmark>_step<k>.json``."""
  name = names.EVAL_RESULT.format(benchmark=benchmark, step=step)
  return epath.Path(workdir) / names.EVAL / name


def eval_problems(workdir: PathLike, benchmark: str, step: int) -> epath.Path:
  """``eval/<benchmark>_step<k>_problems.jsonl``."""
  name = names.EVAL_PROBLEMS.format(benchmark=benchmark, step=step)
  return epath.Path(workdir) / names.EVAL / name


def profile(workdir: PathLike, step: int = 0) -> epath.Path:
  """``profile/pass_rates.jsonl`` (step 0), ``profile/pass_rates_step<k>.jsonl`` after."""
  name = names.PASS_RATES if step == 0 else names.PASS_RATES_AT.format(step=step)
  return epath.Path(workdir) / names.PROFILE / name
