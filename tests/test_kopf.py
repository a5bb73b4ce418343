"""kubevents.kopf: real kopf operators (KopfRunner) against a fake API server (tests/fake_kopf_cluster.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

kopf = pytest.importorskip("kopf")

from kopf.testing import KopfRunner  # noqa: E402
from pytest_httpserver import HTTPServer  # noqa: E402

import kubevents  # noqa: E402
import kubevents.kopf  # noqa: E402
from fake_kopf_cluster import FakeKopfCluster  # noqa: E402
from kubevents.sinks import STRATEGIC_MERGE_PATCH, MemorySink  # noqa: E402

EXAMPLE = Path(__file__).parent.parent / "examples" / "kopf_operator.py"
START = 1_700_000_000
# Every reading of the clock moves it 1 ms on: distinct event names, and 500 events well inside the spam
# filter's 300 s per token and the aggregation's 600 s window.
TICK = 0.001
WAIT = 60  # seconds a test waits for the operator before it fails


def wait_for(what: str, condition: Callable[[], bool], timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def cluster() -> Iterator[FakeKopfCluster]:
    server = HTTPServer(threaded=True)
    server.start()
    cluster = FakeKopfCluster(server)
    try:
        yield cluster
    finally:
        cluster.close()
        server.clear()
        server.stop()


@contextlib.contextmanager
def operator(cluster: FakeKopfCluster, registry: Any, *args: str) -> Iterator[KopfRunner]:
    """Runs the operator of ``registry`` (and of the files in ``args``) against ``cluster``, namespace ``ns``."""

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> Any:
        return kopf.ConnectionInfo(server=cluster.url, default_namespace="ns")

    settings = kopf.OperatorSettings()
    try:
        with KopfRunner(["run", "--standalone", "--namespace", "ns", *args], registry=registry, settings=settings,
                        timeout=WAIT) as runner:
            # Stopping kopf < 1.38 while it reads the discovery documents fails it ("Session is closed").
            wait_for("kopf to watch ConfigMaps", lambda: cluster.watches > 0)
            yield runner
    finally:
        # kopf never shuts down the executor of its sync handlers: its thread would end at some later test's
        # garbage collection (and upset the tests that count threads).
        settings.execution.executor.shutdown(wait=True)
    assert runner.exit_code == 0, runner.output


def warnings_of(cluster: FakeKopfCluster, reason: str) -> list[dict[str, Any]]:
    return [e for e in cluster.events.events.values() if e.get("reason") == reason]


def counted(events: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    return sorted((e["type"], e["message"], e.get("count", 1)) for e in events)


def client_go_writes(ref: dict[str, Any], calls: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    """The events that client-go's correlator leaves on the API server for these (type, reason, message) calls,
    made one after the other on a clock that ticks as the operator's."""
    clock = kubevents.IntervalClock(START, TICK)
    correlator = kubevents.Correlator(clock=clock)
    server = MemorySink()
    for type_, reason, message in calls:
        event = kubevents.make_event(ref, type_, reason, message, source={"component": "kopf"}, clock=clock)
        result = correlator.correlate(event)
        if result.event is None:
            continue  # the spam filter said no
        if result.event["count"] > 1:
            written = server.patch(result.event, result.patch)
        else:
            written = server.create(result.event)
        correlator.update_state(written)
    return server.events()


def quiet(settings: Any) -> None:
    """Only warnings make events: kopf before 1.44 also posts its INFO logs about the object (on the same
    recorder, but they would show in the stats)."""
    settings.posting.level = logging.WARNING


def warn_500(handled: threading.Event) -> Callable[..., Any]:
    async def probe(body: Any, **_: Any) -> None:
        for attempt in range(1, 501):
            kopf.warn(body, reason="ProbeFailed", message=f"probe {attempt} of 500 failed")
        handled.set()

    return probe


CALLS = [("Warning", "ProbeFailed", f"probe {attempt} of 500 failed") for attempt in range(1, 501)]


def test_kopf_alone_posts_every_warning(cluster: FakeKopfCluster) -> None:
    cluster.create("ns", "demo")
    registry = kopf.OperatorRegistry()
    handled = threading.Event()
    kopf.on.create("configmaps", registry=registry)(warn_500(handled))
    with operator(cluster, registry):
        wait_for("kopf's 500 events", lambda: len(warnings_of(cluster, "ProbeFailed")) == 500)
    assert all(e.get("count", 1) == 1 for e in warnings_of(cluster, "ProbeFailed"))
    assert {r.method for r in cluster.events.requests} == {"POST"}


def test_install_aggregates_500_warnings_as_client_go(cluster: FakeKopfCluster) -> None:
    configmap = cluster.create("ns", "demo")
    registry = kopf.OperatorRegistry()
    handled = threading.Event()
    installed: list[kubevents.Broadcaster] = []

    @kopf.on.startup(registry=registry)
    async def startup(settings: Any, **_: Any) -> None:
        quiet(settings)
        installed.append(kubevents.kopf.install(settings, clock=kubevents.IntervalClock(START, TICK)))

    kopf.on.create("configmaps", registry=registry)(warn_500(handled))
    with operator(cluster, registry):
        assert handled.wait(WAIT)
        wait_for("the writes", lambda: sum(e["count"] for e in warnings_of(cluster, "ProbeFailed")) == 25)
    stats = installed[0].stats()  # final: the broadcaster was shut down as the operator stopped

    written = warnings_of(cluster, "ProbeFailed")
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "ns", "name": "demo",
           "uid": configmap["metadata"]["uid"]}
    assert counted(written) == counted(client_go_writes(ref, CALLS))
    # client-go's reasoning: a burst of 25 for the object's warnings, the first 9 messages on their own,
    # and from the 10th similar one on, one "(combined from similar events)" event counting the rest.
    assert len(written) == 10 and sum(e["count"] for e in written) == 25
    assert (stats["created"], stats["patched"], stats["skipped"]) == (10, 15, 475)
    for event in written:
        assert event["involvedObject"] == ref
        assert event["source"] == {"component": "kopf"}
    patches = [r for r in cluster.events.requests if r.method == "PATCH"]
    assert len(patches) == 15 and {r.content_type for r in patches} == {STRATEGIC_MERGE_PATCH}


def test_stop_flushes_what_is_queued(cluster: FakeKopfCluster) -> None:
    cluster.create("ns", "demo")
    cluster.gate_events()
    registry = kopf.OperatorRegistry()
    handled = threading.Event()
    stored_at_stop: list[int] = []

    @kopf.on.startup(registry=registry)
    async def startup(settings: Any, **_: Any) -> None:
        quiet(settings)
        kubevents.kopf.install(settings, clock=kubevents.IntervalClock(START, TICK))

    # The API server answers events only once the operator is stopping. (Cleanup handlers run one after the
    # other, in the order they were registered: this one first, kubevents' flush, registered by install, next.)
    @kopf.on.cleanup(registry=registry)
    async def answer_again(**_: Any) -> None:
        stored_at_stop.append(len(cluster.events.events))
        cluster.open_events()

    kopf.on.create("configmaps", registry=registry)(warn_500(handled))
    with operator(cluster, registry) as runner:
        assert handled.wait(WAIT)
        wait_for("the first write to be held", lambda: cluster.events_waiting == 1)

    assert stored_at_stop == [0]
    written = warnings_of(cluster, "ProbeFailed")
    assert len(written) == 10 and sum(e["count"] for e in written) == 25
    assert "kubevents: events written: 10 created, 15 patched; 475 skipped by the spam filter" in runner.output


def test_kinds_of_kopf_events(cluster: FakeKopfCluster) -> None:
    """Explicit calls of each kind and per-object log messages, with kopf's types as Normal/Warning."""
    configmap = cluster.create("ns", "demo")
    registry = kopf.OperatorRegistry()
    handled = threading.Event()

    @kopf.on.startup(registry=registry)
    async def startup(settings: Any, **_: Any) -> None:
        if hasattr(settings.posting, "loggers"):  # kopf >= 1.42; older ones always post the logs
            settings.posting.loggers = True
        kubevents.kopf.install(settings, component="demo-operator", host="node-1")

    @kopf.on.create("configmaps", registry=registry)
    def check(body: Any, logger: Any, **_: Any) -> None:  # a sync handler: kopf runs it in a thread
        kopf.info(body, reason="Checked", message="all good")
        kopf.event(body, type="Normal", reason="Noted", message="noted")
        try:
            raise ValueError("boom")
        except ValueError:
            kopf.exception(body, reason="Crashed", message="while checking:")
        logger.warning("disk almost full")
        kopf.event(body, type="Custom", reason="Ignored", message="not a Kubernetes type")
        handled.set()

    with operator(cluster, registry):
        assert handled.wait(WAIT)
        # 3 calls that make events, 3 log messages: the handler's and kopf's own two about the object.
        wait_for("the events", lambda: len(cluster.events.events) == 6)

    events = {(e["reason"], e["message"]): e for e in cluster.events.events.values()}
    assert events["Checked", "all good"]["type"] == "Normal"
    assert events["Noted", "noted"]["type"] == "Normal"
    assert events["Crashed", "while checking: boom"]["type"] == "Warning"
    assert events["Logging", "disk almost full"]["type"] == "Warning"
    assert events["Logging", "Creation is processed: 1 succeeded; 0 failed."]["type"] == "Normal"
    assert "Ignored" not in {reason for reason, _ in events}
    for event in events.values():
        assert event["source"] == {"component": "demo-operator", "host": "node-1"}
        assert event["involvedObject"]["uid"] == configmap["metadata"]["uid"]


def test_kopf_sink_answers(cluster: FakeKopfCluster) -> None:
    """KopfSink writes with kopf's credentials, and its errors carry the HTTP status the retry rules read."""
    cluster.create("ns", "demo")
    results: dict[str, Any] = {}
    registry = kopf.OperatorRegistry()

    # Not in a startup handler: kopf logs in only once they are done.
    @kopf.on.create("configmaps", registry=registry)
    async def write(**_: Any) -> None:
        sink = kubevents.kopf.KopfSink()
        event = kubevents.make_event({"apiVersion": "v1", "kind": "ConfigMap", "namespace": "ns", "name": "demo"},
                                     "Normal", "Tested", "created", source={"component": "kopf"})
        results["created"] = await sink.create(event)
        for name, call in [
            ("duplicate", sink.create(event)),
            ("missing", sink.patch({"metadata": {"namespace": "ns", "name": "gone"}}, b'{"count":2}')),
        ]:
            try:
                await call
            except Exception as e:  # noqa: BLE001 - the test looks at what was raised
                results[name] = e
        cluster.events.fail_next(503)
        try:
            await sink.patch(results["created"], b'{"count":2}')
        except Exception as e:  # noqa: BLE001
            results["unavailable"] = e
        results["patched"] = await sink.patch(results["created"], b'{"count":2}')

    with operator(cluster, registry):
        wait_for("the handler", lambda: "patched" in results)

    assert results["created"]["metadata"]["resourceVersion"]
    assert getattr(results["duplicate"], "status", None) == 409
    assert getattr(results["missing"], "status", None) == 404
    assert getattr(results["unavailable"], "status", None) == 503
    assert results["patched"]["count"] == 2
    patches = [r for r in cluster.events.requests if r.method == "PATCH"]
    assert len(patches) == 3 and {r.content_type for r in patches} == {STRATEGIC_MERGE_PATCH}


def test_server_errors_are_retried(cluster: FakeKopfCluster) -> None:
    cluster.create("ns", "demo")
    cluster.events.fail_next(500, times=2)
    registry = kopf.OperatorRegistry()
    handled = threading.Event()
    installed: list[kubevents.Broadcaster] = []

    @kopf.on.startup(registry=registry)
    async def startup(settings: Any, **_: Any) -> None:
        quiet(settings)
        installed.append(kubevents.kopf.install(settings, sleep_duration=0.01))

    @kopf.on.create("configmaps", registry=registry)
    async def warn(body: Any, **_: Any) -> None:
        kopf.warn(body, reason="Flaky", message="once")
        handled.set()

    with operator(cluster, registry):
        assert handled.wait(WAIT)
        wait_for("the retried write", lambda: len(warnings_of(cluster, "Flaky")) == 1)
    stats = installed[0].stats()
    assert (stats["created"], stats["retries"], stats["abandoned"]) == (1, 2, 0)


def test_install_misuse(cluster: FakeKopfCluster) -> None:
    with pytest.raises(RuntimeError, match="event loop"):
        kubevents.kopf.install(kopf.OperatorSettings())

    async def not_in_kopf() -> None:
        kubevents.kopf.install(kopf.OperatorSettings())

    with pytest.raises(RuntimeError, match="startup"):
        asyncio.run(not_in_kopf())
    with pytest.raises(RuntimeError, match="kopf handler"):
        kubevents.kopf.KopfSink()

    errors: list[BaseException] = []
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    async def startup(settings: Any, **_: Any) -> None:
        kubevents.kopf.install(settings)
        for misuse in [
            lambda: kubevents.kopf.install(settings),
            lambda: kubevents.kopf.install(settings.posting),
            lambda: kubevents.kopf.install(kopf.OperatorSettings()),
        ]:
            try:
                misuse()
            except Exception as e:  # noqa: BLE001
                errors.append(e)

    @kopf.on.create("configmaps", registry=registry)
    def nothing(**_: Any) -> None:
        pass

    with operator(cluster, registry):
        wait_for("the startup handler", lambda: len(errors) == 3)
    assert [type(e) for e in errors] == [RuntimeError, TypeError, RuntimeError]
    assert "already" in str(errors[0])


def test_example_operator(cluster: FakeKopfCluster) -> None:
    """The example a new user copies: aggregated events on the cluster."""
    cluster.create("ns", "kubevents-demo")
    with operator(cluster, kopf.OperatorRegistry(), str(EXAMPLE)):
        wait_for("the writes", lambda: sum(e["count"] for e in warnings_of(cluster, "ProbeFailed")) == 25)
    assert len(warnings_of(cluster, "ProbeFailed")) == 10


def test_kubevents_does_not_import_kopf() -> None:
    code = "import sys, kubevents, kubevents.sinks; assert 'kopf' not in sys.modules, 'kopf imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=WAIT)


def test_the_guide_shows_the_example_itself() -> None:
    guide = (Path(__file__).parent.parent / "docs" / "guides" / "kopf.md").read_text()
    assert "pip install 'kubevents[kopf]'" in guide
    # The site includes the file, so the example shown is the one tested above.
    assert '--8<-- "examples/kopf_operator.py"' in guide
    assert "    kubevents.kopf.install(settings)" in EXAMPLE.read_text()


def test_module_and_example_pass_mypy_strict() -> None:
    # The module by name: given as a file inside site-packages (an installed wheel), mypy would take
    # site-packages for a source root and refuse its own typing_extensions there.
    for target in (["-p", "kubevents.kopf"], [str(EXAMPLE)]):
        p = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", *target],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
