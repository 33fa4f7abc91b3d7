"""Planning a run before it starts: the memory and step-time estimate of a config on a mesh
(``memory``) and the ``--dry_run`` report built on it (``dry_run``); the step compiled for a
slice without its chips (``compiled`` over ``programs``, ``hlo`` and ``topology``) and the table
of several such reports (``compiled_table``)."""
