"""The ready sinks: MemorySink, and the official clients' sinks against a local server that plays the
events endpoints (asserting the real requests), end to end from a Python object."""

import asyncio
import json
from datetime import datetime, timezone

import pytest

import kubevents
from kubevents.sinks import STRATEGIC_MERGE_PATCH, ApiError, AsyncCoreV1Sink, CoreV1Sink, MemorySink

START = datetime(2024, 1, 1, tzinfo=timezone.utc)
POD = {"kind": "Pod", "namespace": "prod", "name": "web-0", "uid": "u1", "apiVersion": "v1"}


def an_event(name="web-0.1", count=1, message="m"):
    ev = kubevents.make_event(POD, "Warning", "BackOff", message, source="ctl", clock=kubevents.FakeClock(START))
    ev["metadata"]["name"] = name
    ev["count"] = count
    return ev


def test_memory_sink_behaves_like_the_api_server():
    s = MemorySink()
    created = s.create(an_event())
    assert created["metadata"]["resourceVersion"] == "1"
    with pytest.raises(ApiError) as e:
        s.create(an_event())
    assert e.value.status == 409
    patched = s.patch(an_event(count=2), b'{"count":2,"lastTimestamp":"2024-01-01T00:00:05Z","message":"again"}')
    assert (patched["count"], patched["message"], patched["lastTimestamp"]) == (2, "again", "2024-01-01T00:00:05Z")
    assert patched["metadata"]["resourceVersion"] == "2"
    with pytest.raises(ApiError) as e:
        s.patch(an_event(name="gone"), b"{}")
    assert e.value.status == 404
    assert len(s) == 1 and s.get("prod", "web-0.1")["count"] == 2
    assert [op for op, _ in s.writes] == ["create", "patch"]


def core_v1(apiserver):
    client = pytest.importorskip("kubernetes.client")
    return client.CoreV1Api(client.ApiClient(client.Configuration(host=apiserver.host)))


def test_core_v1_sink_requests(apiserver):
    sink = CoreV1Sink(core_v1(apiserver))
    out = sink.create(an_event())
    assert out["metadata"]["resourceVersion"] == "1" and out["count"] == 1
    patch = b'{"count":2,"lastTimestamp":"2024-01-01T00:00:05Z","message":"m"}'
    out = sink.patch(an_event(count=2), patch)
    assert out["count"] == 2
    post, pat = apiserver.requests
    assert (post.method, post.path) == ("POST", "/api/v1/namespaces/prod/events")
    assert post.body["metadata"]["name"] == "web-0.1" and post.body["involvedObject"]["name"] == "web-0"
    assert (pat.method, pat.path, pat.content_type) == ("PATCH", "/api/v1/namespaces/prod/events/web-0.1", STRATEGIC_MERGE_PATCH)
    assert pat.body == json.loads(patch)


def test_core_v1_sink_errors_carry_the_status(apiserver):
    sink = CoreV1Sink(core_v1(apiserver))
    apiserver.fail_next(503)
    with pytest.raises(Exception) as e:
        sink.create(an_event())
    assert e.value.status == 503
    with pytest.raises(Exception) as e:
        sink.patch(an_event(name="missing", count=2), b"{}")
    assert e.value.status == 404


def test_end_to_end_from_a_client_model_to_the_api_server(apiserver):
    client = pytest.importorskip("kubernetes.client")
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="web-0", namespace="prod", uid="u1"))
    clock = kubevents.FakeClock(START)
    with kubevents.Broadcaster(clock=clock, sleep_duration=0) as b:
        b.start_recording_to_sink(CoreV1Sink(core_v1(apiserver)))
        r = b.new_recorder("my-controller", "host-1")
        apiserver.fail_next(503, times=2)
        r.eventf(pod, "Warning", "BackOff", "Back-off restarting %s", "app", field_path="spec.containers{app}")
        assert b.wait_idle(30)
        clock.step(5)
        r.eventf(pod, "Warning", "BackOff", "Back-off restarting %s", "app", field_path="spec.containers{app}")
        assert b.wait_idle(30)
        # The server lost the event: the patch is answered 404 and the event is created again.
        apiserver.events.clear()
        clock.step(5)
        r.eventf(pod, "Warning", "BackOff", "Back-off restarting %s", "app", field_path="spec.containers{app}")
    stats = b.stats()
    assert (stats["created"], stats["patched"], stats["retries"], stats["abandoned"]) == (2, 1, 2, 0)
    methods = [(q.method, q.path.rsplit("/", 1)[-1]) for q in apiserver.requests]
    name = apiserver.requests[0].body["metadata"]["name"]
    assert methods == [("POST", "events")] * 3 + [("PATCH", name), ("PATCH", name), ("POST", "events")]
    [stored] = apiserver.events.values()
    assert stored["count"] == 3 and stored["involvedObject"]["fieldPath"] == "spec.containers{app}"
    assert stored["involvedObject"]["kind"] == "Pod" and stored["source"] == {"component": "my-controller", "host": "host-1"}
    assert "resourceVersion" not in apiserver.requests[-1].body["metadata"]


def test_async_core_v1_sink_end_to_end(apiserver):
    aclient = pytest.importorskip("kubernetes_asyncio.client")

    async def main():
        api = aclient.CoreV1Api(aclient.ApiClient(aclient.Configuration(host=apiserver.host)))
        try:
            clock = kubevents.FakeClock(START)
            async with kubevents.Broadcaster(clock=clock) as b:
                b.start_recording_to_sink(AsyncCoreV1Sink(api))
                r = b.new_recorder("ctl")
                r.event(POD, "Normal", "Started", "started")
                await asyncio.to_thread(b.wait_idle, 30)
                clock.step(1)
                r.event(POD, "Normal", "Started", "started")
            return b.stats()
        finally:
            await api.api_client.close()

    stats = asyncio.run(main())
    assert (stats["created"], stats["patched"]) == (1, 1)
    post, pat = apiserver.requests
    assert (post.method, post.path) == ("POST", "/api/v1/namespaces/prod/events")
    assert (pat.method, pat.content_type) == ("PATCH", STRATEGIC_MERGE_PATCH)
    assert pat.body["count"] == 2
    [stored] = apiserver.events.values()
    assert stored["count"] == 2


def test_memory_sink_end_to_end_with_aggregation():
    sink = MemorySink()
    clock = kubevents.IntervalClock(START, 1)
    with kubevents.Broadcaster(clock=clock) as b:
        b.start_recording_to_sink(sink)
        r = b.new_recorder("kubelet", "node-1")
        for i in range(12):
            r.eventf(POD, "Warning", "Failed", "Failed to pull image %d", i)
    events = sink.events()
    # The tenth distinct message of one reason becomes the aggregate event, which then counts up.
    combined = [e for e in events if e["message"].startswith("(combined from similar events)")]
    assert len(events) == 10 and len(combined) == 1 and combined[0]["count"] == 3
    assert b.stats()["aggregated"] == 3


class _Echo:
    """Answers with the very dict it was sent, after changing what a server would."""

    def __init__(self, count=None):
        self.seen, self.count = [], count

    def create(self, event):
        meta = event["metadata"]
        self.seen.append(("create", meta["name"], meta.get("resourceVersion")))
        meta["name"], meta["resourceVersion"] = "from-server", "42"
        if self.count is not None:
            event["count"] = self.count
        return event

    def patch(self, event, patch):
        meta = event["metadata"]
        self.seen.append(("patch", meta["name"], meta.get("resourceVersion")))
        return event


def test_an_answer_that_is_the_dict_sent_is_read_back():
    ref = {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u", "apiVersion": "v1"}
    sink = _Echo()
    b = kubevents.Broadcaster()
    b.start_recording_to_sink(sink)
    r = b.new_recorder("test")
    r.event(ref, "Normal", "Pulled", "pulled")
    r.event(ref, "Normal", "Pulled", "pulled")
    stats = b.shutdown()
    # The repeat is patched under the name and resourceVersion of the first answer.
    assert sink.seen == [("create", sink.seen[0][1], None), ("patch", "from-server", "42")]
    assert (stats["created"], stats["patched"], stats["abandoned"]) == (1, 1, 0)

    bad = _Echo(count="x")
    b = kubevents.Broadcaster()
    b.start_recording_to_sink(bad)
    r = b.new_recorder("test")
    r.event(ref, "Normal", "Pulled", "pulled")
    r.event(ref, "Normal", "Pulled", "pulled")
    stats = b.shutdown()
    # A bad answer abandons its write and nothing of it is kept: the repeat keeps the name it was sent with.
    assert bad.seen == [("create", bad.seen[0][1], None), ("patch", bad.seen[0][1], None)]
    assert (stats["created"], stats["patched"], stats["abandoned"]) == (0, 1, 1)


def test_a_first_timestamp_changed_in_the_dict_sent_is_read_back():
    class MovesFirstTimestamp:
        def __init__(self):
            self.firsts = []

        def create(self, event):
            self.firsts.append(event["firstTimestamp"])
            event["firstTimestamp"] = "2020-01-01T00:00:00Z"
            return event

        def patch(self, event, patch):
            self.firsts.append(event["firstTimestamp"])
            return event

    ref = {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u", "apiVersion": "v1"}
    sink = MovesFirstTimestamp()
    b = kubevents.Broadcaster(clock=kubevents.FakeClock(1_700_000_000.5))
    b.start_recording_to_sink(sink)
    r = b.new_recorder("test")
    r.event(ref, "Normal", "Pulled", "pulled")
    r.event(ref, "Normal", "Pulled", "pulled")
    b.shutdown()
    # The repeat is patched with the first timestamp of the answer, not the one sent.
    assert sink.firsts == ["2023-11-14T22:13:20Z", "2020-01-01T00:00:00Z"]
