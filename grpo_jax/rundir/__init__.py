"""The run directory on any file system (``paths``): the bottom layer every package that reads
or writes a run's files imports."""
