"""Shared pytest set-up."""

import os

from hypothesis import settings

# CI explores a fixed set of examples so a run is reproducible; local runs keep drawing new ones.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

# -- recording pipeline: a local API server for the official-client sinks --

import pytest  # noqa: E402
from pytest_httpserver import HTTPServer  # noqa: E402

from fake_apiserver import FakeApiServer  # noqa: E402


@pytest.fixture
def apiserver():
    """A FakeApiServer playing the core/v1 events endpoints on a local port."""
    server = HTTPServer()
    server.start()
    try:
        yield FakeApiServer(server)
    finally:
        server.clear()
        server.stop()
