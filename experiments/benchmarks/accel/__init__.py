"""The sections of ``experiments.benchmarks.accelerator``: the device's shapes and ceilings
(``device``), transformers ``generate`` (``generate``), the update (``update``) and the RL loop
on-policy against one step off (``overlap``)."""
