"""The ready sinks: MemorySink, and the official clients' sinks against a local server that plays the
events endpoints (asserting the real requests), end to end from a Python object."""

import asyncio
import json
import re
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


# -- request timeouts --


class _RecordingApi:
    """A CoreV1Api/EventsV1Api stand-in that records the keyword arguments of each call."""

    def __init__(self, answer=None):
        self.calls = []
        self.answer = answer
        self.api_client = self

    def sanitize_for_serialization(self, obj):
        return obj

    def create_namespaced_event(self, namespace, body, **kwargs):
        self.calls.append(("create", namespace, kwargs))
        return dict(body)

    def patch_namespaced_event(self, name, namespace, body, **kwargs):
        self.calls.append(("patch", namespace, name, kwargs))
        return {"metadata": {"name": name, "namespace": namespace}}


class _AsyncRecordingApi(_RecordingApi):
    async def create_namespaced_event(self, namespace, body, **kwargs):
        return super().create_namespaced_event(namespace, body, **kwargs)

    async def patch_namespaced_event(self, name, namespace, body, **kwargs):
        return super().patch_namespaced_event(name, namespace, body, **kwargs)


def _both_calls(sink):
    calls = [sink.create(an_event()), sink.patch(an_event(count=2), b'{"count":2}')]
    if asyncio.iscoroutine(calls[0]):
        async def both():
            return [await c for c in calls]
        asyncio.run(both())
    return sink.api.calls


@pytest.mark.parametrize("sink_class, api_class", [(CoreV1Sink, _RecordingApi), (AsyncCoreV1Sink, _AsyncRecordingApi)])
def test_core_v1_sinks_pass_a_request_timeout_on_every_call(sink_class, api_class):
    assert kubevents.sinks.DEFAULT_REQUEST_TIMEOUT == 30.0
    create, patch = _both_calls(sink_class(api_class()))
    assert create[-1]["_request_timeout"] == patch[-1]["_request_timeout"] == 30.0
    assert patch[-1]["_content_type"] == STRATEGIC_MERGE_PATCH
    create, patch = _both_calls(sink_class(api_class(), request_timeout=2))
    assert create[-1]["_request_timeout"] == patch[-1]["_request_timeout"] == 2.0
    assert isinstance(create[-1]["_request_timeout"], float)


BAD_TIMEOUTS = [
    (None, TypeError, "^request_timeout: expected seconds or a timedelta, got NoneType$"),
    ("30", TypeError, "got str"),
    (True, TypeError, "got bool"),
    ((1, 2), TypeError, "got tuple"),
    (0, ValueError, "^request_timeout must be > 0 seconds, got 0$"),
    (-1.5, ValueError, "got -1.5"),
    (1e9 + 1, ValueError, "^request_timeout must be <= 1000000000 seconds, got 1000000001$"),
    (float("nan"), ValueError, "^request_timeout: NaN s is not a finite duration$"),
    (float("inf"), ValueError, "inf s is not a finite duration"),
    (10**400, ValueError, "an int beyond a float's range is not a finite duration"),
]


@pytest.mark.parametrize("value, exc, match", BAD_TIMEOUTS)
@pytest.mark.parametrize("sink_class", [CoreV1Sink, AsyncCoreV1Sink])
def test_a_bad_request_timeout_is_refused(sink_class, value, exc, match):
    with pytest.raises(exc, match=match):
        sink_class(_RecordingApi(), request_timeout=value)


@pytest.mark.parametrize("scenario", ["core_v1", "core_v1_async"])
def test_a_server_that_never_answers_is_timed_out_and_retried(scenario):
    """The server leaves the first two POSTs unanswered: each times out after the sink's request_timeout and
    is retried (a read timeout is neither a ValueError nor a TypeError, which would abandon the event); the
    third is answered. Without a timeout the first write waits forever (run in a child process)."""
    pytest.importorskip("kubernetes_asyncio.client")
    from hung_apiserver_child import run_in_child

    out = run_in_child(scenario)
    st = out["stats"]
    assert (st["retries"], st["created"], st["abandoned"], st["pending"]) == (2, 1, 0, 0)
    assert out["requests"] == ["POST"] * 3 and out["stored"] == 1


# -- namespaces and names that cannot be path segments --

BAD_SEGMENTS = [
    (".", "[may not be '.']"),
    ("..", "[may not be '..']"),
    ("a/b", "[may not contain '/']"),
    ("a%2Fb", "[may not contain '%']"),
    ("/%", "[may not contain '/' may not contain '%']"),
]


def _with(namespace=None, name=None):
    ev = an_event()
    if namespace is not None:
        ev["metadata"]["namespace"] = namespace
    if name is not None:
        ev["metadata"]["name"] = name
    return ev


def _run(result):
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


@pytest.mark.parametrize("value, why", BAD_SEGMENTS)
@pytest.mark.parametrize("make_sink", [lambda: CoreV1Sink(_RecordingApi()), lambda: AsyncCoreV1Sink(_AsyncRecordingApi()),
                                       MemorySink], ids=["CoreV1Sink", "AsyncCoreV1Sink", "MemorySink"])
def test_a_namespace_or_name_that_is_no_path_segment_is_refused(make_sink, value, why):
    """As client-go's Request.Namespace and Request.Name refuse them; the official clients would send the
    request elsewhere (a namespace ".." makes the POST go to /api/v1/events)."""
    sink = make_sink()
    quoted = json.dumps(value)
    with pytest.raises(ValueError, match=re.escape(f"invalid namespace {quoted}: {why}")):
        _run(sink.create(_with(namespace=value)))
    with pytest.raises(ValueError, match=re.escape(f"invalid namespace {quoted}: {why}")):
        _run(sink.patch(_with(namespace=value), b'{"count":2}'))
    with pytest.raises(ValueError, match=re.escape(f"invalid resource name {quoted}: {why}")):
        _run(sink.patch(_with(name=value), b'{"count":2}'))
    # Namespace first, as client-go builds the request.
    with pytest.raises(ValueError, match="invalid namespace"):
        _run(sink.patch(_with(namespace=value, name=value), b'{"count":2}'))
    assert getattr(sink, "api", None) is None or sink.api.calls == []


def test_memory_sink_answers_a_bad_created_name_as_the_api_server():
    """A create carries the name in its body, not its path: the server refuses it (422 Invalid), which the
    broadcaster does not retry either."""
    sink = MemorySink()
    with pytest.raises(ApiError) as e:
        sink.create(_with(name="a/b"))
    assert e.value.status == 422 and e.value.reason == "Invalid"
    assert "metadata.name: Invalid value: \"a/b\": may not contain '/'" in str(e.value)
    assert sink.create(_with(name="a.b"))["metadata"]["name"] == "a.b"  # dots are fine inside a name


def test_a_bad_namespace_is_abandoned_not_retried():
    sink = MemorySink()
    pod = dict(POD, namespace="..")
    with kubevents.Broadcaster(clock=kubevents.FakeClock(START), sleep_duration=0) as b:
        b.start_recording_to_sink(sink)
        b.new_recorder("ctl").event(pod, "Normal", "Started", "started")
    st = b.stats()
    assert (st["abandoned"], st["retries"], st["created"]) == (1, 0, 0)
    assert len(sink) == 0


def _aiohttp():
    return pytest.importorskip("aiohttp")


def _urllib3():
    return pytest.importorskip("urllib3").exceptions


# What the clients raise when a request times out: none is a ValueError (which would abandon the event);
# aiohttp's are OSErrors, through TimeoutError.
TIMEOUT_ERRORS = {
    "urllib3.ReadTimeoutError": lambda: _urllib3().ReadTimeoutError(None, "/api/v1/events", "Read timed out."),
    "urllib3.ConnectTimeoutError": lambda: _urllib3().ConnectTimeoutError("connect timed out"),
    "TimeoutError": TimeoutError,
    "aiohttp.ServerTimeoutError": lambda: _aiohttp().ServerTimeoutError("Timeout on reading data from socket"),
    "aiohttp.ConnectionTimeoutError": lambda: _aiohttp().ConnectionTimeoutError("Connection timeout"),
}


@pytest.mark.parametrize("make_error", TIMEOUT_ERRORS.values(), ids=TIMEOUT_ERRORS)
def test_request_timeouts_are_retried(make_error):
    error = make_error()

    class TimesOutTwice(MemorySink):
        calls = 0

        def create(self, event):
            self.calls += 1
            if self.calls <= 2:
                raise error
            return super().create(event)

    sink = TimesOutTwice()
    with kubevents.Broadcaster(clock=kubevents.FakeClock(START), sleep_duration=0) as b:
        b.start_recording_to_sink(sink)
        b.new_recorder("ctl").event(POD, "Warning", "BackOff", "m")
        assert b.wait_idle(10)
    st = b.stats()
    assert (st["retries"], st["created"], st["abandoned"], len(sink)) == (2, 1, 0, 1)

    v1_sink = TimesOutTwice()
    clock = kubevents.FakeClock(START)
    v1 = kubevents.EventsBroadcaster(clock=clock)
    v1.start_recording_to_sink(v1_sink)
    v1.new_recorder("ctl", "ctl-1").eventf(POD, None, "Warning", "BackOff", "Restarting", "m")
    for _ in range(3):
        assert v1.wait_idle(10)
        clock.step(12.5)
    st = v1.shutdown(timeout=10)
    assert (st["retries"], st["writes_ok"], st["abandoned"], len(v1_sink)) == (2, 1, 0, 1)


# -- API errors: the Status body, and the log line made of it --


def test_api_error_carries_the_status_body_the_server_sends():
    e = ApiError(409, "AlreadyExists", 'events "x" already exists', {"name": "x", "kind": "events"})
    assert (e.status, e.reason) == (409, "AlreadyExists")
    assert e.body == ('{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"events \\"x\\" '
                      'already exists","reason":"AlreadyExists","details":{"name":"x","kind":"events"},"code":409}')


class _ClientError(Exception):
    """What the official clients raise: the status, and the response body as text."""

    def __init__(self, status, body):
        super().__init__(f"({status})\nReason: Refused\nHTTP response headers: ...\nHTTP response body: {body}\n")
        self.status, self.body = status, body


@pytest.mark.parametrize("body, logged", [
    ('{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"events is forbidden: no",'
     '"reason":"Forbidden","code":403}', "HTTP 403: Forbidden: events is forbidden: no; "),
    # Not a Status (a proxy's page): the exception's own text.
    ("<html>denied</html>", "HTTP 403: _ClientError: (403)\nReason: Refused"),
])
def test_a_refusal_is_logged_with_the_status_the_server_sent(body, logged, caplog):
    class Refusing(MemorySink):
        def create(self, event):
            raise _ClientError(403, body)

    with kubevents.Broadcaster(clock=kubevents.FakeClock(START)) as b:
        b.start_recording_to_sink(Refusing())
        b.new_recorder("ctl").event(POD, "Warning", "BackOff", "m")
    [line] = [r.getMessage() for r in caplog.records if "failed to write an event" in r.getMessage()]
    assert line.startswith(f"kubevents: sink {b.name}/sink-1 (Refusing) failed to write an event: {logged}")
    assert "the event is given up (rejected (HTTP 403)): Pod " in line
