"""kubevents.metrics: the collector scraped with prometheus_client's own text exposition and parser, checked
against each component's stats() after a known workload."""

from __future__ import annotations

import gc
import re
import subprocess
import sys

import pytest
from pleg_fakes import C, FakeRuntime, pod, wait_for
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import kubevents
import kubevents.metrics
from kubevents import FakeClock
from kubevents.pleg import EventedPLEG, GenericPLEG, PodCache
from kubevents.sinks import ApiError, MemorySink

NS = 10**9
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "api-0", "namespace": "web", "uid": "u1"}}
DEF_BUCKETS = ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf"]


@pytest.fixture
def registry():
    r = CollectorRegistry()
    kubevents.metrics.register(r)
    return r


def scrape(registry, name):
    """The samples of the component named ``name``: {(sample name, other labels as a sorted tuple): value}."""
    text = generate_latest(registry).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("name") == name:
                rest = tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("name", "component")))
                out[(s.name, rest)] = s.value
    return out


def components(registry, name):
    text = generate_latest(registry).decode()
    return {s.labels["component"] for f in text_string_to_metric_families(text) for s in f.samples
            if s.labels.get("name") == name}


class RejectingSink(MemorySink):
    """Rejects (422) the create of events whose reason is ``Bad``."""

    def create(self, event):
        if event["reason"] == "Bad":
            raise ApiError(422, "Invalid")
        return super().create(event)


def test_broadcaster_metrics_are_its_stats(registry):
    b = kubevents.Broadcaster(clock=FakeClock(1_700_000_000), name="ctl")
    b.start_recording_to_sink(RejectingSink())
    rec = b.new_recorder("ctl")
    for _ in range(3):
        rec.event(POD, "Normal", "Started", "started")
    rec.event(POD, "Warning", "Bad", "rejected")
    assert b.wait_idle(timeout=10)
    s = b.stats()
    assert (s["created"], s["patched"], s["create_errors"], s["patch_errors"], s["abandoned"]) == (1, 2, 1, 0, 1)
    m = scrape(registry, "ctl")
    assert m[("kubevents_events_received_total", ())] == s["received"] == 4
    assert m[("kubevents_sink_writes_total", (("result", "success"), ("verb", "create")))] == 1
    assert m[("kubevents_sink_writes_total", (("result", "error"), ("verb", "create")))] == 1
    assert m[("kubevents_sink_writes_total", (("result", "success"), ("verb", "patch")))] == 2
    assert m[("kubevents_sink_writes_total", (("result", "error"), ("verb", "patch")))] == 0
    for metric, key in [("retries", "retries"), ("abandoned", "abandoned"), ("aggregated", "aggregated"),
                        ("deduplicated", "deduplicated"), ("spam_filtered", "skipped"),
                        ("handler_errors", "handler_errors"), ("recorder_waits", "recorder_waits")]:
        assert m[(f"kubevents_{metric}_total", ())] == s[key], metric
    assert s["deduplicated"] == 2
    for reason, key in [("incoming", "dropped_incoming"), ("after_shutdown", "dropped_after_shutdown")]:
        assert m[("kubevents_events_dropped_total", (("reason", reason),))] == s[key] == 0
    assert m[("kubevents_events_dropped_total", (("reason", "watcher"),))] == 0
    assert m[("kubevents_queue_length", ())] == s["pending"] == 0
    b.shutdown()
    rec.event(POD, "Normal", "Late", "after shutdown")
    m = scrape(registry, "ctl")
    assert m[("kubevents_events_dropped_total", (("reason", "after_shutdown"),))] == 1
    assert m[("kubevents_events_received_total", ())] == 5


def test_counters_never_go_down(registry):
    b = kubevents.Broadcaster(clock=FakeClock(1_700_000_000), name="monotonic")
    b.start_recording_to_sink(MemorySink())
    rec = b.new_recorder("c")
    before = scrape(registry, "monotonic")
    scrapes = [before]
    for i in range(5):
        for j in range(20):
            rec.event(POD, "Normal", f"R{j % 3}", f"m{i}")
        scrapes.append(scrape(registry, "monotonic"))
    b.wait_idle(timeout=10)
    scrapes.append(scrape(registry, "monotonic"))
    counters = [k for k in before if k[0].endswith("_total")]
    assert counters
    for earlier, later in zip(scrapes, scrapes[1:]):
        for k in counters:
            assert later[k] >= earlier[k], k
    assert scrapes[-1][("kubevents_events_received_total", ())] == 100
    b.shutdown()


def test_a_collected_broadcaster_disappears(registry):
    b = kubevents.Broadcaster(name="short-lived")
    b.start_recording_to_sink(MemorySink())
    b.new_recorder("c").event(POD, "Normal", "Started", "x")
    b.shutdown()
    e = kubevents.EventsBroadcaster(name="short-lived-v1")
    assert components(registry, "short-lived") == {"Broadcaster"}
    assert components(registry, "short-lived-v1") == {"EventsBroadcaster"}
    del b, e
    gc.collect()
    assert components(registry, "short-lived") == set()
    assert components(registry, "short-lived-v1") == set()


def test_default_names_count_per_class():
    a, b = kubevents.Broadcaster(), kubevents.Broadcaster()
    na, nb = (int(re.fullmatch(r"Broadcaster-(\d+)", x.name).group(1)) for x in (a, b))
    assert nb == na + 1
    assert re.fullmatch(r"EventsBroadcaster-\d+", kubevents.EventsBroadcaster().name)
    assert kubevents.Broadcaster(name="x").name == "x"
    with pytest.raises(TypeError, match="name"):
        kubevents.EventsBroadcaster(name=3)
    with pytest.raises(TypeError):
        kubevents.Broadcaster(name=3)


def test_events_broadcaster_series_counters(registry):
    clock = FakeClock(1_700_000_000)
    b = kubevents.EventsBroadcaster(clock=clock, name="series")
    b.start_recording_to_sink(MemorySink())
    rec = b.new_recorder("ctl", "ctl-1")
    for _ in range(4):
        rec.eventf(POD, None, "Normal", "Pulled", "pull", "pulled")
        b.wait_idle()
    s = b.stats()
    assert (s["received"], s["first_occurrences"], s["series_started"], s["counted"]) == (4, 1, 1, 2)
    m = scrape(registry, "series")
    assert m[("kubevents_events_received_total", ())] == 4
    assert m[("kubevents_series_first_occurrences_total", ())] == 1
    assert m[("kubevents_series_started_total", ())] == 1
    assert m[("kubevents_series_counted_total", ())] == 2
    assert m[("kubevents_series_observed_total", ())] == s["observed"] == 4
    assert m[("kubevents_sink_writes_total", (("result", "success"), ("verb", "create")))] == s["created"] == 1
    assert m[("kubevents_sink_writes_total", (("result", "success"), ("verb", "patch")))] == s["patched"] == 1
    assert m[("kubevents_series_cache_length", ())] == s["cache_len"] == 1
    assert m[("kubevents_series_rounds_total", (("round", "finish"),))] == s["finish_rounds"]
    # The rounds on the clock: the finish round writes the series' final count and forgets it.
    clock.step(1800)
    b.wait_idle()
    m, s = scrape(registry, "series"), b.stats()
    for cause in ("refresh", "finish", "evicted", "shutdown"):
        assert m[("kubevents_series_writes_total", (("cause", cause),))] == s[f"{cause}_writes"], cause
    assert s["finish_writes"] == 1
    assert m[("kubevents_series_cache_length", ())] == 0
    final = b.shutdown()
    rec.eventf(POD, None, "Normal", "Pulled", "pull", "late")
    m = scrape(registry, "series")
    assert m[("kubevents_events_dropped_total", (("reason", "after_shutdown"),))] == 1
    assert m[("kubevents_series_writes_total", (("cause", "shutdown"),))] == final["shutdown_writes"]


class SlowRuntime(FakeRuntime):
    """Each listing takes 0.3 s of the fake clock."""

    def __init__(self, clock, pods):
        super().__init__(pods)
        self.clock = clock

    def get_pods(self):
        self.clock.step(0.3)
        return super().get_pods()


def histogram(m, metric):
    buckets = [m[(f"{metric}_bucket", (("le", le),))] for le in DEF_BUCKETS]
    return buckets, m[(f"{metric}_count", ())], m[(f"{metric}_sum", ())]


def test_pleg_relist_histograms_on_the_fake_clock(registry):
    clock = FakeClock(1_700_000_000)
    pleg = GenericPLEG(SlowRuntime(clock, [pod("p", [C("c", "running")])]), cache=PodCache(), clock=clock)
    names = {c["name"] for c in kubevents._native._live_components() if c["kind"] == "GenericPLEG"}
    name = max(names, key=lambda n: int(n.rsplit("-", 1)[1]))
    for _ in range(3):
        pleg.relist()
        clock.step(2)
    m = scrape(registry, name)
    # Each relist took 0.3 s: in the 0.5 bucket and above.
    buckets, count, total = histogram(m, "kubelet_pleg_relist_duration_seconds")
    assert buckets == [0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 3, 3] and count == 3 and total == pytest.approx(0.9)
    # From one relist's start to the next: 0.3 s listing plus the 2 s step.
    buckets, count, total = histogram(m, "kubelet_pleg_relist_interval_seconds")
    assert buckets == [0] * 8 + [2, 2, 2, 2] and count == 2 and total == pytest.approx(4.6)
    s = pleg.stats()
    assert s["relist_duration_seconds"]["count"] == 3
    assert m[("kubelet_pleg_last_seen_seconds", ())] == s["last_seen"] == pytest.approx(1_700_000_004.6)
    assert m[("kubevents_pleg_relists_total", ())] == s["relists"] == 3
    assert m[("kubelet_running_pods", ())] == s["running_pods"]
    assert m[("kubelet_running_containers", (("container_state", "running"),))] == 1
    assert m[("kubelet_pleg_discard_events_total", ())] == s["events_dropped"] == 0


def test_evented_pleg_latency_and_connections(registry):
    clock = FakeClock(1_700_000_000)
    generic = GenericPLEG(FakeRuntime([]), cache=PodCache(evented=True), clock=clock)
    evented = EventedPLEG(generic)
    name = [c["name"] for c in kubevents._native._live_components() if c["kind"] == "EventedPLEG"][-1]
    now = clock.now_ns()
    evented.process_events([
        {"container_id": "c1", "pod_uid": "p1", "type": "CONTAINER_STARTED_EVENT", "created_at": now - ms * NS // 1000,
         "pod_status": {"id": "p1"}}
        for ms in (20, 300)
    ])
    m = scrape(registry, name)
    buckets, count, total = histogram(m, "kubelet_evented_pleg_connection_latency_seconds")
    assert buckets == [0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2] and count == 2 and total == pytest.approx(0.32)
    s = evented.stats()
    assert m[("kubelet_evented_pleg_connection_error_count_total", ())] == s["stream_failures"] == 0
    assert m[("kubelet_evented_pleg_connection_success_count_total", ())] == s["stream_connections"] == 0
    assert m[("kubevents_evented_pleg_events_received_total", ())] == s["events_received"] == 2


class OneStream:
    """A runtime service whose first stream delivers an event then breaks, and whose later ones fail."""

    def __init__(self, event):
        self.event = event
        self.calls = 0

    def get_container_events(self):
        self.calls += 1
        if self.calls > 1:
            raise ConnectionError("refused")
        yield self.event
        raise ConnectionError("stream broken")


def test_evented_pleg_connections_count_streams_that_delivered(registry):
    clock = FakeClock(1_700_000_000)
    generic = GenericPLEG(FakeRuntime([]), cache=PodCache(evented=True), clock=clock)
    event = {"container_id": "c1", "pod_uid": "p1", "type": "CONTAINER_STARTED_EVENT", "created_at": clock.now_ns(),
             "pod_status": {"id": "p1"}}
    evented = EventedPLEG(generic, runtime_service=OneStream(event), max_stream_retries=2)
    name = [c["name"] for c in kubevents._native._live_components() if c["kind"] == "EventedPLEG"][-1]
    evented.start()
    try:
        wait_for(lambda: evented.stats()["fell_back"], "the fall-back")
    finally:
        generic.stop()
        evented.stop()
    m = scrape(registry, name)
    assert m[("kubelet_evented_pleg_connection_success_count_total", ())] == 1
    assert m[("kubelet_evented_pleg_connection_error_count_total", ())] == evented.stats()["stream_failures"] == 2


def test_register_is_idempotent_and_defaults_to_the_global_registry():
    r = CollectorRegistry()
    first = kubevents.metrics.register(r)
    assert kubevents.metrics.register(r) is first
    import prometheus_client

    default = kubevents.metrics.register()
    assert kubevents.metrics.register(prometheus_client.REGISTRY) is default
    assert default is not first


def test_the_import_names_the_extra_without_prometheus_client():
    code = "import sys; sys.modules['prometheus_client'] = None; import kubevents.metrics"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode != 0
    assert "ImportError: kubevents.metrics needs prometheus_client: pip install 'kubevents[metrics]'" in p.stderr


def test_a_forked_child_leaves_out_the_components_made_before_the_fork():
    code = """
import os
from prometheus_client import CollectorRegistry, generate_latest
import kubevents, kubevents.metrics
from kubevents.sinks import MemorySink

registry = CollectorRegistry()
kubevents.metrics.register(registry)
b = kubevents.Broadcaster(name="parent")
b.start_recording_to_sink(MemorySink())
e = kubevents.EventsBroadcaster(name="parent-v1")
e.start_recording_to_sink(MemorySink())
pid = os.fork()
if pid == 0:
    child = kubevents.Broadcaster(name="child")
    text = generate_latest(registry).decode()
    os._exit(0 if 'name="child"' in text and 'name="parent' not in text else 1)
_, status = os.waitpid(pid, 0)
text = generate_latest(registry).decode()
print(os.waitstatus_to_exitcode(status), 'name="parent"' in text, 'name="parent-v1"' in text)
b.shutdown()
e.shutdown()
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (p.stdout, p.returncode) == ("0 True True\n", 0), p.stderr


def test_the_guide_lines_register_and_serve(monkeypatch):
    import prometheus_client

    from docs_examples import example

    ports = []
    monkeypatch.setattr(prometheus_client, "start_http_server", lambda port, *a, **k: ports.append(port))
    example("docs/guides/metrics.md", "start_http_server").run()
    assert ports == [8000]
    b = kubevents.Broadcaster(name="guide")
    text = generate_latest(prometheus_client.REGISTRY).decode()
    assert 'kubevents_events_received_total{component="Broadcaster",name="guide"} 0.0' in text
    del b


def test_module_docstring_example():
    import doctest

    assert doctest.testmod(kubevents.metrics).failed == 0


def _pod(i):
    return {**POD, "metadata": {**POD["metadata"], "name": f"p{i}"}}


class _Outage(MemorySink):
    """Refuses connections while ``down``."""

    down = False

    def create(self, event):
        if self.down:
            raise ConnectionRefusedError(111, "Connection refused")
        return super().create(event)


@pytest.mark.parametrize("api", ["core/v1", "events.k8s.io/v1"])
def test_sink_health_gauges_say_when_events_last_reached_the_server(registry, api):
    clock = FakeClock(1_700_000_000)
    sink = _Outage()
    name = f"health-{api}"
    if api == "core/v1":
        b = kubevents.Broadcaster(clock=clock, name=name)
        rec = b.new_recorder("ctl")
        record = lambda i: rec.eventf(_pod(i), "Normal", "Pulled", "pulled")  # noqa: E731
    else:
        b = kubevents.EventsBroadcaster(clock=clock, name=name)
        rec = b.new_recorder("ctl", "ctl-1")
        record = lambda i: rec.eventf(_pod(i), None, "Normal", "Pulled", "pull", "pulled")  # noqa: E731
    b.start_recording_to_sink(sink)
    up = ("kubevents_sink_up", (("sink", "sink-1"),))
    last = ("kubevents_sink_last_success_timestamp_seconds", (("sink", "sink-1"),))
    m = scrape(registry, name)
    assert m[up] == 1 and last not in m, "no write yet: up, with no last success"
    record(0)
    assert b.wait_idle(10)
    assert scrape(registry, name)[last] == 1_700_000_000
    sink.down = True
    clock.step(60)
    record(1)
    assert b.wait_idle(10)
    m = scrape(registry, name)
    assert m[up] == 0 and m[last] == 1_700_000_000
    health = b.stats()["sinks"]["sink-1"]
    assert health["failing_since"] == "2023-11-14T22:14:20Z"
    assert (health["last_error"]["type"], health["last_error"]["status"]) == ("ConnectionRefusedError", None)
    # What an alert on "no event reached the API server for 5 minutes" compares with the time.
    sink.down = False
    clock.step(20)
    assert b.wait_idle(10)
    m = scrape(registry, name)
    assert m[up] == 1 and m[last] == 1_700_000_080
    b.shutdown(timeout=10)
