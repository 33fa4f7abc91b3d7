"""The run directory on any file system: the bottom layer every package that reads or writes a
run's files imports.

  names.py   every file name, one name per file
  paths.py   paths and whole-file / appending writes on any epath (local, Cloud Storage)
  read.py    one reader per file
  write.py   the writers of the JSON files and of the per-step line files
  tables.py  the one Markdown table formatter
"""
