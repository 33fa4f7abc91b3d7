"""The run directory on any file system: the bottom layer every package that reads or writes a
run's files imports.

  names.py   every file name, one name per file
  paths.py   paths (those of templated names too) and whole-file / appending writes on any
             epath (local, Cloud Storage)
  read.py    one reader per file
  write.py   one writer per file, from plain data: the loop's, the evaluation's, the
             strategy's, the sweeps' and the compiled plan's
  tables.py  the one Markdown table formatter
"""
