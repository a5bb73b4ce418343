"""Integration tests against the real cluster ``KUBEVENTS_E2E_KUBECONFIG`` points at (marked ``apiserver``;
skipped with instructions when it is unset).

* ``kubeconfig``: the path in ``KUBEVENTS_E2E_KUBECONFIG``; skips the test when it is unset.
* ``namespace``: a fresh namespace ``kubevents-e2e-<random>`` on that cluster, deleted after the test.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest

KUBECONFIG_ENV = "KUBEVENTS_E2E_KUBECONFIG"
HOW_TO_RUN = (
    f"set {KUBECONFIG_ENV} to the kubeconfig of a disposable cluster to run this against a real API server, e.g. "
    "`kind create cluster --name kubevents-e2e && kind get kubeconfig --name kubevents-e2e > /tmp/kubevents-e2e.yaml"
    f" && {KUBECONFIG_ENV}=/tmp/kubevents-e2e.yaml pytest -m apiserver tests/integration`"
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
    import kubernetes

    with kubernetes.config.new_client_from_config(config_file=kubeconfig) as client:
        api = kubernetes.client.CoreV1Api(client)
        name = f"kubevents-e2e-{secrets.token_hex(4)}"
        api.create_namespace({"metadata": {"name": name}}, _request_timeout=30)
        try:
            yield name
        finally:
            api.delete_namespace(name, _request_timeout=30)
