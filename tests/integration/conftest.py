"""Integration tests: against the real cluster ``KUBEVENTS_E2E_KUBECONFIG`` points at (marked ``apiserver``,
skipped with instructions when it is unset), and the same tests against the local fake, which CI runs.

Fixtures for any test here:

* ``kubeconfig``: the path in ``KUBEVENTS_E2E_KUBECONFIG``; skips the test when it is unset.
* ``namespace``: a fresh namespace ``kubevents-e2e-<random>`` on that cluster, deleted after the test.
* ``server``: parametrized over ``fake`` (a ``FakeCluster`` on a local port) and ``real`` (the cluster, marked
  ``apiserver``), with ``server.namespace`` a fresh namespace on it made and deleted the same way.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pytest_httpserver import HTTPServer

from e2e_support import FakeServer, RealServer, Server, fresh_namespace
from fake_apiserver import FakeCluster

KUBECONFIG_ENV = "KUBEVENTS_E2E_KUBECONFIG"
HOW_TO_RUN = (
    f"set {KUBECONFIG_ENV} to the kubeconfig of a disposable cluster to run this against a real API server, e.g. "
    "`kind create cluster --name kubevents-e2e && kind get kubeconfig --name kubevents-e2e > /tmp/kubevents-e2e.yaml"
    f" && {KUBECONFIG_ENV}=/tmp/kubevents-e2e.yaml pytest -m apiserver tests/integration` (docs/guides/integration.md)"
)


@pytest.fixture(scope="session")
def kubeconfig() -> str:
    path = os.environ.get(KUBECONFIG_ENV)
    if not path:
        pytest.skip(HOW_TO_RUN)
    if not os.path.isfile(path):
        pytest.fail(f"{KUBECONFIG_ENV}={path!r} is not a file")
    return path


@pytest.fixture
def namespace(kubeconfig: str) -> Iterator[str]:
    with RealServer(kubeconfig).api_client() as client, fresh_namespace(client) as name:
        yield name


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.apiserver)])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    if request.param == "real":
        real = RealServer(request.getfixturevalue("kubeconfig"))
        real.namespace = request.getfixturevalue("namespace")
        yield real
        return
    # Threaded: a watch holds its request open while others are answered.
    http = HTTPServer(threaded=True)
    http.start()
    cluster = FakeCluster(http)
    try:
        fake = FakeServer(cluster)
        with fake.api_client() as client, fresh_namespace(client) as name:
            fake.namespace = name
            yield fake
    finally:
        cluster.close()
        http.clear()
        http.stop()
