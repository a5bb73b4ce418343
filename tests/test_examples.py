"""The example controllers (examples/crashloop_controller.py and its asyncio twin) against the fake API server:
a crash-looping pod gets one Warning event counted up with each restart, and SIGTERM stops the controller
after the final flush. And their manifests (examples/deploy/)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

k8s = pytest.importorskip("kubernetes.client")
pytest.importorskip("kubernetes_asyncio")

from cluster_support import (  # noqa: E402
    COMPONENT,
    DEPLOY,
    EXAMPLES,
    REASON,
    Example,
    fake_cluster,
    manifests,
    message,
    role_rules,
    wait_for,
)
from fake_apiserver import FakeCluster  # noqa: E402

SHUTDOWN_TIMEOUT = 10  # the examples' SHUTDOWN_TIMEOUT


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with fake_cluster("demo", COMPONENT) as fake:
        yield fake


def create_pod(cluster: FakeCluster, namespace: str, name: str) -> dict[str, Any]:
    with cluster.api_client() as client:
        answer = k8s.CoreV1Api(client).create_namespaced_pod(
            namespace, {"metadata": {"name": name}, "spec": {"containers": [{"name": "app", "image": "busybox"}]}},
            _preload_content=False)
    return json.loads(answer.data)


def warnings_about(cluster: FakeCluster, name: str) -> list[dict[str, Any]]:
    return [e for e in cluster.core_v1.events.values() if e["involvedObject"]["name"] == name]


def counted(cluster: FakeCluster, name: str, count: int) -> Callable[[], bool]:
    return lambda: [e.get("count") for e in warnings_about(cluster, name)] == [count]


def service_account_kubeconfig(cluster: FakeCluster, path: Path, rules: list[dict[str, Any]]) -> str:
    """A kubeconfig of a new service account in the controller's namespace, bound to ``rules`` everywhere."""
    with cluster.api_client() as admin:
        core = k8s.CoreV1Api(admin)
        core.create_namespaced_service_account(COMPONENT, {"metadata": {"name": COMPONENT}})
        token = json.loads(core.create_namespaced_service_account_token(
            COMPONENT, COMPONENT, {"spec": {}}, _preload_content=False).data)["status"]["token"]
    cluster.grant(f"system:serviceaccount:{COMPONENT}:{COMPONENT}", rules)
    return cluster.kubeconfig(str(path), token)


@pytest.mark.parametrize("namespace", ["demo", None], ids=["--namespace", "every-namespace"])
@pytest.mark.parametrize("which", list(EXAMPLES))
def test_a_crash_loop_is_one_warning_counted_up_and_sigterm_flushes(cluster: FakeCluster, tmp_path: Path,
                                                                     which: str, namespace: str | None) -> None:
    # As the service account of examples/deploy/rbac.yaml: its rules are enough.
    kubeconfig = service_account_kubeconfig(cluster, tmp_path / "kubeconfig", role_rules())
    example = Example(which, kubeconfig, *(["--namespace", namespace] if namespace else []))
    try:
        example.wait_for("watching pods in")
        wait_for("the pod watch", lambda: cluster.pods.watch.watches >= 1)
        pod = create_pod(cluster, "demo", "crashy")
        create_pod(cluster, "demo", "healthy")
        create_pod(cluster, "default", "elsewhere")
        cluster.pods.crash_loop("default", "elsewhere", 1)

        first = cluster.pods.crash_loop("demo", "crashy", 1)
        wait_for("the first warning", counted(cluster, "crashy", 1))
        [event] = warnings_about(cluster, "crashy")
        assert event["involvedObject"] == {
            "kind": "Pod", "namespace": "demo", "name": "crashy", "uid": pod["metadata"]["uid"], "apiVersion": "v1",
            "resourceVersion": first["metadata"]["resourceVersion"], "fieldPath": "spec.containers{app}"}
        assert (event["type"], event["reason"], event["message"]) == ("Warning", REASON, message())
        assert event["source"] == {"component": COMPONENT} and event["metadata"]["namespace"] == "demo"

        cluster.pods.crash_loop("demo", "crashy", 1)  # the same restart, written again: no second warning
        for restarts in (2, 3):
            cluster.pods.crash_loop("demo", "crashy", restarts)
        wait_for("the repeats", counted(cluster, "crashy", 3))

        # The next warning is queued when SIGTERM comes: the controller stops and writes it first.
        cluster.core_v1.close_gate()
        cluster.pods.crash_loop("demo", "crashy", 4)
        wait_for("the write to be held", lambda: cluster.core_v1.held == 1)
        example.terminate()
        example.wait_for("SIGTERM" if which == "sync" else "stopping")
        cluster.core_v1.open_gate()
        assert example.wait() == 0, example.output
    finally:
        cluster.core_v1.open_gate()
        example.kill()
    assert counted(cluster, "crashy", 4)()
    elsewhere = [e.get("count") for e in warnings_about(cluster, "elsewhere")]
    assert elsewhere == ([] if namespace else [1])
    created = 1 + len(elsewhere)
    assert f"stopped: events written: {created} created, 3 patched; 0 skipped by the spam filter, 0 abandoned" \
        in example.output
    assert "Traceback" not in example.output


def test_without_the_patch_right_repeats_are_refused(cluster: FakeCluster, tmp_path: Path) -> None:
    """The rules are needed too: without patch on events the first warning is written and the repeats are
    refused (403), counted and logged."""
    rules = [dict(r, verbs=[v for v in r["verbs"] if v != "patch"]) for r in role_rules()]
    kubeconfig = service_account_kubeconfig(cluster, tmp_path / "kubeconfig", rules)
    example = Example("sync", kubeconfig, "--namespace", "demo")
    try:
        example.wait_for("watching pods in")
        wait_for("the pod watch", lambda: cluster.pods.watch.watches >= 1)
        create_pod(cluster, "demo", "crashy")
        cluster.pods.crash_loop("demo", "crashy", 1)
        wait_for("the first warning", counted(cluster, "crashy", 1))
        cluster.pods.crash_loop("demo", "crashy", 2)
        example.wait_for('cannot patch resource "events"')
        example.terminate()
        assert example.wait() == 0
    finally:
        example.kill()
    assert "events written: 1 created, 0 patched; 0 skipped by the spam filter, 1 abandoned" in example.output


# --- The manifests ----------------------------------------------------------------------------------------------

def test_the_manifests_hold_what_the_controller_needs() -> None:
    documents = {name: manifests(name) for name in ("namespace.yaml", "rbac.yaml", "deployment.yaml")}
    kinds = [d["kind"] for docs in documents.values() for d in docs]
    assert sorted(kinds) == ["ClusterRole", "ClusterRoleBinding", "Deployment", "Namespace", "ServiceAccount"]
    by_kind = {d["kind"]: d for docs in documents.values() for d in docs}
    namespace = by_kind["Namespace"]["metadata"]["name"]

    role = by_kind["ClusterRole"]
    assert role["apiVersion"] == "rbac.authorization.k8s.io/v1"
    grants = {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
              for resource in rule["resources"] for verb in rule["verbs"]}
    # Pods are read; events are written through either API, never read.
    assert grants == {("", "pods", "get"), ("", "pods", "list"), ("", "pods", "watch"),
                      ("", "events", "create"), ("", "events", "patch"),
                      ("events.k8s.io", "events", "create"), ("events.k8s.io", "events", "patch")}

    account = by_kind["ServiceAccount"]
    binding = by_kind["ClusterRoleBinding"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": account["metadata"]["namespace"]}]

    deployment = by_kind["Deployment"]
    assert deployment["apiVersion"] == "apps/v1"
    assert deployment["metadata"]["namespace"] == account["metadata"]["namespace"] == namespace
    spec = deployment["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]
    assert spec["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert pod["spec"]["serviceAccountName"] == account["metadata"]["name"]
    assert pod["spec"]["terminationGracePeriodSeconds"] > SHUTDOWN_TIMEOUT
    [container] = pod["spec"]["containers"]
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert f"-t {container['image']} ." in dockerfile
    assert f"kind load docker-image {container['image']}" in dockerfile


def test_the_examples_and_the_manifests_agree() -> None:
    for path in EXAMPLES.values():
        source = path.read_text()
        assert f'COMPONENT = "{COMPONENT}"' in source
        assert f"SHUTDOWN_TIMEOUT = {SHUTDOWN_TIMEOUT} " in source
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    copied = re.search(r"^COPY (examples/\S+) (\S+)$", dockerfile, re.M)
    assert copied is not None and (DEPLOY.parents[1] / copied[1]) == EXAMPLES["sync"]
    assert f'ENTRYPOINT ["python", "{copied[2]}"]' in dockerfile
    [kustomization] = manifests("kustomization.yaml")
    assert kustomization["kind"] == "Kustomization"
    assert kustomization["resources"] == ["namespace.yaml", "rbac.yaml", "deployment.yaml"]
    assert sorted(p.name for p in DEPLOY.glob("*.yaml")) == sorted([*kustomization["resources"], "kustomization.yaml"])
