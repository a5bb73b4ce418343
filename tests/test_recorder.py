"""Ports of client-go's tools/record/event_test.go, and the recorder's own API: formatting, validation,
object references, FakeRecorder."""

import json
import logging
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone

import pytest

import kubevents
from kubevents.sinks import ApiError, MemorySink
from kubevents.testing import FakeRecorder

START = datetime(2024, 1, 1, tzinfo=timezone.utc)
TEST_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "foo", "namespace": "baz", "uid": "bar"}}
TEST_POD2 = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "foo", "namespace": "baz", "uid": "differentUid"}}
# GetPartialReference(testPod, "spec.containers[2]") as an ObjectReference dict.
TEST_REF = {"kind": "Pod", "namespace": "baz", "name": "foo", "uid": "bar", "apiVersion": "v1", "fieldPath": "spec.containers[2]"}


def ref_line(uid, field_path, reason, message, namespace="baz"):
    return (
        f'Event(v1.ObjectReference{{Kind:"Pod", Namespace:"{namespace}", Name:"foo", UID:"{uid}", APIVersion:"v1", '
        f'ResourceVersion:"", FieldPath:"{field_path}"}}): type: \'Normal\' reason: \'{reason}\' {message}'
    )


def structured(field_path, reason, message):
    return (
        f'Event occurred object="baz/foo" fieldPath="{field_path}" kind="Pod" apiVersion="v1" type="Normal" '
        f'reason="{reason}" message="{message}"'
    )


# (object, field_path keyword, reason, write, count, uid, fieldPath)
TABLE = [
    (TEST_REF, None, "Started", "create", 1, "bar", "spec.containers[2]"),
    (TEST_POD, None, "Killed", "create", 1, "bar", ""),
    (TEST_POD, "spec.containers[2]", "Started", "patch", 2, "bar", "spec.containers[2]"),
    (TEST_POD2, "spec.containers[3]", "Started", "create", 1, "differentUid", "spec.containers[3]"),
    (TEST_REF, None, "Started", "patch", 3, "bar", "spec.containers[2]"),
    (TEST_POD2, "spec.containers[3]", "Stopped", "create", 1, "differentUid", "spec.containers[3]"),
    (TEST_POD2, "spec.containers[3]", "Stopped", "patch", 2, "differentUid", "spec.containers[3]"),
]


def message_for(reason):
    return "some other verbose message: 1" if reason == "Killed" else "some verbose message: 1"


def run_table(b, recorder, clock, sink, check_logs):
    first_seen = {}
    for obj, field_path, reason, write, count, uid, fp in TABLE:
        clock.step(1)
        lines, slines = [], []
        if check_logs:
            w1 = b.start_logging(lines.append)
            w2 = b.start_structured_logging(slines.append)
        fmt = "some other verbose message: %d" if reason == "Killed" else "some verbose message: %d"
        recorder.eventf(obj, "Normal", reason, fmt, 1, field_path=field_path)
        assert b.wait_idle(10)
        msg = message_for(reason)
        if check_logs:
            assert lines == [ref_line(uid, fp, reason, msg)]
            assert slines == [structured(fp, reason, msg)]
            w1.stop()
            w2.stop()
        op, ev = sink.writes[-1]
        assert op == write
        assert ev["count"] == count
        assert ev["metadata"]["name"].startswith("foo.")
        assert ev["metadata"]["namespace"] == "baz"
        assert ev["involvedObject"] == {"kind": "Pod", "namespace": "baz", "name": "foo", "uid": uid, "apiVersion": "v1", **({"fieldPath": fp} if fp else {})}
        assert (ev["reason"], ev["message"], ev["type"]) == (reason, msg, "Normal")
        assert ev["source"] == {"component": "eventTest"}
        assert ev["reportingComponent"] == "eventTest"
        key = (uid, fp, reason)
        first_seen.setdefault(key, ev["firstTimestamp"])
        # A repeat keeps the first timestamp and moves the last one.
        assert ev["firstTimestamp"] == first_seen[key]
        assert (ev["firstTimestamp"] != ev["lastTimestamp"]) == (count > 1)


def test_eventf_table_with_both_log_formats():
    clock = kubevents.FakeClock(START)
    with kubevents.Broadcaster(clock=clock, sleep_duration=0) as b:
        sink = MemorySink()
        b.start_recording_to_sink(sink)
        run_table(b, b.new_recorder("eventTest"), clock, sink, check_logs=True)
    assert [op for op, _ in sink.writes] == ["create", "create", "patch", "create", "patch", "create", "patch"]


def test_multi_sink_cache():
    clock = kubevents.FakeClock(START)
    with kubevents.Broadcaster(clock=clock, sleep_duration=0) as b:
        recorder = b.new_recorder("eventTest")
        sink1, sink2 = MemorySink(), MemorySink()
        w = b.start_recording_to_sink(sink1)
        run_table(b, recorder, clock, sink1, check_logs=False)
        w.stop()
        b.start_recording_to_sink(sink2)
        # A fresh correlator: the same pattern again, not counts continuing from the first sink's.
        run_table(b, recorder, clock, sink2, check_logs=False)
    assert len(sink1.writes) == len(sink2.writes) == 7


def test_eventf_no_namespace():
    clock = kubevents.FakeClock(START)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "foo", "uid": "bar"}}
    with kubevents.Broadcaster(clock=clock) as b:
        sink, lines = MemorySink(), []
        b.start_recording_to_sink(sink)
        b.start_logging(lines.append)
        b.new_recorder("eventTest").eventf(pod, "Normal", "Started", "some verbose message: %d", 1, field_path="spec.containers[2]")
    [ev] = sink.events()
    assert ev["metadata"]["namespace"] == "default"
    assert "namespace" not in ev["involvedObject"]
    assert ev["count"] == 1 and ev["metadata"]["name"].startswith("foo.")
    assert lines == [ref_line("bar", "spec.containers[2]", "Started", "some verbose message: 1", namespace="")]


class CountingSink:
    """Fails creates with `error` while the attempts for an event are below `fail_times`."""

    def __init__(self, error=None, fail_times=0, per_message=False):
        self.error, self.fail_times, self.per_message = error, fail_times, per_message
        self.attempts = {}
        self.created = []
        self.lock = threading.Lock()

    def create(self, event):
        key = event["message"] if self.per_message else "all"
        with self.lock:
            self.attempts[key] = self.attempts.get(key, 0) + 1
            if self.attempts[key] <= self.fail_times:
                raise self.error
            self.created.append(event)
        return event

    def patch(self, event, patch):
        return event


@pytest.mark.parametrize(
    ("error", "fail_times", "attempts"),
    [
        (ValueError("request construction"), 1000, 1),
        (ApiError(409, "AlreadyExists"), 1000, 1),
        (ApiError(400, "BadRequest"), 1000, 1),
        (ApiError(503, "ServiceUnavailable"), 1000, 12),
        (ApiError(429, "TooManyRequests"), 1000, 12),
        (RuntimeError("A weird error"), 1000, 12),
        (ConnectionError("refused"), 1000, 12),
        (RuntimeError("A weird error"), 1, 2),
    ],
    ids=["giveUp-construction", "giveUp-409", "giveUp-400", "retry-503", "retry-429", "retry-weird", "retry-connection", "succeedEventually"],
)
def test_write_event_error(error, fail_times, attempts, caplog):
    clock = kubevents.FakeClock(START)
    sink = CountingSink(error, fail_times)
    with kubevents.Broadcaster(clock=clock, sleep_duration=0) as b:
        b.start_recording_to_sink(sink)
        b.new_recorder("eventTest").event(TEST_POD, "Normal", "Started", "m")
        assert b.wait_idle(10)
        stats = b.stats()
    assert sink.attempts["all"] == attempts
    delivered = fail_times < attempts
    assert (stats["created"], stats["abandoned"], stats["retries"]) == (int(delivered), int(not delivered), attempts - 1 if delivered or attempts == 12 else 0)
    if not delivered:
        # Told in the sink's lines (kubevents sums up what client-go logs per event): the shutdown's counts it.
        summary = [r.message for r in caplog.records if " shut down: " in r.message]
        assert len(summary) == 1 and "1 event given up" in summary[0] and summary[0].startswith("kubevents: ")


def test_update_expired_event():
    clock = kubevents.FakeClock(START)
    created = []

    class Sink:
        def create(self, event):
            created.append(event)
            return {**event, "metadata": {**event["metadata"], "resourceVersion": "updated-resource-version"}}

        def patch(self, event, patch):
            assert event["metadata"]["resourceVersion"] == "updated-resource-version"
            raise ApiError(404, "NotFound")

    with kubevents.Broadcaster(clock=clock, sleep_duration=0) as b:
        b.start_recording_to_sink(Sink())
        r = b.new_recorder("eventTest")
        r.event(TEST_POD, "Normal", "Started", "m")
        clock.step(1)
        r.event(TEST_POD, "Normal", "Started", "m")
    assert len(created) == 2
    assert created[1]["count"] == 2
    assert "resourceVersion" not in created[1]["metadata"]


def test_cancel_event_one_try_once_shut_down():
    clock = kubevents.FakeClock(START)
    sink = CountingSink(RuntimeError("unexpected object"), 1000)
    b = kubevents.Broadcaster(clock=clock, sleep_duration=3600)
    b.start_recording_to_sink(sink)
    b.new_recorder("eventTest").event(TEST_POD, "Normal", "Started", "m")
    assert b.wait_idle(10)  # the first try failed; it sleeps for up to an hour of fake time
    stats = b.shutdown(10)
    # The sleep is cut short by shutdown, which leaves one more try.
    assert sink.attempts["all"] == 2
    assert (stats["abandoned"], stats["pending"]) == (1, 0)


def test_lots_of_events():
    clock = kubevents.FakeClock(START)
    sink = CountingSink(RuntimeError("fake error"), 4, per_message=True)
    logged = []
    with kubevents.Broadcaster(clock=clock, sleep_duration=0) as b:
        b.start_recording_to_sink(sink)
        b.start_logging(logged.append)
        r = b.new_recorder("eventTest")
        threads = [
            threading.Thread(
                target=r.eventf,
                args=({"kind": "Pod", "name": f"foo-{i}", "namespace": "baz", "uid": "bar", "apiVersion": "version"}, "Normal", f"Reason-{i}", "%s", str(i)),
            )
            for i in range(1000)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert b.wait_idle(30)
    assert len(sink.created) == 1000 and len(logged) == 1000
    assert all(sink.attempts[str(i)] == 5 for i in range(1000))


def test_non_racy_shutdown():
    # 100 threads record while the broadcaster shuts down: nothing raises, every call is accounted for.
    b = kubevents.Broadcaster(clock=kubevents.FakeClock(START))
    sink = MemorySink()
    b.start_recording_to_sink(sink)
    r = b.new_recorder("eventTest")
    threads = [threading.Thread(target=r.eventf, args=({"kind": "Pod", "name": f"p{i}"}, "Normal", "Started", "blah")) for i in range(100)]
    for t in threads:
        t.start()
    b.shutdown(10)
    for t in threads:
        t.join()
    s = b.stats()
    assert s["received"] == 100
    assert s["dropped_after_shutdown"] + s["dropped_incoming"] + s["created"] + s["skipped"] == 100


# -- the recorder's API --


def recorded(recorder_calls, **options):
    # Every clock read a second later, so two events of one object get different names.
    clock = options.pop("clock", kubevents.IntervalClock(START, 1))
    sink = MemorySink()
    with kubevents.Broadcaster(clock=clock, **options) as b:
        b.start_recording_to_sink(sink)
        recorder_calls(b.new_recorder("ctl", "node-1"))
    return [e for _, e in sink.writes]


def test_eventf_formats_only_with_args():
    evs = recorded(lambda r: (r.eventf(TEST_POD, "Normal", "A", "100%"), r.eventf(TEST_POD, "Normal", "B", "%d%% of %s", 5, "x")))
    assert [e["message"] for e in evs] == ["100%", "5% of x"]
    assert evs[0]["source"] == {"component": "ctl", "host": "node-1"} and evs[0]["reportingInstance"] == "node-1"


def test_eventf_with_bad_format_arguments_raises():
    b = kubevents.Broadcaster()
    with pytest.raises(TypeError):
        b.new_recorder("c").eventf(TEST_POD, "Normal", "A", "%d", "not a number")
    b.shutdown()


def test_type_must_be_normal_or_warning():
    b = kubevents.Broadcaster()
    r = b.new_recorder("c")
    for bad in ["normal", "Info", ""]:
        with pytest.raises(ValueError, match=f'type: must be "Normal" or "Warning", got "{bad}"'):
            r.event(TEST_POD, bad, "Started", "m")
    assert b.shutdown()["received"] == 0


def test_reason_and_message_are_kept_as_given():
    long = "x" * 5000
    evs = recorded(lambda r: r.event(TEST_POD, "Warning", "", long))
    assert (evs[0]["message"], evs[0].get("reason")) == (long, None)


def test_the_sink_gets_the_events_json_shape_key_for_key_in_order():
    """Every key set, ASCII or not, in the order Go's JSON writes them; dicts of other shapes in between
    (no reason, annotations, a field path) keep their own keys."""
    sent = []

    class Capture:
        def create(self, event):
            sent.append(event)
            return event

        def patch(self, event, patch):
            sent.append(event)
            return event

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "café", "namespace": "baz", "uid": "u1"}}
    with kubevents.Broadcaster(clock=kubevents.IntervalClock(START, 1)) as b:
        b.start_recording_to_sink(Capture())
        r = b.new_recorder("ctl", "node-1")
        r.event(pod, "Warning", "Ünïcode", "héllo ✓")
        r.event(TEST_POD, "Normal", "", "no reason")
        r.annotated_eventf(TEST_REF, {"a": "b"}, "Normal", "Started", "plain ascii")
        r.event(pod, "Warning", "Ünïcode", "héllo ✓")
    first, no_reason, annotated, repeat = sent
    assert list(first) == [
        "metadata", "involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count",
        "type", "eventTime", "reportingComponent", "reportingInstance",
    ]
    # "café" is no DNS subdomain, so the event is named by a UUID, as in client-go.
    assert len(first["metadata"]["name"]) == 36 and first["metadata"]["namespace"] == "baz"
    assert list(first["involvedObject"].items()) == [
        ("kind", "Pod"), ("namespace", "baz"), ("name", "café"), ("uid", "u1"), ("apiVersion", "v1"),
    ]
    assert (first["reason"], first["message"], first["type"], first["count"]) == ("Ünïcode", "héllo ✓", "Warning", 1)
    assert first["firstTimestamp"] == first["lastTimestamp"] == "2024-01-01T00:00:01Z"
    assert first["eventTime"] is None
    assert first["source"] == {"component": "ctl", "host": "node-1"}
    assert (first["reportingComponent"], first["reportingInstance"]) == ("ctl", "node-1")
    # The strings are ordinary str: equal to literals, hashed alike, and as long as their text.
    assert {"Warning": 1}[first["type"]] == 1 and len(first["message"]) == 7
    assert "reason" not in no_reason and list(no_reason)[2] == "message"
    assert annotated["metadata"]["annotations"] == {"a": "b"}
    assert annotated["involvedObject"]["fieldPath"] == "spec.containers[2]"
    assert list(annotated["involvedObject"])[-1] == "fieldPath"
    assert repeat["count"] == 2 and repeat["firstTimestamp"] != repeat["lastTimestamp"]
    assert list(repeat) == list(first)


def test_annotated_and_past_events():
    past = datetime(2020, 5, 6, 7, 8, 9, tzinfo=timezone.utc)

    def calls(r):
        r.annotated_eventf(TEST_POD, {"a": "1"}, "Normal", "A", "n=%d", 1)
        r.past_eventf(TEST_POD2, past, "Warning", "B", "then")

    a, p = recorded(calls)
    assert a["metadata"]["annotations"] == {"a": "1"} and a["message"] == "n=1"
    assert p["firstTimestamp"] == p["lastTimestamp"] == "2020-05-06T07:08:09Z"
    assert p["metadata"]["name"] == "foo.160c5eb26e243a00"


# -- object references --


class Body(Mapping):
    """A mapping that is not a dict, as kopf's bodies are."""

    def __init__(self, d):
        self._d = d

    def __getitem__(self, k):
        return self._d[k]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self):
        return len(self._d)


def test_references_of_dicts_mappings_and_field_paths():
    ref = kubevents.object_reference
    assert ref(TEST_POD) == {"kind": "Pod", "namespace": "baz", "name": "foo", "uid": "bar", "apiVersion": "v1"}
    assert ref(TEST_REF) == TEST_REF
    assert ref(Body(TEST_POD), field_path="spec.containers{app}")["fieldPath"] == "spec.containers{app}"
    # A manifest without apiVersion gets it from the built-in kinds.
    assert ref({"kind": "Deployment", "metadata": {"name": "d", "namespace": "n", "resourceVersion": "7"}}) == {
        "kind": "Deployment", "namespace": "n", "name": "d", "apiVersion": "apps/v1", "resourceVersion": "7",
    }


def test_reference_fields_are_found_whatever_else_the_dict_holds():
    ref = kubevents.object_reference
    # Keys built at run time (as json.loads makes them) are not the interned constants of the code.
    loaded = json.loads('{"spec": {}, "kind": "Pod", "apiVersion": "v1", "metadata": {"uid": "u", "name": "p"}}')
    assert ref(loaded) == {"kind": "Pod", "name": "p", "uid": "u", "apiVersion": "v1"}
    # Keys that are not str, or not text (a lone surrogate), are not fields; the reference fields still are.
    odd = {1: "x", ("kind",): "Node", "\ud800": "y", **TEST_REF, "name": "later"}
    assert ref(odd) == {**TEST_REF, "name": "later"}
    # A manifest's own top-level name is not its reference's name.
    assert ref({"kind": "Pod", "apiVersion": "v1", "name": "top", "metadata": {"name": "meta"}})["name"] == "meta"
    with pytest.raises(TypeError, match="obj: namespace must be a str, got int"):
        ref({**TEST_REF, "namespace": 3})


def test_references_of_official_client_models():
    client = pytest.importorskip("kubernetes.client")
    meta = client.V1ObjectMeta(name="web-0", namespace="prod", uid="u1", resource_version="42")
    # Items of a list call leave kind and apiVersion None: they come from the kind table.
    assert kubevents.object_reference(client.V1Pod(metadata=meta)) == {
        "kind": "Pod", "namespace": "prod", "name": "web-0", "uid": "u1", "apiVersion": "v1", "resourceVersion": "42",
    }
    assert kubevents.object_reference(client.V1ConfigMap(metadata=meta))["apiVersion"] == "v1"
    assert kubevents.object_reference(client.V1Pod(api_version="v1", kind="Pod", metadata=meta), field_path="spec.containers{app}")["fieldPath"] == "spec.containers{app}"
    r = client.V1ObjectReference(kind="Node", name="n1", uid="u2", api_version="v1")
    assert kubevents.object_reference(r) == {"kind": "Node", "name": "n1", "uid": "u2", "apiVersion": "v1"}
    evs = recorded(lambda rec: rec.event(client.V1Pod(metadata=meta), "Normal", "Started", "m"))
    assert evs[0]["involvedObject"]["kind"] == "Pod" and evs[0]["metadata"]["namespace"] == "prod"


def test_register_kind_for_custom_resources():
    class Widget:
        def __init__(self, name):
            self.metadata = {"name": name, "namespace": "w"}

    with pytest.raises(ValueError, match="register_kind"):
        kubevents.object_reference(Widget("a"))
    with pytest.raises(ValueError, match='"Gizmo" is not a built-in kind'):
        kubevents.object_reference({"kind": "Gizmo", "metadata": {"name": "g"}})
    kubevents.register_kind("Widget", "example.com/v1", cls=Widget)
    kubevents.register_kind("Gizmo", "example.com/v1beta1")
    assert kubevents.object_reference(Widget("a")) == {"kind": "Widget", "namespace": "w", "name": "a", "apiVersion": "example.com/v1"}
    assert kubevents.object_reference({"kind": "Gizmo", "metadata": {"name": "g"}})["apiVersion"] == "example.com/v1beta1"


def test_bad_objects_raise_value_errors_that_say_what_is_missing():
    ref = kubevents.object_reference
    with pytest.raises(ValueError, match="has no name"):
        ref({"kind": "Pod", "apiVersion": "v1", "metadata": {"namespace": "x"}})
    with pytest.raises(ValueError, match="cannot make an object reference of a int"):
        ref(3)
    with pytest.raises(ValueError, match="has no kind"):
        ref({"metadata": {"name": "x"}})
    with pytest.raises(TypeError, match="metadata.name must be a str"):
        ref({"kind": "Pod", "metadata": {"name": 5}})
    b = kubevents.Broadcaster()
    with pytest.raises(ValueError, match="has no name"):
        b.new_recorder("c").event({"kind": "Pod", "apiVersion": "v1"}, "Normal", "R", "m")
    b.shutdown()


# -- FakeRecorder --


def test_fake_recorder_strings():
    f = FakeRecorder()
    f.event(TEST_POD, "Normal", "Started", "100%")
    f.eventf(TEST_POD, "Warning", "BackOff", "Back-off restarting %s", "app")
    f.annotated_eventf(TEST_POD, {"b": "2", "a": "1"}, "Normal", "A", "m")
    assert f.events == ["Normal Started 100%", "Warning BackOff Back-off restarting app", "Normal A m map[a:1 b:2]"]
    g = FakeRecorder(include_object=True)
    g.eventf(TEST_POD, "Normal", "Started", "x")
    assert g.events == ["Normal Started x involvedObject{kind=Pod,apiVersion=v1}"]


class _Str(str):
    """A str subclass: accepted wherever a str is."""


class _NoStr:
    def __str__(self):
        raise RuntimeError("no str")


# Bad calls: (method, args, kwargs). Each must fail in FakeRecorder exactly as in Recorder.
_POD_OK = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "namespace": "n"}}
BAD_RECORDER_CALLS = [
    ("eventf", (None, "Bogus", 42, "m"), {}),
    ("eventf", (_POD_OK, "Bogus", "R", "m"), {}),
    ("eventf", (_POD_OK, "normal", "R", "m"), {}),
    ("eventf", (_POD_OK, 3, "R", "m"), {}),
    ("eventf", (_POD_OK, None, "R", "m"), {}),
    ("eventf", (_POD_OK, "Normal", 42, "m"), {}),
    ("eventf", (_POD_OK, "Normal", b"R", "m"), {}),
    ("eventf", (_POD_OK, "Normal", "R", 42), {}),
    ("eventf", (_POD_OK, "Normal", "R", b"m"), {}),
    ("eventf", (_POD_OK, "Normal", "R", "m %d", "x"), {}),
    ("eventf", (_POD_OK, "Normal", "R", "m %d %d", 1), {}),
    ("eventf", (_POD_OK, "Normal", "R", "m", 1), {}),
    ("eventf", (_POD_OK, "Normal", "R", "m %s", _NoStr()), {}),
    ("eventf", (_POD_OK, "Bogus", "R", "m %d", "x"), {}),  # the format is checked before the type
    ("eventf", (None, "Normal", "R", "m"), {}),
    ("eventf", ({}, "Normal", "R", "m"), {}),
    ("eventf", ({"kind": "Pod"}, "Normal", "R", "m"), {}),
    ("eventf", ({"kind": "Pod", "metadata": {"name": 5}}, "Normal", "R", "m"), {}),
    ("eventf", (42, "Normal", "R", "m"), {}),
    ("eventf", (None, "Bogus", "R", "m"), {}),  # the type is checked before the object
    ("eventf", (_POD_OK, "Normal", "R", "m"), {"field_path": 42}),
    ("eventf", (_POD_OK, "Normal", "R", "m"), {"field_path": b"x"}),
    ("event", (_POD_OK, "Normal", "R", 42), {}),
    ("event", (_POD_OK, "Normal", None, "m"), {}),
    ("event", (_POD_OK, "Warn", "R", "m"), {}),
    ("event", (object(), "Normal", "R", "m"), {}),
    ("event", (_POD_OK, "Normal", "R", "m"), {"field_path": 1.5}),
    ("annotated_eventf", (_POD_OK, {"a": 1}, "Normal", "R", "m"), {}),
    ("annotated_eventf", (_POD_OK, {1: "a"}, "Normal", "R", "m"), {}),
    ("annotated_eventf", (_POD_OK, [("a", "b")], "Normal", "R", "m"), {}),
    ("annotated_eventf", (_POD_OK, "ab", "Normal", "R", "m"), {}),
    ("annotated_eventf", (_POD_OK, {"a": "b"}, "Bogus", "R", "m"), {}),
    ("annotated_eventf", (None, {"a": "b"}, "Normal", "R", "m"), {}),
    ("annotated_eventf", (_POD_OK, {"a": None}, "Normal", 1, "m"), {}),  # annotations come first
    ("past_eventf", (_POD_OK, "yesterday", "Normal", "R", "m"), {}),
    ("past_eventf", (_POD_OK, None, "Normal", "R", "m"), {}),
    ("past_eventf", (_POD_OK, float("nan"), "Normal", "R", "m"), {}),
    ("past_eventf", (_POD_OK, 1e30, "Normal", "R", "m"), {}),
    ("past_eventf", (_POD_OK, datetime(2024, 1, 1), "Bogus", "R", "m"), {}),
    ("past_eventf", (_POD_OK, "yesterday", "Normal", "R", "m %d", "x"), {}),  # the time first
    ("past_eventf", (_POD_OK, None, 42, "R", "m"), {}),  # argument types before the time
    ("past_eventf", (None, 0, "Normal", "R", "m"), {}),
]


def _failure(call):
    try:
        call()
    except Exception as e:
        return type(e), str(e)
    return None


@pytest.mark.parametrize("method, args, kwargs", BAD_RECORDER_CALLS)
def test_fake_recorder_refuses_what_the_recorder_refuses(method, args, kwargs):
    """FakeRecorder raises exactly what Recorder raises (type and message), so a test that passes against the
    fake does not fail in production: fake.eventf(None, "Bogus", 42, "m") used to record 'Bogus 42 m'."""
    b = kubevents.Broadcaster()
    try:
        real = _failure(lambda: getattr(b.new_recorder("x"), method)(*args, **kwargs))
    finally:
        b.shutdown()
    fake = FakeRecorder(include_object=True)
    assert real is not None
    assert _failure(lambda: getattr(fake, method)(*args, **kwargs)) == real
    assert fake.events == []


def test_fake_recorder_accepts_what_the_recorder_accepts():
    f = FakeRecorder()
    f.eventf(_POD_OK, _Str("Normal"), _Str("R"), _Str("m %s"), 1, field_path=_Str("spec"))
    f.past_eventf(_POD_OK, datetime(2024, 1, 1, tzinfo=timezone.utc), "Warning", "R", "m")
    f.past_eventf(_POD_OK, 1_700_000_000, "Warning", "R", "m")
    f.annotated_eventf(_POD_OK, None, "Normal", "R", "m")
    f.annotated_eventf(_POD_OK, {}, "Normal", "R", "m")
    assert f.events == ["Normal R m 1", "Warning R m", "Warning R m", "Normal R m", "Normal R m"]


def test_start_logging_to_a_logger_at_info(caplog):
    logger = logging.getLogger("my-controller-events")
    with caplog.at_level(logging.INFO, logger="my-controller-events"):
        with kubevents.Broadcaster(clock=kubevents.FakeClock(START)) as b:
            b.start_logging(logger)
            b.start_structured_logging(logger)
            b.new_recorder("eventTest").eventf(TEST_POD, "Normal", "Started", "some verbose message: %d", 1)
    lines = sorted(r.getMessage() for r in caplog.records if r.name == "my-controller-events")
    assert lines == sorted([ref_line("bar", "", "Started", "some verbose message: 1"), structured("", "Started", "some verbose message: 1")])
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "my-controller-events")
    with pytest.raises(TypeError, match="logging.Logger or a callable"):
        kubevents.Broadcaster().start_logging(42)


def test_converting_an_event_inside_a_conversion_does_not_hang():
    """A garbage collection while an event dict is being built may run Python code that builds another (a
    gc callback here; a finalizer in real code). Run in a child process so that a hang fails the test."""
    script = textwrap.dedent(
        """
        import gc, kubevents
        ref = {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u", "apiVersion": "v1"}
        inner, busy = [], []
        def convert_again(phase, info):
            if phase == "start" and not busy:
                busy.append(1)
                inner.append(kubevents.make_event(ref, "Normal", "Inner", "from a collection", source="gc"))
                busy.pop()
        gc.callbacks.append(convert_again)
        gc.set_threshold(1)
        outer = [kubevents.make_event(ref, "Normal", "Outer", "m", source="t") for _ in range(50)]
        gc.set_threshold(700)
        gc.callbacks.remove(convert_again)
        print(len(outer), len(inner) > 0, {e["reason"] for e in inner})
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["50", "True", "{'Inner'}"]


@pytest.mark.parametrize(
    "method, args, message",
    [
        ("eventf", (_POD_OK, "Normal", 5, "m"), "reason: expected str, got int"),
        ("eventf", (_POD_OK, 5, "R", "m"), "type: expected str, got int"),
        ("eventf", (_POD_OK, "Normal", "R", b"m"), "fmt: expected str, got bytes"),
        ("event", (_POD_OK, "Normal", "R", None), "message: expected str, got NoneType"),
        ("past_eventf", (_POD_OK, 0, "Normal", 5.0, "m"), "reason: expected str, got float"),
    ],
)
def test_an_argument_of_the_wrong_type_is_named(method, args, message):
    b = kubevents.Broadcaster()
    try:
        with pytest.raises(TypeError) as info:
            getattr(b.new_recorder("x"), method)(*args)
    finally:
        b.shutdown()
    assert str(info.value) == message
