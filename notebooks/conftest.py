"""Notebooks run under pytest (nbmake) on a headless machine: matplotlib draws to memory."""

import os

# The kernel inherits this, so figures render without a display or the inline backend's front end.
os.environ.setdefault("MPLBACKEND", "Agg")
