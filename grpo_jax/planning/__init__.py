"""Planning a run before it starts: the memory and step-time estimate of a config on a mesh
(``memory``) and the ``--dry_run`` report built on it (``dry_run``)."""
