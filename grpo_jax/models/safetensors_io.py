"""Streaming safetensors: read one tensor at a time, write one tensor at a time.

A safetensors file is an 8-byte little-endian header length, a JSON header mapping each name to
``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets after the header), then the raw
row-major bytes. Reading seeks to a tensor's bytes and fills one NumPy buffer of exactly that
size, so the host never holds more than the tensor being moved; ``read_slice`` maps the bytes
and copies out one slice, so a host that holds a shard of a tensor reads that shard's bytes
only. A checkpoint is either
``model.safetensors`` or shards listed by ``model.safetensors.index.json`` (``weight_map``).
No torch: dtypes map to NumPy / ``ml_dtypes`` (bfloat16).
"""

from __future__ import annotations

import json
import pathlib
import struct

import ml_dtypes
import numpy as np

DTYPES = {
  "F64": np.dtype(np.float64),
  "F32": np.dtype(np.float32),
  "F16": np.dtype(np.float16),
  "BF16": np.dtype(ml_dtypes.bfloat16),
  "I64": np.dtype(np.int64),
  "I32": np.dtype(np.int32),
  "I16": np.dtype(np.int16),
  "I8": np.dtype(np.int8),
  "U8": np.dtype(np.uint8),
  "BOOL": np.dtype(np.bool_),
}
CODES = {v: k for k, v in DTYPES.items()}
SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"


def read_header(file: pathlib.Path) -> tuple[dict, int]:
  """(header without ``__metadata__``, byte offset where tensor data begins)."""
  with open(file, "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(n))
  header.pop("__metadata__", None)
  return header, 8 + n


class CheckpointReader:
  """Name → (file, dtype, shape) over a single file or a sharded index; ``read`` loads one
  tensor, ``read_slice`` one slice of it."""

  def __init__(self, directory: str | pathlib.Path, files: tuple[str, ...] = ()):
    """``files``: read these files of ``directory`` (e.g. a PEFT adapter's), not a checkpoint's."""
    directory = pathlib.Path(directory)
    if files:
      missing = [f for f in files if not (directory / f).exists()]
      if missing:
        raise FileNotFoundError(f"no {', '.join(missing)} in {directory}")
    elif (directory / INDEX).exists():
      files = sorted(set(json.loads((directory / INDEX).read_text())["weight_map"].values()))
    elif (directory / SINGLE).exists():
      files = [SINGLE]
    else:
      raise FileNotFoundError(f"no {SINGLE} or {INDEX} in {directory}")
    self.entries: dict[str, tuple[pathlib.Path, dict, int]] = {}
    for name in files:
      header, start = read_header(directory / name)
      for tensor, info in header.items():
        self.entries[tensor] = (directory / name, info, start)

  def __contains__(self, name: str) -> bool:
    return name in self.entries

  def shape(self, name: str) -> tuple[int, ...]:
    return tuple(self.entries[name][1]["shape"])

  def read(self, name: str) -> np.ndarray:
    file, info, start = self.entries[name]
    begin, end = info["data_offsets"]
    out = np.empty(end - begin, np.uint8)
    with open(file, "rb") as f:
      f.seek(start + begin)
      if f.readinto(memoryview(out)) != end - begin:
        raise OSError(f"tensor '{name}' is truncated in {file}")
    return out.view(DTYPES[info["dtype"]]).reshape(info["shape"])

  def read_slice(self, name: str, index: tuple[slice, ...]) -> np.ndarray:
    """``read(name)[index]`` (``index`` as ``jax.make_array_from_callback`` passes it) without
    reading the tensor: its byte range is memory-mapped and only the slice is copied out, so
    the pages read are the slice's rows (axis 0) or strided runs of them (later axes)."""
    file, info, start = self.entries[name]
    begin, end = info["data_offsets"]
    dtype, shape = DTYPES[info["dtype"]], tuple(info["shape"])
    if end == begin:  # nothing to map: an empty tensor
      return np.empty(shape, dtype)[index]
    if file.stat().st_size < start + end:
      raise OSError(f"tensor '{name}' is truncated in {file}")
    data = np.memmap(file, np.uint8, mode="r", offset=start + begin, shape=(end - begin,))
    return np.array(data.view(dtype).reshape(shape)[index])  # a private copy: the map closes


def write_file(file: pathlib.Path, specs: dict, fetch) -> int:
  """One safetensors file of tensors ``specs`` (name → (shape, dtype)), ``fetch(name)`` called
  for each one's host array just before it is written; returns the bytes of tensor data."""
  header, offset = {"__metadata__": {"format": "pt"}}, 0
  for name, (shape, dtype) in specs.items():
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    header[name] = {
      "dtype": CODES[np.dtype(dtype)],
      "shape": list(shape),
      "data_offsets": [offset, offset + nbytes],
    }
    offset += nbytes
  blob = json.dumps(header, separators=(",", ":")).encode()
  blob += b" " * (-len(blob) % 8)  # 8-byte alignment of the data, as the reference writer does
  with open(file, "wb") as f:
    f.write(struct.pack("<Q", len(blob)) + blob)
    for name, (shape, dtype) in specs.items():
      array = np.ascontiguousarray(fetch(name), dtype=dtype)
      if array.shape != tuple(shape):
        raise ValueError(f"tensor '{name}' has shape {array.shape}, declared {tuple(shape)}")
      f.write(array.reshape(-1).view(np.uint8).data)
  return offset


def write_checkpoint(
  directory: str | pathlib.Path,
  specs: dict[str, tuple[tuple[int, ...], np.dtype]],
  fetch,
  max_shard_bytes: int = 5 * 2**30,
) -> list[str]:
  """Writes tensors ``specs`` (name → (shape, dtype)), in order, calling ``fetch(name)`` for each
  one's host array just before writing it. Files over ``max_shard_bytes`` are split into
  ``model-0000i-of-0000n.safetensors`` plus an index; returns the file names."""
  directory = pathlib.Path(directory)
  directory.mkdir(parents=True, exist_ok=True)
  shards, size = [[]], 0
  for name, (shape, dtype) in specs.items():
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    if shards[-1] and size + nbytes > max_shard_bytes:
      shards.append([])
      size = 0
    shards[-1].append(name)
    size += nbytes
  n = len(shards)
  names = [SINGLE] if n == 1 else [f"model-{i + 1:05d}-of-{n:05d}.safetensors" for i in range(n)]
  weight_map, total = {}, 0
  for file, tensors in zip(names, shards):
    total += write_file(directory / file, {name: specs[name] for name in tensors}, fetch)
    weight_map.update(dict.fromkeys(tensors, file))
  if n == 1 and (directory / INDEX).exists():
    (directory / INDEX).unlink()  # a stale index would shadow the single file
  if n > 1:
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / INDEX).write_text(json.dumps(index, indent=2) + "\n")
  return names
