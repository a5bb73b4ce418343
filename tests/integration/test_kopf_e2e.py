"""kubevents.kopf on a real cluster: a kopf operator (kopf.testing.KopfRunner) whose handler warns 500 times
about one ConfigMap leaves client-go's handful of events, where kopf alone leaves 500.

The same operator runs against a local fake in tests/test_kopf.py, which CI runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

kopf = pytest.importorskip("kopf")
kubernetes = pytest.importorskip("kubernetes")

from kopf.testing import KopfRunner  # noqa: E402

import kubevents  # noqa: E402
import kubevents.kopf  # noqa: E402

pytestmark = pytest.mark.apiserver

NAME = "kubevents-demo"
WAIT = 120  # seconds; far below the 300 s after which the spam filter lets one more warning through


def wait_for(what: str, condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


@pytest.fixture
def api(kubeconfig: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("KUBECONFIG", kubeconfig)  # for kopf.login_with_kubeconfig
    with kubernetes.config.new_client_from_config(config_file=kubeconfig) as client:
        yield kubernetes.client.CoreV1Api(client)


def warnings(api: Any, namespace: str) -> list[Any]:
    selector = f"involvedObject.name={NAME},reason=ProbeFailed"
    return list(api.list_namespaced_event(namespace, field_selector=selector, _request_timeout=30).items)


def run_operator(api: Any, namespace: str, install: bool, until: Callable[[], bool]) -> list[kubevents.Broadcaster]:
    """Runs the operator (with kubevents if ``install``), makes the ConfigMap, and stops once ``until()``."""
    registry = kopf.OperatorRegistry()
    handled = threading.Event()
    installed: list[kubevents.Broadcaster] = []
    kopf.on.login(registry=registry)(kopf.login_with_kubeconfig)

    @kopf.on.startup(registry=registry)
    async def startup(settings: Any, **_: Any) -> None:
        settings.posting.level = logging.WARNING  # only the warnings make events
        if install:
            installed.append(kubevents.kopf.install(settings))

    @kopf.on.create("configmaps", registry=registry)
    async def probe(body: Any, **_: Any) -> None:
        for attempt in range(1, 501):
            kopf.warn(body, reason="ProbeFailed", message=f"probe {attempt} of 500 failed")
        handled.set()

    settings = kopf.OperatorSettings()
    try:
        with KopfRunner(["run", "--standalone", "--namespace", namespace], registry=registry, settings=settings,
                        timeout=WAIT) as runner:
            api.create_namespaced_config_map(namespace, {"metadata": {"name": NAME}}, _request_timeout=30)
            assert handled.wait(WAIT)
            wait_for("the events", until)
    finally:
        settings.execution.executor.shutdown(wait=True)  # kopf leaves it running
    assert runner.exit_code == 0, runner.output
    return installed


def test_kopf_on_kubevents_aggregates(api: Any, namespace: str) -> None:
    [broadcaster] = run_operator(api, namespace, True,
                                 lambda: sum(e.count for e in warnings(api, namespace)) == 25)
    events = warnings(api, namespace)
    singles = sorted(e.message for e in events if e.count == 1)
    [combined] = [e for e in events if e.count > 1]
    # client-go: a burst of 25 warnings for the object; messages 1-9 on their own, then one event that counts
    # the other 16 similar ones.
    assert singles == sorted(f"probe {i} of 500 failed" for i in range(1, 10))
    assert combined.count == 16 and combined.message == "(combined from similar events): probe 25 of 500 failed"
    assert {(e.type, e.source.component, e.involved_object.kind) for e in events} == {("Warning", "kopf", "ConfigMap")}
    stats = broadcaster.stats()
    assert (stats["created"], stats["patched"], stats["skipped"], stats["pending"]) == (10, 15, 475, 0)


def test_kopf_alone_posts_every_warning(api: Any, namespace: str) -> None:
    run_operator(api, namespace, False, lambda: len(warnings(api, namespace)) == 500)
    assert all(e.count in (None, 1) for e in warnings(api, namespace))
