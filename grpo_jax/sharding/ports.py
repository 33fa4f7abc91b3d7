"""The port of a multi-host job's ``jax.distributed`` coordinator.

Process 0 of a job serves the coordinator on every address of its host (``[::]:port``). When
that port is taken, jax 0.10.2 crashes process 0 with a segmentation fault inside
``jax.distributed.initialize``, after one gRPC log line ("Failed to add port to server"):

  s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
  jax.distributed.initialize(f"127.0.0.1:{s.getsockname()[1]}", num_processes=2, process_id=0)

``is_free`` lets ``distributed.initialize`` stop with an error that names the port instead.
``coordinator_port`` picks a port for a launcher that starts a job's processes itself
(``runs/ray_sweep.py``), a few seconds before process 0 binds it.
"""

from __future__ import annotations

import errno
import random
import socket

# Linux's default ``ip_local_port_range``, where the kernel takes the local ports of outgoing
# connections and of ``bind(port=0)``.
DEFAULT_EPHEMERAL = (32768, 60999)
# The lowest port ``coordinator_port`` draws: above Ray's default worker ports (10002-19999).
LOWEST = 20000


def ephemeral_range(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> tuple[int, int]:
  """The kernel's ephemeral port range (``DEFAULT_EPHEMERAL`` where it cannot be read)."""
  try:
    with open(path) as f:
      low, high = (int(x) for x in f.read().split())
  except (OSError, ValueError):
    return DEFAULT_EPHEMERAL
  return low, high


def is_free(port: int) -> bool:
  """Whether a server could listen on ``port`` on every address now.

  Binds the IPv4 wildcard, and the IPv6 one where the host has IPv6, with ``SO_REUSEADDR`` as
  gRPC's server does: a listener or a connection using the port takes it, a closed connection
  waiting out TIME_WAIT does not.
  """
  families = [(socket.AF_INET, "0.0.0.0")]
  if socket.has_ipv6:
    families.append((socket.AF_INET6, "::"))
  for family, wildcard in families:
    try:
      with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
          s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind((wildcard, port))
    except OSError as e:
      if e.errno == errno.EADDRINUSE:
        return False
      if family == socket.AF_INET6 and e.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
        continue  # IPv6 compiled in but not configured on this host
      raise
  return True


def coordinator_port(rng: random.Random | None = None, tries: int = 200, ephemeral=None) -> int:
  """A port free on every address of this host, drawn below the kernel's ephemeral range.

  A port from ``bind(port=0)`` lies in that range, where every process on the host takes the
  local ports of its outgoing connections and of its own ``bind(port=0)`` listeners (gloo's, for
  one): any of them can take it between this check and process 0's bind. Below the range only
  a listener started on that very port can. ``ephemeral``: the ephemeral range (default: the
  kernel's); where it starts too low to leave room, any port from 1024 up is drawn.
  """
  low, _ = ephemeral or ephemeral_range()
  first, end = (LOWEST, low) if low - LOWEST >= 1000 else (1024, 65536)
  rng = rng or random.Random()
  for _ in range(tries):
    port = rng.randrange(first, end)
    if is_free(port):
      return port
  raise RuntimeError(f"no free port in [{first}, {end}) after {tries} tries")


def port_of(address: str) -> int:
  """The port of ``host:port`` (``[v6 address]:port`` too)."""
  host, sep, port = address.rpartition(":")
  if not sep or not host or not port.isdigit():
    raise ValueError(f"coordinator address {address!r} is not host:port")
  return int(port)
