"""events.k8s.io/v1 recording: ports of client-go's tools/events tests, the series timers on a FakeClock,
kubevents' own guarantees (bounded cache, shutdown flush, note limit), and the bad-input rules."""

import asyncio
import doctest
import json
import logging
import threading
import uuid
from datetime import datetime, timezone

import pytest

import kubevents
import kubevents.events_v1
from kubevents.sinks import ApiError, MemorySink

T0 = 1_704_067_200  # 2024-01-01T00:00:00Z
POD = {"kind": "Pod", "namespace": "baz", "name": "foo", "uid": "bar", "apiVersion": "v1",
       "fieldPath": ".spec.containers[1]"}
RELATED = dict(POD, fieldPath=".spec.containers[0]")


class TimedSink(MemorySink):
    """A memory sink that also logs every call as (verb, name, JSON body: the event or the patch) with the fake
    time it happened at ("minutes:seconds" after T0), and raises the exceptions in ``fail`` first."""

    def __init__(self, clock):
        super().__init__()
        self.clock = clock
        self.at = []
        self.calls = []
        self.fail = []

    def _note(self, verb, event, body):
        s = self.clock.now_ns() // 1_000_000_000 - T0
        self.at.append(f"{s // 60}:{s % 60:02d}")
        self.calls.append((verb, event["metadata"]["name"], body))
        if self.fail:
            raise self.fail.pop(0)

    def create(self, event):
        self._note("create", event, json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode())
        return super().create(event)

    def patch(self, event, patch):
        self._note("patch", event, bytes(patch))
        return super().patch(event, patch)


@pytest.fixture
def setup():
    clock = kubevents.FakeClock(T0)
    sink = TimedSink(clock)
    b = kubevents.EventsBroadcaster(clock=clock)
    b.start_recording_to_sink(sink)
    yield clock, sink, b, b.new_recorder("eventTest", "eventTest-host")
    b.shutdown(timeout=10)


def micro(offset):
    return datetime.fromtimestamp(T0 + offset, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def series(count, at):
    return f'{{"series":{{"count":{count},"lastObservedTime":"{micro(at)}"}}}}'.encode()


def test_module_docstring_example():
    assert doctest.testmod(kubevents.events_v1).failed == 0


# TestEventf (event_recorder_test.go), at FakeClock 2023-01-01T12:00:00Z.
def test_eventf_builds_the_event_client_go_builds():
    clock = kubevents.FakeClock(datetime(2023, 1, 1, 12, tzinfo=timezone.utc))
    b = kubevents.EventsBroadcaster(clock=clock)
    seen = []
    b.start_event_watcher(seen.append)
    rec = b.new_recorder("c1", "i1")
    pod = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "pod1", "namespace": "ns1", "uid": "12345"}}
    node = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "node1", "uid": "67890"}}
    rec.eventf(pod, None, "Normal", "Started", "starting", "Pod started")
    rec.eventf(pod, node, "Warning", "FailedScheduling", "scheduling", "Pod failed to schedule on %s: %s",
               "node1", "not enough resources")
    ip = {"kind": "IPAddress", "apiVersion": "networking.k8s.io/v1", "metadata": {"name": "2001:db8::123"}}
    rec.eventf(ip, None, "Normal", "Allocated", "allocate", "IP allocated")
    long_pod = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "x" * 253 * 4, "namespace": "ns1"}}
    rec.eventf(long_pod, None, "Normal", "Started", "starting", "Pod started")
    b.shutdown(timeout=10)
    first, failed, cluster, long_name = seen
    assert first["metadata"] == {"name": "pod1.17362d8e1c698000", "namespace": "ns1"}
    assert first["regarding"] == {"kind": "Pod", "name": "pod1", "namespace": "ns1", "uid": "12345", "apiVersion": "v1"}
    assert (first["type"], first["reason"], first["action"], first["note"]) == ("Normal", "Started", "starting", "Pod started")
    assert (first["reportingController"], first["reportingInstance"]) == ("c1", "i1")
    assert first["eventTime"] == "2023-01-01T12:00:00.000000Z"
    assert "series" not in first and "related" not in first
    assert failed["note"] == "Pod failed to schedule on node1: not enough resources"
    assert failed["related"] == {"kind": "Node", "name": "node1", "uid": "67890", "apiVersion": "v1"}
    assert failed["type"] == "Warning"
    assert cluster["metadata"]["namespace"] == "default"
    uuid.UUID(cluster["metadata"]["name"])
    assert long_name["metadata"]["namespace"] == "ns1"
    uuid.UUID(long_name["metadata"]["name"])


# TestEventSeriesf
def test_event_seriesf(setup):
    clock, sink, b, rec = setup
    rec.eventf(POD, RELATED, "Normal", "test", "started", "some verbose message: %d", 1)
    assert b.wait_idle()
    clock.step(1)
    rec.eventf(POD, RELATED, "Normal", "test", "started", "some verbose message: %d", 1)
    rec.eventf(POD, RELATED, "Normal", "test", "stopped", "some verbose message: %d", 1)
    assert b.wait_idle()
    verbs = [(verb, name.startswith("foo.")) for verb, name, _ in sink.calls]
    assert verbs == [("create", True), ("patch", True), ("create", True)]
    assert sink.calls[0][1] == sink.calls[1][1]
    assert sink.calls[1][2] == series(2, 1)
    assert b'"action":"stopped"' in sink.calls[2][2] and b"series" not in sink.calls[2][2]


# TestEventSeriesWithEventSinkImplRace: two identical events in a row leave one stored event with a series.
def test_two_identical_events_leave_one_event_with_a_series():
    sink = MemorySink()
    b = kubevents.EventsBroadcaster()
    b.start_recording_to_sink(sink)
    rec = b.new_recorder("c", "i")
    rec.eventf({"kind": "Pod", "name": "p"}, None, "Normal", "reason", "action", "")
    rec.eventf({"kind": "Pod", "name": "p"}, None, "Normal", "reason", "action", "")
    b.shutdown(timeout=10)
    stored = sink.events()
    assert len(stored) == 1
    assert stored[0]["metadata"]["namespace"] == "default" and stored[0]["series"]["count"] == 2


def drive(clock, b, rec, seconds, occurs):
    for s in range(seconds + 1):
        clock.set(T0 + s)
        b.wait_idle()
        if occurs(s):
            rec.eventf(POD, RELATED, "Normal", "test", "started", "note %d", s)
            b.wait_idle()


def test_a_series_over_forty_minutes_of_fake_time(setup):
    clock, sink, b, rec = setup

    def occurs(s):
        return s in (0, 1, 37 * 60, 38 * 60) or (s % 10 == 0 and s <= 29 * 60)

    drive(clock, b, rec, 40 * 60, occurs)
    writes = [(at, verb, body if verb == "patch" else body.split(b',"eventTime"')[0])
              for at, (verb, _, body) in zip(sink.at, sink.calls)]
    created = lambda at: b'{"metadata":{"name":"foo.%x","namespace":"baz"}' % ((T0 + at) * 10**9)  # noqa: E731
    assert writes == [
        ("0:00", "create", created(0)),
        ("0:01", "patch", series(2, 1)),
        # Every 30 minutes each live series is written: 2 + one occurrence every 10 s from 10 s to 29 min.
        ("30:00", "patch", series(176, 29 * 60)),
        # Quiet for more than 6 minutes at the 36-minute round: written a last time and forgotten.
        ("36:00", "patch", series(176, 29 * 60)),
        ("37:00", "create", created(37 * 60)),
        ("38:00", "patch", series(2, 38 * 60)),
    ]
    # The first note stays: the series patch carries only the series.
    assert sink.get("baz", f"foo.{T0 * 10**9:x}")["note"] == "note 0"
    st = b.stats()
    assert (st["finish_rounds"], st["refresh_rounds"], st["counted"]) == (7, 2, 174)


def test_last_observed_time_is_the_occurrence_time_not_the_processing_time(setup):
    clock, sink, b, rec = setup
    for _ in range(3):
        rec.eventf(POD, None, "Normal", "r", "a", "n")
        clock.step(7)
    b.wait_idle()
    assert sink.calls[1][2] == series(2, 7)
    b.shutdown(timeout=10)
    assert sink.calls[2][2] == series(3, 14)


# TestFinishSeries and TestRefreshExistingEventSeries through the broadcaster's timers.
def test_finish_forgets_singletons_and_refresh_keeps_series(setup):
    clock, sink, b, rec = setup
    rec.eventf(POD, None, "Normal", "once", "a", "n")
    rec.eventf(POD, None, "Normal", "twice", "a", "n")
    rec.eventf(POD, None, "Normal", "twice", "a", "n")
    b.wait_idle()
    assert b.stats()["cache_len"] == 2
    clock.step(6 * 60)
    b.wait_idle()
    # The 6-minute round ran at exactly 6 min: neither is older than 6 minutes yet.
    assert b.stats()["cache_len"] == 2
    clock.step(6 * 60)
    b.wait_idle()
    st = b.stats()
    assert (st["forgotten"], st["finish_writes"], st["cache_len"]) == (1, 1, 0)
    assert [v for v, _, _ in sink.calls] == ["create", "create", "patch", "patch"]


def test_refresh_writes_live_series_and_keeps_them(setup):
    clock, sink, b, rec = setup
    drive(clock, b, rec, 30 * 60, lambda s: s % 60 == 0)
    st = b.stats()
    assert (st["refresh_writes"], st["cache_len"]) == (1, 1)
    # The round at 30:00 runs before that second's occurrence.
    assert sink.calls[-1] == ("patch", f"foo.{T0 * 10**9:x}", series(30, 29 * 60))


def test_shutdown_writes_the_final_count_of_every_live_series(setup):
    clock, sink, b, rec = setup
    for reason, times in (("a", 5), ("b", 2), ("c", 1), ("d", 3)):
        for _ in range(times):
            clock.step(1)
            rec.eventf(POD, None, "Normal", reason, "act", "n")
    b.wait_idle()
    before = len(sink.calls)
    assert b.shutdown(timeout=10)["shutdown_writes"] == 2
    # "b" already has its count 2 on the server, "c" is no series.
    assert sink.calls[before:] == [
        ("patch", f"foo.{(T0 + 1) * 10**9:x}", series(5, 5)),
        ("patch", f"foo.{(T0 + 9) * 10**9:x}", series(3, 11)),
    ]
    # After shutdown events are dropped and counted.
    rec.eventf(POD, None, "Normal", "late", "act", "n")
    assert b.stats()["dropped_after_shutdown"] == 1


def test_an_evicted_live_series_is_written_on_its_way_out():
    clock = kubevents.FakeClock(T0)
    sink = TimedSink(clock)
    b = kubevents.EventsBroadcaster(clock=clock, cache_size=2)
    b.start_recording_to_sink(sink)
    rec = b.new_recorder("c", "i")
    for reason in ("a", "a", "a", "b", "c"):
        clock.step(1)
        rec.eventf(POD, None, "Normal", reason, "act", "n")
    b.wait_idle()
    # "c" pushes "a" (count 3, the server has 2) out: its count is written before "c" is created.
    assert [v for v, _, _ in sink.calls] == ["create", "patch", "create", "patch", "create"]
    assert sink.calls[3][2] == series(3, 3)
    st = b.stats()
    assert (st["evicted"], st["evicted_writes"], st["cache_len"]) == (1, 1, 2)
    b.shutdown(timeout=10)


def test_memory_stays_within_the_cache_bound():
    clock = kubevents.FakeClock(T0)
    b = kubevents.EventsBroadcaster(clock=clock, cache_size=100)
    b.start_recording_to_sink(NullSink())
    rec = b.new_recorder("c", "i")
    for i in range(5000):
        rec.eventf(dict(POD, name=f"p{i}"), None, "Normal", "r", "a", "n")
        if i % 500 == 0:
            b.wait_idle()
    b.wait_idle()
    st = b.stats()
    assert st["cache_len"] == 100
    assert st["first_occurrences"] + st["dropped_incoming"] + sum(st["dropped_watchers"].values()) == 5000
    b.shutdown(timeout=10)


class NullSink:
    def create(self, event):
        return None

    def patch(self, event, patch):
        return None


@pytest.mark.parametrize("char", ["é", "✓", "🚀"])
@pytest.mark.parametrize("pad", [0, 1, 2, 3])
def test_long_notes_are_cut_at_a_character_boundary(setup, char, pad):
    clock, sink, b, rec = setup
    note = "a" * pad + char * 1000
    rec.eventf(POD, None, "Normal", "r", "a", note)
    b.wait_idle()
    sent = sink.get("baz", f"foo.{T0 * 10**9:x}")["note"]
    raw = sent.encode()
    assert len(raw) <= 1024 and len(raw) > 1024 - 4 - len(char.encode())
    assert sent.endswith(" ...") and note.startswith(sent[:-4])
    assert b.stats()["truncated_notes"] == 1
    assert kubevents._native.truncate_note(note) == sent
    assert kubevents._native.truncate_note("x" * 1024) == "x" * 1024


def test_transient_failures_are_retried_on_the_clock(setup):
    clock, sink, b, rec = setup
    sink.fail = [ConnectionError("refused"), ConnectionError("refused")]
    rec.eventf(POD, None, "Normal", "r", "a", "n")
    b.wait_idle()
    assert len(sink.calls) == 1 and b.stats()["pending_retries"] == 1
    clock.step(9.999)
    b.wait_idle()
    assert len(sink.calls) == 1, "the retry sleep is at least 10 s"
    clock.step(2.501)
    b.wait_idle()
    assert len(sink.calls) == 2, "and at most 12.5 s"
    clock.step(12.5)
    b.wait_idle()
    assert len(sink.calls) == 3 and len(sink) == 1
    st = b.stats()
    assert (st["retries"], st["write_errors"], st["pending_retries"]) == (2, 2, 0)


def test_server_answers_are_not_retried_but_a_racing_series_create_is(setup):
    clock, sink, b, rec = setup
    sink.fail = [ApiError(422, "Invalid")]
    rec.eventf(POD, None, "Normal", "r", "a", "n")
    b.wait_idle()
    clock.step(60)
    b.wait_idle()
    assert len(sink.calls) == 1 and b.stats()["pending_retries"] == 0
    # The second occurrence: its patch finds nothing (404), the create races a first create (409): retried.
    sink.fail = [ApiError(404, "NotFound"), ApiError(409, "AlreadyExists")]
    rec.eventf(POD, None, "Normal", "r", "a", "n")
    b.wait_idle()
    assert [v for v, _, _ in sink.calls[1:]] == ["patch", "create"]
    clock.step(13)
    b.wait_idle()
    assert [v for v, _, _ in sink.calls[3:]] == ["patch", "create"]
    assert sink.get("baz", f"foo.{T0 * 10**9:x}")["series"]["count"] == 2
    # A plain create that conflicts is given up; 5xx and 429 are retried, as by the core/v1 pipeline.
    sink.fail = [ApiError(409, "AlreadyExists"), ApiError(503, "ServiceUnavailable")]
    rec.eventf(POD, None, "Normal", "other", "a", "n")
    rec.eventf(POD, None, "Normal", "third", "a", "n")
    b.wait_idle()
    assert b.stats()["pending_retries"] == 1


def test_watchers_and_logging(setup, caplog):
    clock, sink, b, rec = setup
    got = []
    watcher = b.start_event_watcher(got.append)
    with caplog.at_level(logging.INFO, logger="kubevents"):
        b.start_structured_logging()
        rec.eventf(POD, None, "Warning", "BackOff", "Restarting", "n1")
        assert b.wait_idle(10)
        # As a core/v1 watcher: what a stopped watcher had queued is discarded.
        watcher.stop()
        rec.eventf(POD, None, "Warning", "BackOff", "Restarting", "n2")
        b.shutdown(timeout=10)
    assert [e["note"] for e in got] == ["n1"]
    assert sum(b.stats()["dropped_watchers"].values()) == 0
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Event occurred")]
    assert len(logged) == 2
    assert logged[0] == (
        'Event occurred object="baz/foo" kind="Pod" apiVersion="v1" type="Warning" reason="BackOff" '
        'action="Restarting" note="n1"'
    )


def test_default_reporting_instance_is_controller_dash_hostname():
    import socket

    b = kubevents.EventsBroadcaster()
    assert b.new_recorder("ctl").reporting_instance == f"ctl-{socket.gethostname()}"
    b.shutdown()


def test_async_sink_methods_run_on_the_loop_that_started_recording():
    clock = kubevents.FakeClock(T0)
    calls = []

    class AsyncSink:
        async def create(self, event):
            calls.append((event["metadata"]["name"], threading.get_ident()))
            return event

        async def patch(self, event, patch):
            calls.append((patch, threading.get_ident()))
            return None

    async def main():
        b = kubevents.EventsBroadcaster(clock=clock)
        b.start_recording_to_sink(AsyncSink())
        rec = b.new_recorder("c", "i")
        rec.eventf(POD, None, "Normal", "r", "a", "n")
        rec.eventf(POD, None, "Normal", "r", "a", "n")
        await asyncio.to_thread(b.shutdown, 10)

    asyncio.run(main())
    me = threading.get_ident()
    assert calls == [(f"foo.{T0 * 10**9:x}", me), (series(2, 0), me)]


def test_async_with_shuts_down_off_the_loop_so_async_sink_calls_finish():
    clock = kubevents.FakeClock(T0)
    calls = []

    class AsyncSink:
        async def create(self, event):
            await asyncio.sleep(0)
            calls.append("create")
            return event

        async def patch(self, event, patch):
            calls.append(json.loads(patch)["series"]["count"])
            return None

    async def main():
        async with kubevents.EventsBroadcaster(clock=clock) as b:
            b.start_recording_to_sink(AsyncSink())
            rec = b.new_recorder("c", "i")
            for _ in range(3):
                rec.eventf(POD, None, "Normal", "r", "a", "n")
        return b.stats()

    stats = asyncio.run(main())
    # create, the series patch (count 2), and the final count written at shutdown (3)
    assert calls == ["create", 2, 3]
    assert (stats["writes_ok"], stats["shutdown_writes"], stats["pending"]) == (3, 1, 0)
    with pytest.raises(ValueError, match="call start_recording_to_sink from a coroutine"):
        kubevents.EventsBroadcaster(clock=clock).start_recording_to_sink(AsyncSink())


def test_bad_input_raises_with_a_message():
    b = kubevents.EventsBroadcaster()
    rec = b.new_recorder("c", "i")
    with pytest.raises(ValueError, match='type: must be "Normal" or "Warning", got "Info"'):
        rec.eventf(POD, None, "Info", "r", "a", "n")
    with pytest.raises(ValueError, match="regarding: cannot make an object reference of a NoneType"):
        rec.eventf(None, None, "Normal", "r", "a", "n")
    with pytest.raises(TypeError, match="regarding: name must be a str, got int"):
        rec.eventf(dict(POD, name=3), None, "Normal", "r", "a", "n")
    with pytest.raises(ValueError, match="related: cannot make an object reference of a int"):
        rec.eventf(POD, 7, "Normal", "r", "a", "n")
    with pytest.raises(TypeError, match="not enough arguments"):
        rec.eventf(POD, None, "Normal", "r", "a", "%s %s", 1)
    with pytest.raises(TypeError, match="note: expected str, got bytes"):
        rec.eventf(POD, None, "Normal", "r", "a", b"n")
    with pytest.raises(ValueError, match="cache_size must be >= 1, got 0"):
        kubevents.EventsBroadcaster(cache_size=0)
    with pytest.raises(ValueError, match="max_tries must be >= 1"):
        kubevents.EventsBroadcaster(max_tries=0)
    with pytest.raises(TypeError, match="sink: 'object' object has no create"):
        kubevents.EventsBroadcaster().start_recording_to_sink(object())
    with pytest.raises(TypeError, match="clock: expected an object with a now"):
        kubevents.EventsBroadcaster(clock=3)
    with pytest.raises(TypeError, match="reporting_controller: expected str"):
        b.new_recorder(None)
    b.start_recording_to_sink(NullSink())
    with pytest.raises(RuntimeError, match="already recording"):
        b.start_recording_to_sink(NullSink())
    b.shutdown(timeout=10)
    with pytest.raises(RuntimeError, match="shut down"):
        b.start_event_watcher(print)


def test_a_sink_calling_back_into_its_broadcaster_gets_an_error():
    errors = []

    class Reentrant(NullSink):
        def create(self, event):
            try:
                b.wait_idle()
            except RuntimeError as e:
                errors.append(str(e))

    b = kubevents.EventsBroadcaster()
    b.start_recording_to_sink(Reentrant())
    b.new_recorder("c", "i").eventf(POD, None, "Normal", "r", "a", "n")
    b.shutdown(timeout=10)
    assert errors == ["wait_idle() called from the sink, on the broadcaster's thread"]


def test_fake_events_recorder_formats_as_client_go():
    from kubevents.testing import FakeEventsRecorder

    plain = FakeEventsRecorder()
    plain.eventf(POD, None, "Warning", "BackOff", "Restarting", "restarting %s in %ds", "api", 10)
    verbose = FakeEventsRecorder(verbose=True)
    node = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n1"}}
    verbose.annotated_eventf(POD, node, {"b": "2", "a": "1"}, "Normal", "Scheduled", "Binding", "bound to %s", "n1")
    verbose.eventf(POD, None, "Normal", "Started", "Start", "100%")
    assert plain.events == ["Warning BackOff restarting api in 10s"]
    assert verbose.events == [
        "Normal Scheduled Binding bound to n1 {kind=Pod,apiVersion=v1} {kind=Node,apiVersion=v1} map[a:1 b:2]",
        "Normal Started Start 100% {kind=Pod,apiVersion=v1}",
    ]


_NODE = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n1"}}
BAD_EVENTS_RECORDER_CALLS = [
    ("eventf", (None, None, "Bogus", 42, "a", "n")),
    ("eventf", (POD, None, "Bogus", "r", "a", "n")),
    ("eventf", (POD, None, 3, "r", "a", "n")),
    ("eventf", (POD, None, "Normal", 42, "a", "n")),
    ("eventf", (POD, None, "Normal", "r", None, "n")),
    ("eventf", (POD, None, "Normal", "r", "a", 42)),
    ("eventf", (POD, None, "Normal", "r", "a", b"n")),
    ("eventf", (POD, None, "Normal", "r", "a", "n %d", "x")),
    ("eventf", (POD, None, "Normal", "r", "a", "n", 1)),
    ("eventf", (None, None, "Normal", "r", "a", "n")),
    ("eventf", ({}, None, "Normal", "r", "a", "n")),
    ("eventf", ({"kind": "Pod"}, None, "Normal", "r", "a", "n")),
    ("eventf", (POD, 42, "Normal", "r", "a", "n")),
    ("eventf", (POD, {"kind": "Node"}, "Normal", "r", "a", "n")),
    ("eventf", (None, None, "Normal", 1, "a", "n")),  # the reason is checked before the object
    ("annotated_eventf", (POD, None, {"a": 1}, "Normal", "r", "a", "n")),
    ("annotated_eventf", (POD, None, {1: "a"}, "Normal", "r", "a", "n")),
    ("annotated_eventf", (POD, None, [("a", 1)], "Normal", "r", "a", "n")),
    ("annotated_eventf", (POD, None, [1], "Normal", "r", "a", "n")),
    ("annotated_eventf", (POD, None, 5, "Normal", "r", "a", "n")),
    ("annotated_eventf", (POD, None, {"a": "b"}, "Bogus", "r", "a", "n")),
    ("annotated_eventf", (POD, _NODE, [1], "Normal", "r", "a", "n %d", "x")),
]


@pytest.mark.parametrize("method, args", BAD_EVENTS_RECORDER_CALLS)
def test_fake_events_recorder_refuses_what_the_recorder_refuses(method, args):
    from kubevents.testing import FakeEventsRecorder

    def failure(call):
        try:
            call()
        except Exception as e:
            return type(e), str(e)
        return None

    b = kubevents.EventsBroadcaster(clock=kubevents.FakeClock(T0))
    b.start_recording_to_sink(MemorySink())
    real = failure(lambda: getattr(b.new_recorder("c", "i"), method)(*args))
    b.shutdown(timeout=10)
    assert real is not None
    for fake in (FakeEventsRecorder(), FakeEventsRecorder(verbose=True)):
        assert failure(lambda: getattr(fake, method)(*args)) == real
        assert fake.events == []


def test_stats_while_an_async_write_is_in_flight_does_not_deadlock():
    started = threading.Event()

    class SlowAsyncSink:
        async def create(self, event):
            started.set()
            await asyncio.sleep(0.05)
            return None

        async def patch(self, event, patch):
            return None

    async def main():
        b = kubevents.EventsBroadcaster(clock=kubevents.FakeClock(T0))
        b.start_recording_to_sink(SlowAsyncSink())
        b.new_recorder("c", "i").eventf(POD, None, "Normal", "r", "a", "n")
        seen = []

        def poll():
            started.wait(5)
            seen.append(b.stats()["observed"])

        t = threading.Thread(target=poll, daemon=True)
        t.start()
        await asyncio.to_thread(t.join, 5)
        assert not t.is_alive() and seen == [1]
        return await asyncio.to_thread(b.shutdown, 10)

    assert asyncio.run(main())["writes_ok"] == 1


def test_a_slow_watcher_drops_beyond_its_queue_and_counts_it():
    release, busy = threading.Event(), threading.Event()
    got = []

    def slow(event):
        busy.set()
        release.wait(10)
        got.append(event)

    b = kubevents.EventsBroadcaster(clock=kubevents.FakeClock(T0))
    b.start_event_watcher(slow)
    rec = b.new_recorder("c", "i")
    rec.eventf(POD, None, "Normal", "r", "a", "n")
    assert busy.wait(10)
    for _ in range(1099):
        rec.eventf(POD, None, "Normal", "r", "a", "n")
    # One event is with the callback, 1000 wait in the queue, the other 99 were dropped.
    assert b.stats()["dropped_watchers"] == {"watcher-1": 99}
    release.set()
    assert b.shutdown(timeout=10)["dropped_watchers"] == {"watcher-1": 99}
    assert len(got) == 1001


@pytest.mark.parametrize(
    "args, message",
    [
        (("Normal", 5, "a", "n"), "reason: expected str, got int"),
        (("Normal", "r", None, "n"), "action: expected str, got NoneType"),
        ((5, "r", "a", "n"), "type: expected str, got int"),
        (("Normal", "r", "a", 42), "note: expected str, got int"),
    ],
)
def test_an_argument_of_the_wrong_type_is_named(args, message):
    b = kubevents.EventsBroadcaster(clock=kubevents.FakeClock(T0))
    with pytest.raises(TypeError) as info:
        b.new_recorder("c", "i").eventf(POD, None, *args)
    b.shutdown(timeout=10)
    assert str(info.value) == message


@pytest.mark.parametrize("run", range(5))
def test_occurrences_come_before_the_rounds_due_after_them_whatever_the_threads_do(run):
    # A clock stepped past the 30-minute refresh right after a recorder call, with no wait_idle between: the
    # refresh still counts that call's occurrence (it used to run first, when the engine thread was late).
    clock = kubevents.FakeClock(T0)
    sink = MemorySink()
    b = kubevents.EventsBroadcaster(clock=clock)
    b.start_recording_to_sink(sink)
    rec = b.new_recorder("c", "i")
    for _ in range(40):
        rec.eventf(POD, None, "Warning", "BackOff", "Restart", "m")
        clock.step(60)
    assert b.wait_idle(30)
    b.shutdown(timeout=30)
    counts = [(verb, (e.get("series") or {}).get("count")) for verb, e in sink.writes]
    # The first occurrence, the series patch, the refresh at 30 minutes, the final count at shutdown.
    assert counts == [("create", None), ("patch", 2), ("patch", 30), ("patch", 40)]
