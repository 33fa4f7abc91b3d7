"""The suite's machinery is ``tests/plugin.py``: registered here, in the root conftest, so that it
loads before any test module imports JAX."""

pytest_plugins = ("tests.plugin",)
