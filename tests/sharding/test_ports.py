"""The coordinator's port (``sharding/ports.py``): taken ports are seen, a drawn port lies below
the ephemeral range, and process 0 stops with an error on a taken port where jax would crash."""

import random
import socket
import subprocess
import sys

import pytest

from grpo_jax.sharding import ports


@pytest.fixture
def listener():
  """A socket listening on 127.0.0.1 (a port the kernel chose); its port."""
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    s.listen()
    yield s.getsockname()[1]


def test_a_listener_or_a_connection_takes_the_port(listener):
  assert not ports.is_free(listener)  # a listener on one address: the wildcard bind fails
  with socket.create_connection(("127.0.0.1", listener)) as client:
    local = client.getsockname()[1]  # the connection's own port, from the ephemeral range
    assert not ports.is_free(local)


def test_a_closed_port_is_free_again():
  with socket.socket() as s:
    s.bind(("0.0.0.0", 0))
    port = s.getsockname()[1]
    assert not ports.is_free(port)
  assert ports.is_free(port)


def test_the_drawn_port_is_below_the_ephemeral_range_and_skips_a_taken_one():
  first = random.Random(7).randrange(ports.LOWEST, 32768)
  with socket.socket() as s:
    s.bind(("0.0.0.0", first))  # the draw the seeded generator makes first
    s.listen()
    port = ports.coordinator_port(random.Random(7), ephemeral=(32768, 60999))
  assert port != first and ports.LOWEST <= port < 32768
  # A range that starts too low to leave room below it: any port from 1024 up.
  assert 1024 <= ports.coordinator_port(random.Random(7), ephemeral=(20500, 60999)) < 65536


def test_the_ephemeral_range_is_read_or_defaults(tmp_path):
  path = tmp_path / "ip_local_port_range"
  path.write_text("40000\t50000\n")
  assert ports.ephemeral_range(str(path)) == (40000, 50000)
  assert ports.ephemeral_range(str(tmp_path / "missing")) == ports.DEFAULT_EPHEMERAL


def test_port_of_reads_host_and_port():
  assert ports.port_of("10.0.0.1:8476") == 8476
  assert ports.port_of("[::1]:1234") == 1234
  for bad in ("10.0.0.1", ":80", "host:http"):
    with pytest.raises(ValueError, match="not host:port"):
      ports.port_of(bad)


INITIALIZE = """
import sys
from grpo_jax.sharding import distributed
distributed.initialize(f"127.0.0.1:{sys.argv[1]}", num_processes=2, process_id=0)
"""
UNCHECKED = """
import sys
import jax
jax.distributed.initialize(f"127.0.0.1:{sys.argv[1]}", num_processes=2, process_id=0)
"""


def _run(code: str, port: int) -> subprocess.CompletedProcess:
  cmd = [sys.executable, "-c", code, str(port)]
  return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_process_0_on_a_taken_port_stops_with_an_error_where_jax_crashes(listener):
  checked = _run(INITIALIZE, listener)
  assert checked.returncode == 1 and f"port {listener} is taken" in checked.stderr, checked.stderr
  # jax.distributed.initialize itself: a segmentation fault on jax 0.10.2 (return code -11).
  unchecked = _run(UNCHECKED, listener)
  assert unchecked.returncode != 0 and f"port {listener} is taken" not in unchecked.stderr
