"""A pytest plugin for ``stress_compile.py --preload``: imports ``$STRESS_PRELOAD`` into every
worker before any test runs."""

import importlib
import os

importlib.import_module(os.environ["STRESS_PRELOAD"])
