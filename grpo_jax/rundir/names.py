"""File names of a sweep's run directories, read by the sweep, its Ray launcher and the
aggregation alike."""

RESULTS = "results.json"  # a finished run's summary
ERROR = "error.txt"  # a failed run's traceback
RUN_INFO = "sweep_run.json"  # one run's name, overrides and status
SWEEP_INFO = "sweep.json"  # the sweep's summary at its root
LOG = "log.txt"  # one run's console log

__all__ = ["ERROR", "LOG", "RESULTS", "RUN_INFO", "SWEEP_INFO"]
