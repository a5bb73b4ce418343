"""Ports of client-go's tools/record/events_cache_test.go, and the correlator rules of the reference
(sections 2.6-2.11) checked through the Python API.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import struct

import pytest

import kubevents
from kubevents.testing import FakeClock, IntervalClock

UTC = dt.timezone.utc
START = dt.datetime(2024, 1, 1, tzinfo=UTC)
NS = 10**9
QPS32 = struct.unpack("f", struct.pack("f", 1.0 / 300.0))[0]


def rfc3339(t: dt.datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_ns(ns: int) -> str:
    return rfc3339(dt.datetime.fromtimestamp(ns // NS, UTC))


# --- client-go fixtures -------------------------------------------------------------------------------

def make_object_reference(kind: str, name: str, namespace: str) -> dict:
    return {
        "kind": kind,
        "name": name,
        "namespace": namespace,
        "uid": "C934D34AFB20242",
        "apiVersion": "version",
        "fieldPath": "spec.containers{mycontainer}",
    }


def make_event(reason: str, message: str, involved: dict) -> dict:
    now = rfc3339(START)
    return {
        "reason": reason,
        "message": message,
        "involvedObject": copy.deepcopy(involved),
        "source": {"component": "kubelet", "host": "kublet.node1"},
        "count": 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "type": "Normal",
    }


def make_events(n: int, template: dict) -> list[dict]:
    return [copy.deepcopy(template) for _ in range(n)]


def make_unique_events(n: int) -> list[dict]:
    return [
        make_event(f"reason-{i}", f"message-{i}", make_object_reference("Pod", f"pod-{i}", f"ns-{i}"))
        for i in range(n)
    ]


def make_similar_events(n: int, template: dict, prefix: str) -> list[dict]:
    events = make_events(n, template)
    for i, e in enumerate(events):
        e["message"] = f"{prefix}-{i}-{e['message']}"
    return events


def set_count(event: dict, count: int) -> dict:
    e = copy.deepcopy(event)
    e["count"] = count
    return e


_REF_KEYS = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")


def canonical(e: dict) -> dict:
    """The event as Go's v1.Event struct holds it: every field present, empty values as zero values, so
    that `==` is reflect.DeepEqual."""
    md = e.get("metadata") or {}
    ref = e.get("involvedObject") or {}
    src = e.get("source") or {}
    related = e.get("related")
    return {
        "apiVersion": e.get("apiVersion") or "",
        "kind": e.get("kind") or "",
        "metadata": {
            "name": md.get("name") or "",
            "namespace": md.get("namespace") or "",
            "resourceVersion": md.get("resourceVersion") or "",
            "annotations": dict(md.get("annotations") or {}),
        },
        "involvedObject": {k: ref.get(k) or "" for k in _REF_KEYS},
        "reason": e.get("reason") or "",
        "message": e.get("message") or "",
        "source": {"component": src.get("component") or "", "host": src.get("host") or ""},
        "firstTimestamp": e.get("firstTimestamp"),
        "lastTimestamp": e.get("lastTimestamp"),
        "count": e.get("count") or 0,
        "type": e.get("type") or "",
        "eventTime": e.get("eventTime"),
        "series": e.get("series"),
        "action": e.get("action") or "",
        "related": None if related is None else {k: related.get(k) or "" for k in _REF_KEYS},
        "reportingComponent": e.get("reportingComponent") or "",
        "reportingInstance": e.get("reportingInstance") or "",
    }


def validate_event(scenario: str, actual: dict, expected: dict) -> None:
    """client-go's validateEvent."""
    first, last = actual.get("firstTimestamp"), actual.get("lastTimestamp")
    assert first and last, f"{scenario}: timestamp wasn't set: {actual}"
    if first == last:
        assert expected["count"] <= 1, f"{scenario}: first == last ({first}) but compression was expected"
    else:
        assert expected["count"] != 1, f"{scenario}: first {first} != last {last} for a single occurrence"
    a = canonical(actual)
    x = canonical(expected)
    assert a["metadata"]["name"].startswith(x["metadata"]["name"]), f"{scenario}: name {a['metadata']['name']!r}"
    a["firstTimestamp"] = x["firstTimestamp"]
    a["lastTimestamp"] = x["lastTimestamp"]
    a["reportingComponent"] = x["reportingComponent"]
    a["metadata"]["name"] = x["metadata"]["name"]
    assert a == x, scenario


# --- TestEventCorrelator ------------------------------------------------------------------------------

FIRST = make_event("first", "i am first", make_object_reference("Pod", "my-pod", "my-ns"))
DUPLICATE = make_event("duplicate", "me again", make_object_reference("Pod", "my-pod", "my-ns"))
UNIQUE = make_event("unique", "snowflake", make_object_reference("Pod", "my-pod", "my-ns"))
SIMILAR = make_event("similar", "similar message", make_object_reference("Pod", "my-pod", "my-ns"))
SIMILAR["involvedObject"]["fieldPath"] = "spec.containers{container1}"
AGGREGATE = make_event(SIMILAR["reason"], "(combined from similar events): " + SIMILAR["message"],
                       SIMILAR["involvedObject"])
SIMILAR_OTHER_CONTAINER = copy.deepcopy(SIMILAR)
SIMILAR_OTHER_CONTAINER["involvedObject"]["fieldPath"] = "spec.containers{container2}"

# name: (previous events, new event, expected event, interval seconds, expected skip)
SCENARIOS = {
    "create-a-single-event": ([], FIRST, set_count(FIRST, 1), 5, False),
    "the-same-event-should-just-count": (make_events(1, DUPLICATE), DUPLICATE, set_count(DUPLICATE, 2), 5, False),
    "the-same-event-should-just-count-even-if-more-than-aggregate": (
        make_events(10, DUPLICATE), DUPLICATE, set_count(DUPLICATE, 11), 30, False),
    "the-same-event-is-spam-if-happens-too-frequently": (make_events(26, DUPLICATE), DUPLICATE, None, 1, True),
    "create-many-unique-events": (make_unique_events(30), UNIQUE, set_count(UNIQUE, 1), 5, False),
    "similar-events-should-aggregate-event": (
        make_similar_events(9, SIMILAR, SIMILAR["message"]), SIMILAR, set_count(AGGREGATE, 1), 5, False),
    "similar-events-many-times-should-count-the-aggregate": (
        make_similar_events(10, SIMILAR, SIMILAR["message"]), SIMILAR, set_count(AGGREGATE, 2), 5, False),
    "events-from-different-containers-do-not-aggregate": (
        make_events(1, SIMILAR_OTHER_CONTAINER), SIMILAR, set_count(SIMILAR, 1), 5, False),
    "similar-events-whose-interval-is-greater-than-aggregate-interval-do-not-aggregate": (
        make_similar_events(9, SIMILAR, SIMILAR["message"]), SIMILAR, set_count(SIMILAR, 1), 600, False),
}


def _stamp(event: dict, clock) -> dict:
    e = copy.deepcopy(event)
    now = rfc3339(clock.now())
    e["firstTimestamp"] = now
    e["lastTimestamp"] = now
    return e


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_event_correlator(scenario):
    previous, new, expected, interval, expected_skip = SCENARIOS[scenario]
    clock = IntervalClock(START, interval)
    c = kubevents.Correlator(clock=clock)
    for event in previous:
        result = c.correlate(_stamp(event, clock))
        if not result.skip:
            c.update_state(result.event)
    result = c.correlate(_stamp(new, clock))
    assert result.skip is expected_skip, scenario
    if expected_skip:
        assert result.event is None and result.patch is None
        return
    validate_event(scenario, result.event, expected)


def test_aggregate_scenarios_report_aggregation_and_patch():
    # (f): the 10th distinct message creates the aggregate; (g): the 11th counts it (count 2, with a patch).
    for n, count in ((9, 1), (10, 2)):
        clock = IntervalClock(START, 5)
        c = kubevents.Correlator(clock=clock)
        results = []
        for event in make_similar_events(n, SIMILAR, SIMILAR["message"]) + [SIMILAR]:
            results.append(c.correlate(_stamp(event, clock)))
            c.update_state(results[-1].event)
        assert [r.aggregated for r in results] == [False] * 9 + [True] * (n - 8)
        last = results[-1]
        assert last.event["count"] == count
        assert last.event["metadata"]["name"].startswith("my-pod.")
        assert "namespace" not in last.event["metadata"]
        if count == 1:
            assert last.patch is None
        else:
            # The aggregate keeps the name of the first one; the patch carries the newest message.
            assert last.event["metadata"]["name"] == results[-2].event["metadata"]["name"]
            assert json.loads(last.patch) == {
                "count": 2,
                "lastTimestamp": last.event["lastTimestamp"],
                "message": "(combined from similar events): similar message",
            }


def test_aggregate_key_can_equal_the_event_key_of_a_message_less_event():
    # Keys are joined with no separator, so an event without message or fieldPath has the same key string as
    # its aggregate (reporting fields empty). client-go then counts the aggregate on top of that event.
    ref = make_object_reference("Pod", "p", "ns")
    del ref["fieldPath"]
    clock = FakeClock(START)
    c = kubevents.Correlator(clock=clock, max_events=2)
    first = c.correlate(make_event("R", "", ref))
    c.update_state(first.event)
    second = c.correlate(make_event("R", "m", ref))
    assert second.aggregated
    assert second.event["count"] == 2
    assert json.loads(second.patch)["count"] == 2


# --- TestEventSpamFilter ------------------------------------------------------------------------------

def spam_key_by_object_and_reason(e: dict) -> str:
    src, ref = e.get("source") or {}, e["involvedObject"]
    return "".join([
        src.get("component", ""), src.get("host", ""), ref.get("kind", ""), ref.get("namespace", ""),
        ref.get("name", ""), ref.get("uid", ""), ref.get("apiVersion", ""), e.get("reason", ""),
    ])


ORIGINAL = make_event("original", "i am first", make_object_reference("Pod", "my-pod", "my-ns"))
DIFFERENT_REASON = make_event("duplicate", "me again", make_object_reference("Pod", "my-pod", "my-ns"))
SPAM = make_event("original", "me again", make_object_reference("Pod", "my-pod", "my-ns"))

SPAM_CASES = {
    "event should be reported as spam if object reference is the same for default spam filter":
        (DIFFERENT_REASON, None, True, None),
    "event should not be reported as spam if object reference is the same, but reason is different for custom "
    "spam filter": (DIFFERENT_REASON, DIFFERENT_REASON, False, spam_key_by_object_and_reason),
    "event should be reported as spam if object reference and reason is the same, but message is different for "
    "custom spam filter": (SPAM, None, True, spam_key_by_object_and_reason),
}


@pytest.mark.parametrize("case", list(SPAM_CASES))
def test_event_spam_filter(case):
    new, expected, expected_skip, key_func = SPAM_CASES[case]
    clock = IntervalClock(START, 1)
    c = kubevents.Correlator(clock=clock, spam_key_func=key_func, burst=1)
    result = c.correlate(copy.deepcopy(ORIGINAL))
    assert not result.skip
    c.update_state(result.event)
    result = c.correlate(copy.deepcopy(new))
    assert result.skip is expected_skip, case
    if not expected_skip:
        validate_event(case, result.event, expected)


def test_spam_key_func_receives_the_observed_event():
    seen = []

    def key(e):
        seen.append(copy.deepcopy(e))
        return "one bucket"

    c = kubevents.Correlator(clock=FakeClock(START), spam_key_func=key, burst=2)
    first = c.correlate(copy.deepcopy(ORIGINAL))
    second = c.correlate(copy.deepcopy(ORIGINAL))
    # Different objects, one key: the shared bucket of 2 is empty now.
    third = c.correlate(make_event("x", "y", make_object_reference("Node", "n", "")))
    assert [first.skip, second.skip, third.skip] == [False, False, True]
    assert seen[1]["count"] == 2  # the filter runs after the count bump (aggregate -> observe -> filter)
    assert seen[1] == second.event


# --- TestEventAggregatorByReasonFunc / MessageFunc --------------------------------------------------

def by_reason_key(e: dict):
    """client-go's EventAggregatorByReasonFunc, on the event dict."""
    src, ref = e.get("source") or {}, e["involvedObject"]
    agg = "".join([
        src.get("component", ""), src.get("host", ""), ref.get("kind", ""), ref.get("namespace", ""),
        ref.get("name", ""), ref.get("uid", ""), ref.get("apiVersion", ""), e.get("type", ""), e.get("reason", ""),
        e.get("reportingComponent", ""), e.get("reportingInstance", ""),
    ])
    return agg, e.get("message", "")


def test_aggregator_by_reason_groups_same_reason_different_message():
    ref = make_object_reference("Pod", "pod1", "other")
    fun = make_event("end-of-world", "it was fun", ref)
    awful = make_event("end-of-world", "it was awful", ref)
    bug = make_event("nevermind", "it was a bug", ref)
    c = kubevents.Correlator(clock=FakeClock(START), max_events=2)
    r1, r2, r3 = (c.correlate(copy.deepcopy(e)) for e in (fun, awful, bug))
    # Same reason, different messages: grouped; the 2nd distinct message (= max_events) is aggregated.
    assert (r1.aggregated, r2.aggregated) == (False, True)
    assert r2.event["message"] == "(combined from similar events): it was awful"
    # Another reason is another group.
    assert not r3.aggregated
    assert r3.event["message"] == "it was a bug"


def test_default_key_func_matches_by_reason_func_in_python():
    ref = make_object_reference("Pod", "pod1", "other")
    events = []
    for i in range(40):
        reason = ("end-of-world", "nevermind")[i % 3 == 0]
        e = make_event(reason, f"message {i % 13}", ref)
        e["involvedObject"]["fieldPath"] = f"spec.containers{{c{i % 2}}}"
        events.append(e)

    def run(**kw):
        clock = FakeClock(START)
        c = kubevents.Correlator(clock=clock, **kw)
        out = []
        for e in events:
            clock.step(7)
            r = c.correlate(copy.deepcopy(e))
            out.append((r.skip, r.aggregated, r.patch, r.event))
            if not r.skip:
                c.update_state(r.event)
        return out

    native = run()
    assert any(a for _, a, _, _ in native) and any(not a for _, a, _, _ in native)
    assert run(key_func=by_reason_key) == native


def test_max_events_default_is_ten_distinct_messages():
    ref = make_object_reference("Pod", "pod1", "other")
    clock = FakeClock(START)
    c = kubevents.Correlator(clock=clock)
    flags = []
    for i in range(10):
        clock.step(1)
        flags.append(c.correlate(make_event("r", f"m{i}", ref)).aggregated)
    assert flags == [False] * 9 + [True]


def test_aggregate_message_prefix_and_custom_message_func():
    ref = make_object_reference("Pod", "pod1", "other")
    c = kubevents.Correlator(clock=FakeClock(START), max_events=2)
    c.correlate(make_event("r", "a", ref))
    r = c.correlate(make_event("r", "b", ref))
    assert r.aggregated
    assert r.event["message"].startswith("(combined from similar events): ")
    assert r.event["message"] == "(combined from similar events): b"

    received = []

    def message_func(e):
        received.append(e["message"])
        return "custom: " + e["reason"]

    c = kubevents.Correlator(clock=FakeClock(START), max_events=2, message_func=message_func)
    c.correlate(make_event("r", "a", ref))
    r = c.correlate(make_event("r", "b", ref))
    assert r.aggregated and r.event["message"] == "custom: r"
    assert received == ["b"]  # called only for the aggregated event, with the original event


def test_aggregation_window_is_strictly_greater_than_max_interval():
    ref = make_object_reference("Pod", "pod1", "other")
    # Gaps of exactly max_interval keep the group; one nanosecond more resets it.
    for extra_ns, expected in ((0, True), (1, False)):
        clock = FakeClock(START)
        c = kubevents.Correlator(clock=clock, max_events=3, max_interval=10)
        flags = []
        for m in ("a", "b", "c"):
            flags.append(c.correlate(make_event("r", m, ref)).aggregated)
            _set_ns(clock, clock.now_ns() + 10 * NS + extra_ns)
        assert flags == [False, False, expected]


# --- Worked example of section 2.8 ------------------------------------------------------------------

def test_worked_example_of_the_reference():
    clock = FakeClock(dt.datetime(2024, 1, 1, 0, 0, 1, tzinfo=UTC))
    pod_ref = {"kind": "Pod", "namespace": "baz", "name": "foo", "uid": "bar", "apiVersion": "v1",
               "fieldPath": "spec.containers[2]"}
    c = kubevents.Correlator(clock=clock)

    def occur():
        ev = kubevents.make_event(pod_ref, "Normal", "Started", "some verbose message: 1", source="eventTest",
                                  clock=clock)
        return ev, c.correlate(ev)

    ev1, r1 = occur()
    assert ev1["metadata"]["name"] == "foo.17a610173cffca00"
    assert clock.now_ns() == 1704067201000000000
    assert (r1.skip, r1.aggregated, r1.patch) == (False, False, None)
    assert r1.event == ev1
    assert r1.event["count"] == 1
    answer = copy.deepcopy(r1.event)
    answer["metadata"]["resourceVersion"] = "100"
    c.update_state(answer)

    clock.step(1)
    ev2, r2 = occur()
    assert ev2["metadata"]["name"] == "foo.17a61017789a9400"
    assert r2.patch == b'{"count":2,"lastTimestamp":"2024-01-01T00:00:02Z","message":"some verbose message: 1"}'
    assert r2.event["metadata"]["name"] == "foo.17a610173cffca00"
    assert r2.event["metadata"]["resourceVersion"] == "100"
    assert r2.event["metadata"]["namespace"] == "baz"
    assert r2.event["count"] == 2
    assert r2.event["firstTimestamp"] == "2024-01-01T00:00:01Z"
    assert r2.event["lastTimestamp"] == "2024-01-01T00:00:02Z"
    c.update_state(r2.event)

    clock.step(1)
    _, r3 = occur()
    assert r3.event["count"] == 3
    assert r3.patch == b'{"count":3,"lastTimestamp":"2024-01-01T00:00:03Z","message":"some verbose message: 1"}'
    assert r3.event["metadata"]["name"] == "foo.17a610173cffca00"


# --- Aggregate event shape and the deliberate difference ----------------------------------------------

def test_aggregate_event_shape():
    clock = FakeClock(dt.datetime(2024, 1, 1, 0, 0, 1, tzinfo=UTC))
    ref = {"kind": "Pod", "namespace": "web", "name": "api-0", "uid": "u1", "apiVersion": "v1",
           "fieldPath": "spec.containers{app}"}
    source = {"component": "kubelet", "host": "node-1"}
    c = kubevents.Correlator(clock=clock, max_events=2)
    first = kubevents.make_event(ref, "Warning", "Unhealthy", "probe 1", source=source, clock=clock,
                                 annotations={"a": "1"})
    assert first["reportingComponent"] == "kubelet" and first["reportingInstance"] == "node-1"
    c.correlate(first)
    clock.step(dt.timedelta(seconds=2, microseconds=5))
    second = kubevents.make_event(ref, "Warning", "Unhealthy", "probe 2", source=source, clock=clock,
                                  annotations={"a": "1"})
    second["eventTime"] = "2024-01-01T00:00:03.000005Z"
    second["action"] = "Probe"
    second["related"] = {"kind": "Node", "name": "node-1"}
    second["series"] = {"count": 3, "lastObservedTime": "2024-01-01T00:00:03.000005Z"}
    second["metadata"]["resourceVersion"] = "7"
    r = c.correlate(second)
    assert r.aggregated and not r.skip and r.patch is None
    now_ns = clock.now_ns()
    assert now_ns == 1704067203000005000
    now = rfc3339_ns(now_ns)
    assert r.event == {
        "metadata": {"name": f"api-0.{now_ns:x}", "namespace": "web"},
        "involvedObject": ref,
        "reason": "Unhealthy",
        "message": "(combined from similar events): probe 2",
        "source": source,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "type": "Warning",
        "eventTime": None,
        "reportingComponent": "",
        "reportingInstance": "",
    }


def test_aggregate_name_is_not_validated_and_namespace_comes_from_the_event():
    clock = FakeClock(1_700_000_000)
    ref = {"kind": "Pod", "name": "Not_A_Subdomain"}
    c = kubevents.Correlator(clock=clock, max_events=2)
    e1 = kubevents.make_event(ref, "Normal", "R", "one", source="s", clock=clock)
    # make_event validates the name (UUID fallback) and defaults the namespace.
    assert not e1["metadata"]["name"].startswith("Not_A_Subdomain")
    assert e1["metadata"]["namespace"] == "default"
    c.correlate(e1)
    clock.step(1)
    r = c.correlate(kubevents.make_event(ref, "Normal", "R", "two", source="s", clock=clock))
    assert r.aggregated
    assert r.event["metadata"]["name"] == f"Not_A_Subdomain.{clock.now_ns():x}"
    assert r.event["metadata"]["namespace"] == "default"
    assert "namespace" not in r.event["involvedObject"]


def test_oldest_local_key_is_dropped():
    """max_events=3: the set keeps max_events-1 messages, dropping the oldest inserted one (Go: any one)."""
    clock = FakeClock(START)
    ref = make_object_reference("Pod", "p", "ns")
    c = kubevents.Correlator(clock=clock, max_events=3)
    got = []
    for m in ["m0", "m1", "m2", "m1", "m0", "m1", "m0"]:
        clock.step(1)
        r = c.correlate(make_event("R", m, ref))
        assert not r.skip
        c.update_state(r.event)
        got.append((r.aggregated, r.event["message"], r.event["count"]))
    agg = "(combined from similar events): "
    assert got == [
        (False, "m0", 1),         # set {m0}
        (False, "m1", 1),         # set {m0, m1}
        (True, agg + "m2", 1),    # size 3: aggregated, drop m0 -> {m1, m2}
        (False, "m1", 2),         # m1 still kept: counted on its own event
        (True, agg + "m0", 2),    # m0 was dropped: aggregated, drop m1 -> {m2, m0}
        (True, agg + "m1", 3),    # m1 was dropped: aggregated, drop m2 -> {m0, m1}
        (False, "m0", 2),         # m0 kept: its own event, count 2
    ]


# --- Patch bytes --------------------------------------------------------------------------------------

def _repeat_patch(message: str, last: str | None = "2024-01-01T00:00:02Z") -> bytes:
    c = kubevents.Correlator(clock=FakeClock(START))
    e = make_event("R", message, make_object_reference("Pod", "p", "ns"))
    assert c.correlate(copy.deepcopy(e)).patch is None
    e["lastTimestamp"] = last
    r = c.correlate(e)
    assert r.event["count"] == 2
    return r.patch


def test_patch_escapes_like_go_encoding_json():
    patch = _repeat_patch("a<b>&c\nd\u2028e\u2029f\"g\\h\ti\r\x01\x1f\x7fé✓😀")
    assert patch == (
        b'{"count":2,"lastTimestamp":"2024-01-01T00:00:02Z","message":'
        b'"a\\u003cb\\u003e\\u0026c\\nd\\u2028e\\u2029f\\"g\\\\h\\ti\\r\\u0001\\u001f\x7f'
        + "é✓😀".encode() + b'"}'
    )
    assert json.loads(patch)["message"] == "a<b>&c\nd\u2028e\u2029f\"g\\h\ti\r\x01\x1f\x7fé✓😀"


def test_patch_omits_empty_message():
    assert _repeat_patch("") == b'{"count":2,"lastTimestamp":"2024-01-01T00:00:02Z"}'


def test_patch_omits_last_timestamp_equal_to_the_epoch_and_writes_null_for_none():
    assert _repeat_patch("m", "1970-01-01T00:00:00Z") == b'{"count":2,"message":"m"}'
    assert _repeat_patch("m", None) == b'{"count":2,"lastTimestamp":null,"message":"m"}'


def test_patch_timestamp_is_utc_whole_seconds():
    assert _repeat_patch("m", "2024-01-01T02:00:02.999+02:00") == (
        b'{"count":2,"lastTimestamp":"2024-01-01T00:00:02Z","message":"m"}'
    )


def test_event_with_count_zero_never_becomes_a_repeat():
    c = kubevents.Correlator(clock=FakeClock(START))
    e = make_event("R", "m", make_object_reference("Pod", "p", "ns"))
    e["count"] = 0
    for _ in range(3):
        r = c.correlate(copy.deepcopy(e))
        assert r.patch is None and "count" not in r.event


# --- update_state -------------------------------------------------------------------------------------

def test_update_state_records_the_server_answer():
    clock = FakeClock(START)
    c = kubevents.Correlator(clock=clock)
    e = make_event("R", "m", make_object_reference("Pod", "p", "ns"))
    r = c.correlate(copy.deepcopy(e))
    assert "resourceVersion" not in r.event["metadata"]
    answer = copy.deepcopy(r.event)
    answer["metadata"]["resourceVersion"] = "100"
    answer["metadata"]["name"] = "server-name"
    answer["count"] = 5
    answer["firstTimestamp"] = "2023-12-31T00:00:00Z"
    # getEventKey ignores involvedObject.resourceVersion and any metadata.
    answer["involvedObject"]["resourceVersion"] = "999"
    c.update_state(answer)
    r = c.correlate(copy.deepcopy(e))
    assert r.event["metadata"]["resourceVersion"] == "100"
    assert r.event["metadata"]["name"] == "server-name"
    assert r.event["count"] == 6
    assert r.event["firstTimestamp"] == "2023-12-31T00:00:00Z"


def test_update_state_of_an_unseen_event_inserts_under_its_event_key():
    c = kubevents.Correlator(clock=FakeClock(START))
    e = make_event("R", "m", make_object_reference("Pod", "p", "ns"))
    other = copy.deepcopy(e)
    other["message"] = "other"
    other["metadata"] = {"name": "o", "resourceVersion": "7"}
    c.update_state(other)
    r = c.correlate(copy.deepcopy(e))  # a different message is a different key
    assert r.event["count"] == 1 and "resourceVersion" not in r.event["metadata"]
    r = c.correlate(copy.deepcopy(other))
    assert r.event["count"] == 2
    assert r.event["metadata"]["resourceVersion"] == "7" and r.event["metadata"]["name"] == "o"


def test_update_state_of_an_aggregate_does_not_reach_the_aggregate_entry():
    # Section 2.9: eventObserve counted the aggregate under the aggregate key; UpdateState writes under the
    # aggregate event's getEventKey, so the server's resourceVersion is not used by the next aggregate.
    clock = FakeClock(START)
    c = kubevents.Correlator(clock=clock, max_events=2)
    ref = make_object_reference("Pod", "p", "ns")
    c.correlate(make_event("R", "a", ref))
    r = c.correlate(make_event("R", "b", ref))
    assert r.aggregated
    answer = copy.deepcopy(r.event)
    answer["metadata"]["resourceVersion"] = "55"
    answer["count"] = 40
    c.update_state(answer)
    clock.step(1)
    r2 = c.correlate(make_event("R", "c", ref))
    assert r2.aggregated
    assert r2.event["count"] == 2
    assert "resourceVersion" not in r2.event["metadata"]
    assert r2.event["metadata"]["name"] == r.event["metadata"]["name"]


# --- Token bucket -------------------------------------------------------------------------------------

def _go_allows(tokens: float, elapsed_ns: int, qps: float, burst: int) -> bool:
    """x/time/rate AllowN(now, 1) on a bucket with `tokens` left `elapsed_ns` ago."""
    secs = (elapsed_ns // NS) + (elapsed_ns % NS) / 1e9
    t = min(tokens + secs * qps, float(burst)) - 1.0
    return t >= 0 or int((-t / qps) * 1e9) <= 0


def test_token_bucket_default_burst_and_float32_refill():
    assert kubevents.DEFAULT_QPS == QPS32
    clock = FakeClock(START)
    c = kubevents.Correlator(clock=clock)
    e = make_event("R", "m", make_object_reference("Pod", "p", "ns"))
    skips = [c.correlate(copy.deepcopy(e)).skip for _ in range(26)]
    assert skips == [False] * 25 + [True]
    t_last = clock.now_ns()

    def at(offset_ns: int) -> bool:
        _set_ns(clock, t_last + offset_ns)
        return c.correlate(copy.deepcopy(e)).skip

    assert at(299 * NS) is True
    # The rejection at +299 s did not restart the refill: at +300 s one token is back.
    assert at(300 * NS) is False
    assert at(300 * NS) is True
    assert at(599 * NS) is True
    assert at(600 * NS) is False


def _set_ns(clock, ns: int) -> None:
    clock.set(ns // NS)
    clock.step((ns % NS) / 1e9)
    assert clock.now_ns() == ns


def test_token_bucket_refill_boundary_uses_float32_qps():
    # float32(1/300) > 1/300, so the token is back a few microseconds before 300 s; find Go's exact
    # nanosecond and check both sides. With a float64 1/300 this instant would still be spam.
    lo, hi = 299 * NS, 300 * NS
    assert not _go_allows(0.0, lo, QPS32, 25) and _go_allows(0.0, hi, QPS32, 25)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _go_allows(0.0, mid, QPS32, 25):
            hi = mid
        else:
            lo = mid
    boundary = hi
    assert boundary < 300 * NS - 1000  # a float64 qps of exactly 1/300 would need the full 300 s
    assert not _go_allows(0.0, boundary, 1.0 / 300.0, 25)

    clock = FakeClock(START)
    c = kubevents.Correlator(clock=clock)
    e = make_event("R", "m", make_object_reference("Pod", "p", "ns"))
    for _ in range(25):
        assert not c.correlate(copy.deepcopy(e)).skip
    t0 = clock.now_ns()
    _set_ns(clock, t0 + boundary - 1)
    assert c.correlate(copy.deepcopy(e)).skip
    _set_ns(clock, t0 + boundary)
    assert not c.correlate(copy.deepcopy(e)).skip


def test_spam_filter_counts_every_occurrence_and_skipped_ones_still_count():
    clock = FakeClock(START)
    c = kubevents.Correlator(clock=clock, burst=2)
    e = make_event("R", "m", make_object_reference("Pod", "p", "ns"))
    rs = [c.correlate(copy.deepcopy(e)) for _ in range(4)]
    assert [r.skip for r in rs] == [False, False, True, True]
    assert all(r.event is None and r.patch is None for r in rs[2:])
    clock.step(300)
    r = c.correlate(copy.deepcopy(e))
    assert not r.skip
    assert r.event["count"] == 5  # the skipped occurrences were counted
    assert json.loads(r.patch)["count"] == 5


def test_spam_buckets_are_per_type_not_per_reason_or_container():
    clock = FakeClock(START)
    c = kubevents.Correlator(clock=clock, burst=1)
    ref = make_object_reference("Pod", "p", "ns")
    assert not c.correlate(make_event("A", "m", ref)).skip
    other = make_event("B", "n", ref)
    other["involvedObject"]["fieldPath"] = "spec.containers{other}"
    assert c.correlate(other).skip
    warning = make_event("A", "m", ref)
    warning["type"] = "Warning"
    assert not c.correlate(warning).skip


# --- LRU ----------------------------------------------------------------------------------------------

def test_lru_eviction_most_recently_used_survives():
    clock = FakeClock(START)
    c = kubevents.Correlator(clock=clock, lru_cache_size=2)

    def occur(name):
        clock.step(1)
        r = c.correlate(make_event("R", "m", make_object_reference("Pod", name, "ns")))
        assert not r.skip
        c.update_state(r.event)
        return r.event["count"]

    assert [occur(n) for n in ("a", "b", "a")] == [1, 1, 2]
    assert occur("c") == 1   # evicts b, the least recently used
    assert occur("a") == 3   # a survived
    assert occur("b") == 1   # b was evicted: a new event (evicts c)
    assert occur("a") == 4
    assert occur("c") == 1


def test_lru_eviction_of_a_spam_bucket_gives_a_full_bucket():
    clock = FakeClock(START)
    c = kubevents.Correlator(clock=clock, lru_cache_size=2, burst=1)

    def skip(name):
        return c.correlate(make_event("R", "m", make_object_reference("Pod", name, "ns"))).skip

    assert [skip("a"), skip("a"), skip("b"), skip("a"), skip("c")] == [False, True, False, True, False]
    # c evicted b (a was used more recently): a is still empty, b gets a new full bucket.
    assert skip("a") is True
    assert skip("b") is False


def test_zero_options_select_the_defaults():
    clock = FakeClock(START)
    c = kubevents.Correlator(clock=clock, burst=0, qps=0, max_events=0, max_interval=0, lru_cache_size=0)
    e = make_event("R", "m", make_object_reference("Pod", "p", "ns"))
    assert [c.correlate(copy.deepcopy(e)).skip for _ in range(26)] == [False] * 25 + [True]
    ref = make_object_reference("Pod", "q", "ns")
    flags = [c.correlate(make_event("R", f"m{i}", ref)).aggregated for i in range(10)]
    assert flags == [False] * 9 + [True]


# --- Go integer semantics of the count, and MicroTime fields ------------------------------------------

@pytest.mark.parametrize("count, next_count", [(2**31 - 1, -(2**31)), (-5, -4)])
def test_count_follows_go_uint_and_int32_conversions(count, next_count):
    # eventLog.count is uint(event.Count): a negative count is a huge uint, so it counts as "seen", and
    # int32(count) + 1 wraps.
    c = kubevents.Correlator(clock=FakeClock(START))
    e = make_event("R", "m", make_object_reference("Pod", "p", "ns"))
    e["count"] = count
    r = c.correlate(copy.deepcopy(e))
    assert r.patch is None and r.event["count"] == count
    r = c.correlate(copy.deepcopy(e))
    assert r.event["count"] == next_count
    assert json.loads(r.patch)["count"] == next_count


def test_micro_time_fields_round_trip_with_six_digits():
    c = kubevents.Correlator(clock=FakeClock(START))
    e = make_event("R", "m", make_object_reference("Pod", "p", "ns"))
    e["eventTime"] = "2024-01-01T00:00:03.5Z"
    e["series"] = {"count": 2, "lastObservedTime": "2024-01-01T01:00:03.000001+01:00"}
    e["firstTimestamp"] = "2024-01-01T00:00:01.999Z"
    r = c.correlate(e)
    assert r.event["eventTime"] == "2024-01-01T00:00:03.500000Z"
    assert r.event["series"] == {"count": 2, "lastObservedTime": "2024-01-01T00:00:03.000001Z"}
    assert r.event["firstTimestamp"] == "2024-01-01T00:00:01Z"


def test_time_going_backwards_refills_nothing():
    clock = FakeClock(100)
    c = kubevents.Correlator(clock=clock, burst=1, qps=1.0)
    e = make_event("R", "m", make_object_reference("Pod", "p", "ns"))
    assert not c.correlate(copy.deepcopy(e)).skip
    clock.set(50)
    assert c.correlate(copy.deepcopy(e)).skip
    clock.set(100.999)
    assert c.correlate(copy.deepcopy(e)).skip
    clock.set(101)
    assert not c.correlate(copy.deepcopy(e)).skip
