"""kubevents.make_event: client-go's recorder makeEvent/generateEvent, and util_test.go's
TestGenerateEventName."""

from __future__ import annotations

import datetime as dt
import re
import uuid

import pytest

import kubevents
from kubevents.testing import FakeClock

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
POD = {"kind": "Pod", "namespace": "baz", "name": "foo", "uid": "bar", "apiVersion": "v1",
       "fieldPath": "spec.containers[2]"}


def is_dns_subdomain(s: str) -> bool:
    return len(s) <= 253 and DNS_SUBDOMAIN.match(s) is not None


def clock_at_ns(ns: int) -> FakeClock:
    clock = FakeClock(ns // 10**9)
    clock.step((ns % 10**9) / 1e9)
    assert clock.now_ns() == ns
    return clock


def test_generate_event_name_valid():
    clock = clock_at_ns(105999103295324396)
    ev = kubevents.make_event({"kind": "Pod", "name": "test-pod"}, "Normal", "R", "m", source="s", clock=clock)
    assert ev["metadata"]["name"] == "test-pod.178959f726d80ec"


@pytest.mark.parametrize("name", ["x" * 300, "test.POD", "test.pod/invalid!chars?", "--test.pod/invalid!chars?",
                                  "", "a_b", "é"])
def test_generate_event_name_invalid_gives_uuid4(name):
    clock = clock_at_ns(105999103295324396)
    names = set()
    for _ in range(2):
        ev = kubevents.make_event({"kind": "Pod", "name": name}, "Normal", "R", "m", source="s", clock=clock)
        got = ev["metadata"]["name"]
        assert is_dns_subdomain(got), got
        u = uuid.UUID(got)
        assert u.version == 4 and str(u) == got
        names.add(got)
        # The involved object keeps the name it was given.
        assert ev["involvedObject"].get("name", "") == name
    assert len(names) == 2  # a fresh random UUID each time


def test_name_of_253_characters_is_kept_and_254_is_not():
    ns = 1_700_000_000 * 10**9
    suffix = "." + format(ns, "x")
    clock = clock_at_ns(ns)
    ok = "a" * (253 - len(suffix))
    ev = kubevents.make_event({"name": ok}, "Normal", "R", "m", source="s", clock=clock)
    assert ev["metadata"]["name"] == ok + suffix
    ev = kubevents.make_event({"name": ok + "a"}, "Normal", "R", "m", source="s", clock=clock)
    assert uuid.UUID(ev["metadata"]["name"]).version == 4


def test_event_built_as_client_go_builds_it():
    clock = FakeClock(dt.datetime(2024, 1, 1, 0, 0, 1, tzinfo=dt.timezone.utc))
    ev = kubevents.make_event(POD, "Normal", "Started", "some verbose message: 1",
                              source={"component": "kubelet", "host": "node-1"}, clock=clock,
                              annotations={"example.com/a": "1", "b": ""})
    assert ev == {
        "metadata": {"name": "foo.17a610173cffca00", "namespace": "baz",
                     "annotations": {"example.com/a": "1", "b": ""}},
        "involvedObject": POD,
        "reason": "Started",
        "message": "some verbose message: 1",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2024-01-01T00:00:01Z",
        "lastTimestamp": "2024-01-01T00:00:01Z",
        "count": 1,
        "type": "Normal",
        "eventTime": None,
        "reportingComponent": "kubelet",
        "reportingInstance": "node-1",
    }


def test_namespace_defaults_but_involved_object_keeps_empty():
    clock = FakeClock(1_700_000_000)
    ref = {"kind": "Node", "name": "node-1", "uid": "u"}
    ev = kubevents.make_event(ref, "Warning", "NodeNotReady", "m", source="node-controller", clock=clock)
    assert ev["metadata"]["namespace"] == "default"
    assert "namespace" not in ev["involvedObject"]
    assert ev["involvedObject"] == ref


def test_source_as_str_or_dict():
    clock = FakeClock(1_700_000_000)
    a = kubevents.make_event(POD, "Normal", "R", "m", source="kubelet", clock=clock)
    assert a["source"] == {"component": "kubelet"}
    assert (a["reportingComponent"], a["reportingInstance"]) == ("kubelet", "")
    b = kubevents.make_event(POD, "Normal", "R", "m", source={"component": "kubelet", "host": "h"}, clock=clock)
    assert b["source"] == {"component": "kubelet", "host": "h"}
    assert (b["reportingComponent"], b["reportingInstance"]) == ("kubelet", "h")
    c = kubevents.make_event(POD, "Normal", "R", "m", source={"host": "only-host"}, clock=clock)
    assert (c["reportingComponent"], c["reportingInstance"]) == ("", "only-host")


def test_count_one_and_first_equals_last_at_the_clock_time():
    clock = FakeClock(1_700_000_000.75)
    ev = kubevents.make_event(POD, "Normal", "R", "m", source="s", clock=clock)
    assert ev["count"] == 1
    assert ev["firstTimestamp"] == ev["lastTimestamp"] == "2023-11-14T22:13:20Z"
    assert ev["metadata"]["name"] == f"foo.{1_700_000_000_750_000_000:x}"
    clock.step(3)
    ev2 = kubevents.make_event(POD, "Normal", "R", "m", source="s", clock=clock)
    assert ev2["firstTimestamp"] == "2023-11-14T22:13:23Z"


def test_without_annotations_there_is_no_annotations_key():
    ev = kubevents.make_event(POD, "Normal", "R", "m", source="s", clock=FakeClock(0))
    assert "annotations" not in ev["metadata"]
    assert "resourceVersion" not in ev["metadata"]


def test_involved_resource_version_is_kept():
    ref = dict(POD, resourceVersion="42")
    ev = kubevents.make_event(ref, "Normal", "R", "m", source="s", clock=FakeClock(0))
    assert ev["involvedObject"]["resourceVersion"] == "42"
    assert "resourceVersion" not in ev["metadata"]


def test_made_event_correlates_and_round_trips():
    clock = FakeClock(1_700_000_000)
    ev = kubevents.make_event(POD, "Normal", "R", "m", source={"component": "c", "host": "h"}, clock=clock,
                              annotations={"k": "v"})
    r = kubevents.Correlator(clock=clock).correlate(ev)
    assert r.event == ev


def test_obj_ref_of_the_wrong_type_is_a_type_error_naming_obj_ref():
    with pytest.raises(TypeError, match="obj_ref"):
        kubevents.make_event("not a dict", "Normal", "R", "m", source="s", clock=FakeClock(0))


def test_source_of_the_wrong_type_is_a_type_error_naming_source():
    with pytest.raises(TypeError, match="source"):
        kubevents.make_event(POD, "Normal", "R", "m", source=42, clock=FakeClock(0))
    with pytest.raises(TypeError, match=r"source\.component"):
        kubevents.make_event(POD, "Normal", "R", "m", source={"component": 5}, clock=FakeClock(0))
