"""The events.k8s.io/v1 sinks for the official clients, and the broadcaster adapter, against a local
HTTP server that answers as the API server does (the recording pipeline's ``FakeApiServer``)."""

import asyncio
import re
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
    b = kubevents.EventsBroadcaster(clock=clock)
    b.start_recording_to_sink(kubevents.EventsV1Sink(k8s.EventsV1Api(client(server))))
    record_three(b, clock)
    st = b.shutdown(timeout=10)
    check_requests(v1)
    assert (st["writes_ok"], st["write_errors"]) == (3, 0)


def test_events_v1_sink_classifies_server_errors(servers):
    v1, _, server = servers
    sink = kubevents.EventsV1Sink(k8s.EventsV1Api(client(server)))
    event = {"metadata": {"name": "e.1", "namespace": "web"}, "eventTime": "2023-11-14T22:13:21.000000Z",
             "regarding": POD}
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
    b = kubevents.EventsBroadcaster(clock=clock)
    b.start_recording_to_sink(kubevents.EventsV1Sink(k8s.EventsV1Api(client(server))))
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
            b = kubevents.EventsBroadcaster(clock=clock)
            b.start_recording_to_sink(sink)
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


# -- request timeouts --

from hung_apiserver_child import run_in_child  # noqa: E402


@pytest.mark.parametrize("scenario", ["events_v1", "events_v1_async"])
def test_a_server_that_never_answers_is_timed_out_and_retried(scenario):
    """The first two POSTs go unanswered: each times out after the sink's request_timeout and is retried on
    the clock, the third creates the event. Without a timeout the first write waits forever (child process)."""
    out = run_in_child(scenario)
    st = out["stats"]
    assert (st["retries"], st["writes_ok"], st["write_errors"], st["abandoned"]) == (2, 1, 2, 0)
    assert out["requests"] == ["POST"] * 3 and out["stored"] == 1


def test_the_adapter_times_out_an_unanswered_discovery():
    out = run_in_child("adapter")
    assert (out["stats"]["created"], out["stats"]["abandoned"]) == (1, 0)


class _RawClient:
    """The pydantic-based client's ApiClient, recording how ``call_api`` is called."""

    def __init__(self):
        self.calls = []

    def param_serialize(self, **kw):
        return kw["method"], "http://server" + kw["resource_path"].format(**kw["path_params"]), {}, kw["body"], None

    def call_api(self, method, url, header_params=None, body=None, post_params=None, _request_timeout=None):
        self.calls.append((method, url, _request_timeout))

        class Response:
            def read(self):
                pass

        return Response()

    def response_deserialize(self, response_data, response_types_map):
        class Answer:
            data = {"metadata": {"name": "e.1", "namespace": "web"}}

        return Answer()


class _Api:
    def __init__(self, api_client):
        self.api_client = api_client


EVENT = {"metadata": {"name": "e.1", "namespace": "web"}, "eventTime": "2023-11-14T22:13:21.000000Z"}


def test_events_v1_sink_passes_the_timeout_to_call_api():
    raw = _RawClient()
    sink = kubevents.EventsV1Sink(_Api(raw))
    assert sink.request_timeout == 30.0
    sink.create(EVENT)
    kubevents.EventsV1Sink(_Api(raw), request_timeout=1.5).patch(EVENT, b'{"series":{"count":2}}')
    assert raw.calls == [("POST", f"http://server{V1}/namespaces/web/events", 30.0),
                         ("PATCH", f"http://server{V1}/namespaces/web/events/e.1", 1.5)]


class _Typed:
    """An EventsV1Api of the older clients (no param_serialize), plain or async, recording the kwargs."""

    def __init__(self, is_async=False):
        self.calls, self.is_async = [], is_async
        self.api_client = self

    def sanitize_for_serialization(self, obj):
        return obj

    def _answer(self, call):
        self.calls.append(call)
        if not self.is_async:
            return {}

        async def answer():
            return {}

        return answer()

    def create_namespaced_event(self, namespace, body, **kw):
        return self._answer(("create", namespace, kw))

    def patch_namespaced_event(self, name, namespace, body, **kw):
        return self._answer(("patch", namespace, name, kw))


def _call(result):
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


@pytest.mark.parametrize("sink_class", [kubevents.EventsV1Sink, kubevents.AsyncEventsV1Sink])
def test_typed_calls_carry_the_timeout(sink_class):
    api = _Typed(is_async=sink_class is kubevents.AsyncEventsV1Sink)
    sink = sink_class(api, request_timeout=4)
    _call(sink.create(EVENT))
    _call(sink.patch(EVENT, b'{"series":{"count":2}}'))
    assert [c[-1]["_request_timeout"] for c in api.calls] == [4.0, 4.0]


@pytest.mark.parametrize("value, exc", [(None, TypeError), ("1", TypeError), (0, ValueError), (-2, ValueError),
                                        (float("nan"), ValueError), (float("inf"), ValueError)])
@pytest.mark.parametrize("make", [lambda t: kubevents.EventsV1Sink(_Api(_RawClient()), request_timeout=t),
                                  lambda t: kubevents.AsyncEventsV1Sink(_Typed(), request_timeout=t),
                                  lambda t: kubevents.new_event_broadcaster_adapter(None, request_timeout=t)],
                         ids=["EventsV1Sink", "AsyncEventsV1Sink", "adapter"])
def test_a_bad_request_timeout_is_refused(make, value, exc):
    with pytest.raises(exc, match="^request_timeout"):
        make(value)


# -- namespaces and names that cannot be path segments --


@pytest.mark.parametrize("value, why", [(".", "[may not be '.']"), ("..", "[may not be '..']"),
                                        ("a/b", "[may not contain '/']"), ("50%", "[may not contain '%']")])
@pytest.mark.parametrize("sink_class", [kubevents.EventsV1Sink, kubevents.AsyncEventsV1Sink])
def test_a_namespace_or_name_that_is_no_path_segment_is_refused(sink_class, value, why):
    """client-go's Request.Namespace and Request.Name refuse them; the clients would send the request
    elsewhere. Nothing reaches the client."""
    api = _Typed(is_async=sink_class is kubevents.AsyncEventsV1Sink)
    raw = _RawClient()
    for sink in (sink_class(api), sink_class(_Api(raw))):
        bad_ns = {"metadata": {"name": "e.1", "namespace": value}}
        with pytest.raises(ValueError, match=re.escape(f'invalid namespace "{value}": {why}')):
            _call(sink.create(bad_ns))
        with pytest.raises(ValueError, match=re.escape(f'invalid namespace "{value}": {why}')):
            _call(sink.patch(bad_ns, b"{}"))
        with pytest.raises(ValueError, match=re.escape(f'invalid resource name "{value}": {why}')):
            _call(sink.patch({"metadata": {"name": value, "namespace": "web"}}, b"{}"))
    with pytest.raises(ValueError, match="resource name may not be empty"):
        _call(sink_class(api).patch({"metadata": {"namespace": "web"}}, b"{}"))
    assert api.calls == [] and raw.calls == []


def test_a_bad_namespace_is_abandoned_by_the_broadcaster():
    sink = kubevents.sinks.MemorySink()
    b = kubevents.EventsBroadcaster(clock=kubevents.FakeClock(T0))
    b.start_recording_to_sink(sink)
    b.new_recorder("ctl", "ctl-1").eventf(dict(POD, namespace=".."), None, "Normal", "Synced", "Sync", "synced")
    st = b.shutdown(timeout=10)
    # Refused once and not retried, as the server's "will not retry" answers.
    assert (st["write_errors"], st["retries"], st["pending_retries"], st["writes_ok"], len(sink)) == (1, 0, 0, 0, 0)
