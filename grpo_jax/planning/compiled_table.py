"""One Markdown table of several ``--mode=compile`` reports (``<workdir>/plan/compiled.json``,
``grpo_jax.planning.compiled.Report.to_dict``), one row per report: the target and mesh, the
per-chip resident state and step peak against HBM, whether it fits, the update's and the rollout
sampler's compile seconds, the update's FLOPs against the model's, the step's roofline and its
time at the MFU the report was written with, the sampled tokens per second per chip at that MFU,
and the weight gathers in the decode loops."""

from __future__ import annotations

from grpo_jax.rundir import read, tables

HEAD = [
  "config", "target", "mesh", "state GiB", "peak GiB", "HBM GiB", "fits", "update compile s",
  "sampler compile s", "update FLOPs / model", "roofline step s", "step s at MFU",
  "sampled tok/s/chip", "decode weight gathers",
]  # fmt: skip


def _gib(b: float) -> str:
  return f"{b / 2**30:.1f}"


def row(report: dict) -> list[str]:
  """The cells of one report (a ``compiled.json``'s value)."""
  update = next(p for p in report["programs"] if p["name"] == "update")
  samplers = [p for p in report["programs"] if p["name"].startswith("sample")]
  mfu = report["mfu"]
  return [
    report["config"],
    report["hardware"]["name"],
    "×".join(str(v) for v in report["mesh"].values()),
    _gib(report["state_bytes"]),
    _gib(report["peak_bytes"]),
    _gib(report["hardware"]["hbm_bytes"]),
    "yes" if report["fits"] else "**no**",
    f"{update['compile_s']:.0f}",
    " + ".join(f"{p['compile_s']:.0f}" for p in samplers) or "–",
    f"{update['flops_ratio']:.2f}",
    f"{report['step_roofline_s']:.0f}",
    f"{report[f'step_s_at_mfu_{mfu}']:.0f}",
    f"{report[f'sampled_tokens_per_s_per_chip_at_mfu_{mfu}']:,.0f}",
    str(report["decode"].get("weight_gathers_in_loops", "–")),
  ]


def table(reports: list[dict]) -> str:
  """The Markdown table of ``reports``, in the order given."""
  return tables.markdown(HEAD, [row(r) for r in reports])


def table_of_files(files: list) -> str:
  """:func:`table` of the ``compiled.json`` files at ``files`` (paths or URIs)."""
  reports = [read.json_file(f) for f in files]
  missing = [str(f) for f, r in zip(files, reports) if r is None]
  if missing:
    raise FileNotFoundError(f"no compile report at {', '.join(missing)}")
  return table(reports)


__all__ = ["HEAD", "row", "table", "table_of_files"]
