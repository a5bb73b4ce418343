"""Shared pytest set-up."""

import os

from hypothesis import settings

# CI explores a fixed set of examples so a run is reproducible; local runs keep drawing new ones.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")
