"""The example controllers on a cluster: run as a service account with the rules of examples/deploy/rbac.yaml,
each warns about a crash-looping pod with one event counted up with every restart, and stops on SIGTERM.

On a real cluster the pod really crash-loops (busybox exiting 1; the kubelet's back-off makes the second
restart come 10-20 s after the first); on the fake, the test writes the pod status the kubelet would.
tests/test_examples.py goes into the details against the fake.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes.client as k8s
import pytest

from e2e_support import REQUEST_TIMEOUT, FakeServer, Server, list_events, service_account_token, unique_name
from cluster_support import COMPONENT, EXAMPLES, REASON, Example, crashing_pod, message, role_rules, wait_for

WAIT = 180  # seconds: a real kubelet's back-off before the second restart, and pulling the image first


def kubeconfig_of(server: Server, token: str, path: Path) -> str:
    """A kubeconfig of ``server`` that authenticates with ``token`` alone."""
    cfg = server.configuration()
    cluster: dict[str, Any] = {"server": cfg.host}
    if cfg.ssl_ca_cert:
        cluster["certificate-authority"] = cfg.ssl_ca_cert
    if not cfg.verify_ssl:
        cluster["insecure-skip-tls-verify"] = True
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
        "clusters": [{"name": "e2e", "cluster": cluster}], "users": [{"name": "e2e", "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e"}}],
    }))
    return str(path)


@pytest.fixture
def controller_kubeconfig(server: Server, tmp_path: Path) -> Iterator[str]:
    """The kubeconfig of a new service account bound to the ClusterRole of rbac.yaml (a ClusterRole and a
    ClusterRoleBinding of a unique name on a real cluster, deleted afterwards)."""
    with server.api_client() as admin:
        user, token = service_account_token(admin, server.namespace)
        account = user.rsplit(":", 1)[1]
        if isinstance(server, FakeServer):
            server.fake.grant(user, role_rules())
            yield kubeconfig_of(server, token, tmp_path / "kubeconfig")
            return
        rbac = k8s.RbacAuthorizationV1Api(admin)
        name = unique_name(COMPONENT)
        rbac.create_cluster_role({"metadata": {"name": name}, "rules": role_rules()}, _request_timeout=REQUEST_TIMEOUT)
        try:
            rbac.create_cluster_role_binding(
                {"metadata": {"name": name},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                 "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": server.namespace}]},
                _request_timeout=REQUEST_TIMEOUT)
            try:
                yield kubeconfig_of(server, token, tmp_path / "kubeconfig")
            finally:
                rbac.delete_cluster_role_binding(name, _request_timeout=REQUEST_TIMEOUT)
        finally:
            rbac.delete_cluster_role(name, _request_timeout=REQUEST_TIMEOUT)


def warnings_about(server: Server, pod: str) -> list[dict[str, Any]]:
    with server.api_client() as client:
        return [e for e in list_events(client, server.namespace)
                if e["involvedObject"]["name"] == pod and e["reason"] == REASON]


@pytest.mark.parametrize("which", list(EXAMPLES))
def test_the_example_warns_about_a_crash_loop(server: Server, controller_kubeconfig: str, which: str) -> None:
    ns = server.namespace
    example = Example(which, controller_kubeconfig, "--namespace", ns)
    try:
        example.wait_for("watching pods in", timeout=WAIT)
        fake = server.fake if isinstance(server, FakeServer) else None
        if fake is not None:
            wait_for("the pod watch", lambda: fake.pods.watch.watches >= 1, WAIT, lambda: example.output)
        with server.api_client() as admin:
            pod = json.loads(k8s.CoreV1Api(admin).create_namespaced_pod(
                ns, crashing_pod("crashy"), _preload_content=False, _request_timeout=REQUEST_TIMEOUT).data)
        for restarts in (1, 2):
            if fake is not None:  # the kubelet's part, one restart after the other
                fake.pods.crash_loop(ns, "crashy", restarts)
            wait_for(f"restart {restarts} warned about",
                     lambda n=restarts: [e.get("count", 1) >= n for e in warnings_about(server, "crashy")] == [True],
                     WAIT, lambda: example.output)
        example.terminate()
        assert example.wait() == 0, example.output
    finally:
        example.kill()
    [event] = warnings_about(server, "crashy")
    ref = event["involvedObject"]
    assert (ref["kind"], ref["namespace"], ref["name"], ref["uid"], ref["fieldPath"]) == \
        ("Pod", ns, "crashy", pod["metadata"]["uid"], "spec.containers{app}")
    assert (event["type"], event["message"], event["source"]["component"]) == ("Warning", message(), COMPONENT)
    assert "stopped: events written: 1 created" in example.output and " 0 abandoned" in example.output
