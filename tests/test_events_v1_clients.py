"""The events.k8s.io/v1 sinks for the official clients, and the broadcaster adapter, against a local
HTTP server that answers as the API server does (the recording pipeline's ``FakeApiServer``)."""

import asyncio
import threading

import pytest

import kubevents
from fake_apiserver import FakeApiServer

k8s = pytest.importorskip("kubernetes.client")
k8s_asyncio = pytest.importorskip("kubernetes_asyncio.client")

T0 = 1_700_000_000
V1 = "/apis/events.k8s.io/v1"
POD = {"kind": "Pod", "namespace": "web", "name": "api-0", "uid": "u1", "apiVersion": "v1"}
NAME = f"api-0.{(T0 + 1) * 10**9:x}"


DISCOVERY = {
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "events.k8s.io/v1",
    "resources": [{"name": "events", "singularName": "event", "namespaced": True, "kind": "Event",
                   "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}],
}


@pytest.fixture
def servers(httpserver):
    """The plugin's local server (started once, cleared after each test) playing both event APIs:
    (events.k8s.io/v1, core/v1, the HTTP server)."""
    return FakeApiServer(httpserver, prefix=V1, api_version="events.k8s.io/v1"), FakeApiServer(httpserver), httpserver


def record_three(b, clock):
    rec = b.new_recorder("ctl", "ctl-1")
    for i in range(3):
        clock.step(1)
        rec.eventf(POD, None, "Warning", "BackOff", "Restarting", "Back-off %d", i)
        b.wait_idle()


def check_requests(srv):
    writes = [(r.method, r.path, r.content_type, r.body) for r in srv.requests]
    assert [w[:3] for w in writes] == [
        ("POST", f"{V1}/namespaces/web/events", "application/json"),
        ("PATCH", f"{V1}/namespaces/web/events/{NAME}", "application/strategic-merge-patch+json"),
        ("PATCH", f"{V1}/namespaces/web/events/{NAME}", "application/strategic-merge-patch+json"),
    ]
    created = writes[0][3]
    # The event goes out exactly as made: MicroTime with six digits even when they are zero.
    assert created["eventTime"] == "2023-11-14T22:13:21.000000Z"
    assert created["regarding"] == POD and created["note"] == "Back-off 0"
    assert writes[1][3] == {"series": {"count": 2, "lastObservedTime": "2023-11-14T22:13:22.000000Z"}}
    assert writes[2][3] == {"series": {"count": 3, "lastObservedTime": "2023-11-14T22:13:23.000000Z"}}
    stored = srv.events[("web", NAME)]
    assert stored["series"]["count"] == 3 and stored["metadata"]["resourceVersion"] == "3"


def client(server):
    return k8s.ApiClient(k8s.Configuration(host=server.url_for("/").rstrip("/")))


def test_events_v1_sink_with_the_official_client(servers):
    v1, _, server = servers
    clock = kubevents.FakeClock(T0)
    b = kubevents.EventsBroadcaster(kubevents.EventsV1Sink(k8s.EventsV1Api(client(server))), clock=clock)
    b.start_recording_to_sink()
    record_three(b, clock)
    st = b.shutdown(timeout=10)
    check_requests(v1)
    assert (st["writes_ok"], st["write_errors"]) == (3, 0)


def test_events_v1_sink_classifies_server_errors(servers):
    v1, _, server = servers
    sink = kubevents.EventsV1Sink(k8s.EventsV1Api(client(server)))
    event = {"metadata": {"name": "e.1", "namespace": "web"}, "eventTime": "2023-11-14T22:13:21.000000Z"}
    assert sink.create(event)["metadata"]["resourceVersion"] == "1"
    with pytest.raises(k8s.ApiException) as conflict:
        sink.create(event)
    assert conflict.value.status == 409
    with pytest.raises(k8s.ApiException) as missing:
        sink.patch(dict(event, metadata={"name": "nope", "namespace": "web"}), b'{"series":{"count":2}}')
    assert missing.value.status == 404
    with pytest.raises(ValueError, match="can't create an event with empty namespace"):
        sink.create({"metadata": {"name": "e.2"}})


def test_server_errors_through_the_broadcaster(servers):
    v1, _, server = servers
    clock = kubevents.FakeClock(T0)
    b = kubevents.EventsBroadcaster(kubevents.EventsV1Sink(k8s.EventsV1Api(client(server))), clock=clock)
    b.start_recording_to_sink()
    v1.fail_next(503)
    record_three(b, clock)
    # The create met a 503, to be retried 10-12.5 s later on the clock. Meanwhile the series patch found
    # nothing (404) and created the event with its series; the third occurrence was only counted.
    assert [r.method for r in v1.requests] == ["POST", "PATCH", "POST"]
    clock.step(12.5)
    b.wait_idle()
    # The retried plain create conflicts (409) and is given up; shutdown writes the count 3.
    st = b.shutdown(timeout=10)
    assert [r.method for r in v1.requests] == ["POST", "PATCH", "POST", "POST", "PATCH"]
    assert v1.events[("web", NAME)]["series"]["count"] == 3
    assert (st["retries"], st["pending_retries"]) == (1, 0)


def test_async_events_v1_sink_with_the_asyncio_client(servers):
    v1, _, server = servers
    clock = kubevents.FakeClock(T0)

    async def main():
        host = server.url_for("/").rstrip("/")
        async with k8s_asyncio.ApiClient(k8s_asyncio.Configuration(host=host)) as api_client:
            sink = kubevents.AsyncEventsV1Sink(k8s_asyncio.EventsV1Api(api_client))
            b = kubevents.EventsBroadcaster(sink, clock=clock)
            b.start_recording_to_sink()
            await asyncio.to_thread(record_three, b, clock)
            return await asyncio.to_thread(b.shutdown, 10)

    st = asyncio.run(main())
    check_requests(v1)
    assert (st["writes_ok"], st["write_errors"]) == (3, 0)


@pytest.mark.parametrize("serves_v1", [True, False])
def test_adapter_records_through_events_v1_when_served_else_core_v1(servers, serves_v1):
    v1, core, server = servers
    if serves_v1:
        server.expect_request(V1 + "/").respond_with_json(DISCOVERY)
    clock = kubevents.FakeClock(T0)
    adapter = kubevents.new_event_broadcaster_adapter(client(server), clock=clock)
    assert (adapter.events_v1 is not None) == serves_v1
    adapter.start_recording_to_sink()
    rec = adapter.new_recorder("ctl")
    rec.eventf(POD, None, "Normal", "Synced", "Sync", "synced %s", "api-0")
    adapter.shutdown(timeout=10)
    if serves_v1:
        assert core.requests == [] and [r.method for r in v1.requests] == ["POST"]
        body = v1.requests[0].body
        assert (body["reportingController"], body["action"], body["note"]) == ("ctl", "Sync", "synced api-0")
    else:
        assert v1.requests == [] and [r.method for r in core.requests] == ["POST"]
        body = core.requests[0].body
        assert (body["source"]["component"], body["message"]) == ("ctl", "synced api-0")
        assert body["involvedObject"]["name"] == "api-0"


def test_adapter_shuts_down_from_another_thread(servers):
    _, _, server = servers
    server.expect_request(V1 + "/").respond_with_json(DISCOVERY)
    adapter = kubevents.new_event_broadcaster_adapter(client(server))
    adapter.start_recording_to_sink()
    t = threading.Thread(target=adapter.shutdown, args=(10,))
    t.start()
    t.join(10)
    assert not t.is_alive()
