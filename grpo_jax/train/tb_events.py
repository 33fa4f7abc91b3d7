"""TensorBoard event files: read back, and cut after a step when a run resumes.

A killed run may have flushed events of steps past its last checkpoint; the resumed run redoes
those steps. :func:`truncate_after` drops them from the files (as ``metrics.jsonl`` drops its
lines), so every reader, not only TensorBoard's purge logic, sees each step once.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterator

from etils import epath

from grpo_jax.rundir import paths


def tensorboardx():
  """The ``tensorboardX`` package, imported without torch. Its writer module imports torch when
  torch is installed (about 1.2 s and 180 MB in every launcher process), only to accept torch
  tensors, which this library never logs; ``None`` in ``sys.modules`` makes that import fail as
  if torch were absent. A process that holds torch already (the vLLM engine's) imports it as is,
  and torch imports normally afterwards."""
  if "tensorboardX" not in sys.modules and "torch" not in sys.modules:
    sys.modules["torch"] = None
    try:
      import tensorboardX  # noqa: F401, PLC0415
    finally:
      del sys.modules["torch"]
  import tensorboardX  # noqa: PLC0415

  return tensorboardX


def _event_class():
  tensorboardx()
  from tensorboardX.proto.event_pb2 import Event  # noqa: PLC0415

  return Event


def _records(data: bytes) -> Iterator[tuple[bytes, bytes]]:
  """(framed record, payload) of each TFRecord: u64 length, u32 crc, payload, u32 crc."""
  pos = 0
  while pos + 12 <= len(data):
    (n,) = struct.unpack("<Q", data[pos : pos + 8])
    end = pos + 12 + n + 4
    if end > len(data):  # a record cut by a kill mid-write
      return
    yield data[pos:end], data[pos + 12 : pos + 12 + n]
    pos = end


def event_files(tb_dir: paths.PathLike) -> list[epath.Path]:
  return sorted(epath.Path(tb_dir).glob("events.out.tfevents.*"))


def read_events(tb_dir: paths.PathLike):
  """Every event of every file in ``tb_dir``, file by file (tensorboardX's ``Event`` protos)."""
  Event = _event_class()
  for path in event_files(tb_dir):
    for _, payload in _records(path.read_bytes()):
      yield Event.FromString(payload)


def scalars(tb_dir: paths.PathLike) -> dict[str, list[int]]:
  """``{tag: [step, ...]}`` of the scalar summaries, in file order."""
  out: dict[str, list[int]] = {}
  for ev in read_events(tb_dir):
    for v in ev.summary.value:
      if v.WhichOneof("value") == "simple_value":
        out.setdefault(v.tag, []).append(int(ev.step))
  return out


def truncate_after(tb_dir: paths.PathLike, step: int) -> None:
  """Rewrites each event file without the summaries of steps after ``step``."""
  Event = _event_class()
  for path in event_files(tb_dir):
    kept = [
      framed
      for framed, payload in _records(path.read_bytes())
      if not (ev := Event.FromString(payload)).HasField("summary") or ev.step <= step
    ]
    paths.write_bytes(path, b"".join(kept))
