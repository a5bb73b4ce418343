"""The events.k8s.io/v1 sinks for the official clients, and the broadcaster adapter, against a local
HTTP server that answers as the API server does."""

import asyncio
import threading

import pytest

import kubevents
from events_v1_server import FakeApiServer

k8s = pytest.importorskip("kubernetes.client")
k8s_asyncio = pytest.importorskip("kubernetes_asyncio.client")

T0 = 1_700_000_000
V1 = "/apis/events.k8s.io/v1"
POD = {"kind": "Pod", "namespace": "web", "name": "api-0", "uid": "u1", "apiVersion": "v1"}
NAME = f"api-0.{(T0 + 1) * 10**9:x}"


def record_three(b, clock):
    rec = b.new_recorder("ctl", "ctl-1")
    for i in range(3):
        clock.step(1)
        rec.eventf(POD, None, "Warning", "BackOff", "Restarting", "Back-off %d", i)
        b.wait_idle()


def check_requests(srv):
    writes = [(m, path, ctype, body) for m, path, ctype, body in srv.requests if m != "GET"]
    assert [(m, path, ctype) for m, path, ctype, _ in writes] == [
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
    stored = srv.events[(V1, "web", NAME)]
    assert stored["series"]["count"] == 3 and stored["metadata"]["resourceVersion"] == "3"


def test_events_v1_sink_with_the_official_client():
    with FakeApiServer() as srv:
        clock = kubevents.FakeClock(T0)
        api = k8s.EventsV1Api(k8s.ApiClient(k8s.Configuration(host=srv.url)))
        b = kubevents.EventsBroadcaster(kubevents.EventsV1Sink(api), clock=clock)
        b.start_recording_to_sink()
        record_three(b, clock)
        st = b.shutdown(timeout=10)
        check_requests(srv)
        assert (st["writes_ok"], st["write_errors"]) == (3, 0)


def test_events_v1_sink_classifies_server_errors():
    with FakeApiServer() as srv:
        sink = kubevents.EventsV1Sink(k8s.EventsV1Api(k8s.ApiClient(k8s.Configuration(host=srv.url))))
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


def test_async_events_v1_sink_with_the_asyncio_client():
    with FakeApiServer() as srv:
        clock = kubevents.FakeClock(T0)

        async def main():
            async with k8s_asyncio.ApiClient(k8s_asyncio.Configuration(host=srv.url)) as client:
                b = kubevents.EventsBroadcaster(kubevents.AsyncEventsV1Sink(k8s_asyncio.EventsV1Api(client)), clock=clock)
                b.start_recording_to_sink()
                await asyncio.to_thread(record_three, b, clock)
                return await asyncio.to_thread(b.shutdown, 10)

        st = asyncio.run(main())
        check_requests(srv)
        assert (st["writes_ok"], st["write_errors"]) == (3, 0)


@pytest.mark.parametrize("serves_v1", [True, False])
def test_adapter_records_through_events_v1_when_served_else_core_v1(serves_v1):
    with FakeApiServer(serve_events_v1=serves_v1) as srv:
        clock = kubevents.FakeClock(T0)
        adapter = kubevents.new_event_broadcaster_adapter(k8s.ApiClient(k8s.Configuration(host=srv.url)), clock=clock)
        assert (adapter.events_v1 is not None) == serves_v1
        adapter.start_recording_to_sink()
        rec = adapter.new_recorder("ctl")
        rec.eventf(POD, None, "Normal", "Synced", "Sync", "synced %s", "api-0")
        adapter.shutdown(timeout=10)
        assert srv.requests[0][:2] == ("GET", V1 + "/")
        posts = [(path, body) for m, path, _, body in srv.requests if m == "POST"]
        assert len(posts) == 1
        path, body = posts[0]
        if serves_v1:
            assert path == f"{V1}/namespaces/web/events"
            assert (body["reportingController"], body["action"], body["note"]) == ("ctl", "Sync", "synced api-0")
        else:
            assert path == "/api/v1/namespaces/web/events"
            assert (body["source"]["component"], body["message"]) == ("ctl", "synced api-0")
            assert body["involvedObject"]["name"] == "api-0"


def test_adapter_shuts_down_on_a_thread_of_its_own():
    # Shutdown from another thread than the one that made the adapter (a signal handler, a finalizer).
    with FakeApiServer() as srv:
        adapter = kubevents.new_event_broadcaster_adapter(k8s.ApiClient(k8s.Configuration(host=srv.url)))
        adapter.start_recording_to_sink()
        t = threading.Thread(target=adapter.shutdown, args=(10,))
        t.start()
        t.join(10)
        assert not t.is_alive()
