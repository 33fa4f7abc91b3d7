"""The machine-speed line the suite prints beside its time (``machine_speed.py``)."""

import pathlib

import machine_speed
import pytest


def test_cpu_times_reads_steal_and_the_total_of_the_cpu_line():
  # user nice system idle iowait irq softirq steal guest guest_nice (guest is inside user)
  stat = "cpu  100 5 20 800 10 0 3 60 40 0\ncpu0 50 2 10 400 5 0 1 30 20 0\n"
  assert machine_speed.cpu_times(stat) == (60, 100 + 5 + 20 + 800 + 10 + 0 + 3 + 60)
  assert machine_speed.cpu_times("cpu  1 2 3 4\n") == (0, 10)  # an old kernel: no steal column
  assert machine_speed.cpu_times("") == (0, 0)


def test_the_speed_is_the_fastest_matmul_s_rate(monkeypatch):
  # Three timed matmuls of 0.5 s, 0.25 s and 0.4 s: the fastest, 2·n³ flops in 0.25 s.
  clock = iter([0.0, 0.5, 1.0, 1.25, 2.0, 2.4])
  monkeypatch.setattr(machine_speed.time, "perf_counter", lambda: next(clock))
  assert machine_speed.matmul_gflops(64, repeats=3) == 2 * 64**3 / 0.25 / 1e9


def test_the_python_rate_is_iterations_over_the_fastest_loop(monkeypatch):
  clock = iter([0.0, 0.2, 1.0, 1.1])  # loops of 0.2 s and 0.1 s
  monkeypatch.setattr(machine_speed.time, "perf_counter", lambda: next(clock))
  assert machine_speed.python_rate(1000, repeats=2) == pytest.approx(1000 / 0.1 / 1e6)


@pytest.mark.skipif(not pathlib.Path("/proc/stat").exists(), reason="no /proc/stat (not Linux)")
def test_the_live_counters_advance():
  steal, total = machine_speed.cpu_times()
  assert machine_speed.matmul_gflops(256, 3) > 0
  steal_after, total_after = machine_speed.cpu_times()
  assert total_after >= total > 0 and 0 <= steal <= steal_after <= total_after
