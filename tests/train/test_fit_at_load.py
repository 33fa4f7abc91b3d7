"""The update compiled at load (``grpo_jax.train.fit``, ``autofit``): a run whose update does not
fit its devices stops before any rollout or checkpoint, naming the program and both byte counts;
the loop runs the executable compiled there (one compile of the full-width update in a 2-step
run); ``auto`` keeps the old defaults where they fit and halves the micro-batch where they do
not."""

import logging
import os
import pathlib
import types

import jax
import numpy as np
import pytest

from grpo_jax.config import files as config_file
from grpo_jax.train import autofit, fit, modes
from grpo_jax.train import run as run_lib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _tiny(load_cfg, *overrides):
  return load_cfg(("loss.length_buckets=0", *overrides))


def test_a_run_that_does_not_fit_stops_at_load(tmp_path, load_cfg, monkeypatch):
  monkeypatch.setattr(fit, "device_budget", lambda mesh, fraction=fit.FIT_FRACTION: 1000.0)
  cfg = _tiny(load_cfg, "loss.micro_batch_size=0", "eval.before=True")
  with pytest.raises(fit.DoesNotFit) as err:
    modes.train(cfg, tmp_path, log=lambda *_: None)
  message = str(err.value)
  assert "program 'update' needs " in message
  needs = int(message.split(" needs ")[1].split(" bytes")[0].replace(",", ""))
  assert needs > 1000
  assert "than the 1,000 bytes" in message and "cpu device" in message
  assert not list((tmp_path / "checkpoints").glob("*")), "stopped before the first checkpoint"
  assert not (tmp_path / "metrics.jsonl").exists() and not (tmp_path / "eval").exists()


def test_the_update_compiles_once_in_a_two_step_run(tmp_path, load_cfg, caplog):
  cfg = _tiny(load_cfg, "eval.before=False", "eval.after=False")
  with jax.log_compiles(), caplog.at_level(logging.WARNING, logger="jax"):
    modes.train(cfg, tmp_path, log=lambda *_: None)
  updates = [r for r in caplog.records if "compilation of jit(update)" in r.getMessage()]
  assert len(updates) == 1, [r.getMessage() for r in updates]


def _fit(cfg, log=lambda *_: None):
  s = run_lib.setup(cfg, log=log)
  e, _, fitted = run_lib.fit_update(cfg, s, log)
  (f,) = fitted.values()
  return e, f


def test_auto_picks_the_old_defaults_where_they_fit(load_cfg, monkeypatch):
  cfg = _tiny(load_cfg, "model.remat=none")  # micro-batch and vocabulary chunk: auto
  e, full = _fit(cfg)
  assert (e.loss.micro_batch_size, e.model.logps_vocab_chunk) == (0, 0)
  assert e.cfg.loss.micro_batch_size == "auto"  # config.json keeps what was asked for
  # A budget just under the one-micro-batch update's bytes: the minibatch's 32 rows halved.
  budget = full.bytes - 1
  monkeypatch.setattr(fit, "device_budget", lambda mesh, fraction=fit.FIT_FRACTION: budget)
  logs = []
  e, half = _fit(cfg, logs.append)
  assert (e.loss.micro_batch_size, e.model.logps_vocab_chunk) == (16, 0)
  assert half.bytes <= budget < full.bytes
  assert any("auto: loss.micro_batch_size = 16" in x for x in logs), logs


def test_auto_remat_rebuilds_the_graphdef_where_none_does_not_fit(load_cfg, monkeypatch):
  cfg = _tiny(load_cfg, "loss.micro_batch_size=0", "model.remat=auto")
  s = run_lib.setup(cfg)
  assert s.graphdef == autofit.with_remat(s.graphdef, s.params, "none")  # built as none
  e, s_none, fitted = run_lib.fit_update(cfg, s)
  assert e.model.remat == "none" and s_none.graphdef == s.graphdef
  budget = fitted[12].bytes - 1
  monkeypatch.setattr(fit, "device_budget", lambda mesh, fraction=fit.FIT_FRACTION: budget)
  e, s_full, fitted = run_lib.fit_update(cfg, s)
  assert e.model.remat == "full" and fitted[12].bytes <= budget
  assert s_full.graphdef == autofit.with_remat(s.graphdef, s.params, "full") != s.graphdef


def test_auto_runs_out_of_candidates(load_cfg, monkeypatch):
  monkeypatch.setattr(fit, "device_budget", lambda mesh, fraction=fit.FIT_FRACTION: 1000.0)
  cfg = _tiny(load_cfg, "model.remat=none")
  with pytest.raises(fit.DoesNotFit, match=r"tried 6 settings of the auto keys"):
    _fit(cfg)


def test_micro_batch_candidates(load_cfg):
  cfg = _tiny(load_cfg)  # B·G = 32 rows
  assert autofit.micro_candidates(cfg) == [0, 16, 8, 4, 2, 1]
  cfg = _tiny(load_cfg, "sampling.group_size=3", "loss.num_minibatches=2")  # 12 rows a minibatch
  assert autofit.micro_candidates(cfg) == [0, 6, 3]
  assert autofit.vocab_candidates(151_936) == [0, autofit.VOCAB_CHUNK]
  assert autofit.vocab_candidates(1_000) == [0]


@pytest.mark.parametrize(
  "config, old",
  [("tiny_test.py", (0, 0, "none")), ("quickstart.py", (64, 0, "none"))],  # quickstart: 64 rows
)
def test_auto_by_default_resolves_to_the_old_values(config, old):
  cfg = config_file.load(str(ROOT / "configs" / config))
  m = cfg.model
  assert (m.logps_vocab_chunk, m.remat) == ("auto", "auto")  # the defaults
  e, _ = _fit(cfg)
  assert (e.loss.micro_batch_size, e.model.logps_vocab_chunk, e.model.remat) == old


class _Device:
  platform, device_kind, process_index = "gpu", "fake", 0

  def __init__(self, stats):
    self.stats = stats

  def memory_stats(self):
    return self.stats


class _Mesh:
  def __init__(self, device):
    self.devices = np.array([device], dtype=object)


def test_device_budget_reads_the_device_limit_else_the_host_ram():
  gpu = _Mesh(_Device({"bytes_limit": 80 * 2**30}))
  assert fit.device_budget(gpu) == pytest.approx(0.9 * 80 * 2**30)
  cpu = _Mesh(_Device(None))
  ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  assert fit.device_budget(cpu) == pytest.approx(0.9 * ram / jax.local_device_count())


def test_an_external_engines_host_memory_leaves_a_cpu_budget(load_cfg, monkeypatch):
  """vLLM on the host (``sampling.engine``) holds RAM the CPU devices' budget would count:
  its measured bytes come off the budget there, and off no device with memory of its own."""
  cpu, gpu = _Mesh(_Device(None)), _Mesh(_Device({"bytes_limit": 80 * 2**30}))
  assert fit.host_share(cpu, 6e9) == pytest.approx(6e9 / jax.local_device_count())
  assert fit.host_share(gpu, 6e9) == 0.0
  cfg = _tiny(load_cfg, "model.remat=none")
  _, full = _fit(cfg)
  budget = full.bytes + 1000  # the one-micro-batch update fits the budget alone
  monkeypatch.setattr(fit, "device_budget", lambda mesh, fraction=fit.FIT_FRACTION: budget)
  engine = types.SimpleNamespace(host_bytes=lambda: 2000 * jax.local_device_count())
  monkeypatch.setattr(run_lib.engine_lib, "build_engine", lambda cfg: engine)
  logs = []
  e, half = _fit(cfg, logs.append)
  assert e.loss.micro_batch_size == 16 and half.bytes <= budget - 2000
  assert any("micro_batch_size = 0" in x and "does not fit" in x for x in logs), logs
