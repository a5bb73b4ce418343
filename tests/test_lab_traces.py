"""kubevents.traces: synthetic workloads, JSON Lines files, and traces read from `kubectl get events -o json`
dumps."""

from __future__ import annotations

import copy
import json
import pathlib
import re
import statistics
from collections import Counter, defaultdict

import pytest

import kubevents
from kubevents.traces import MAX_COUNT, WORKLOADS, KubectlTrace, Workload, from_kubectl, generate, read_jsonl, write_jsonl

ROOT = pathlib.Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "notebooks" / "data" / "kubectl-get-events.json"
S = 10**9
MS = 10**6
BASE_NS = 1_700_000_000 * S  # where every synthetic workload starts
N = 2500


def pod_index(r):
    name = r["involved"]["name"]
    assert re.fullmatch(r"pod-\d+", name), name
    return int(name[4:])


def gaps(records):
    return [b["t_ns"] - a["t_ns"] for a, b in zip(records, records[1:], strict=False)]


def check_unique(records):
    assert [r["t_ns"] for r in records] == [BASE_NS + i * MS for i in range(N)]
    assert len({r["involved"]["name"] for r in records}) == N
    for r in records:
        assert (r["type"], r["reason"], r["involved"]["namespace"]) == ("Normal", "Scheduled", "default")
        assert r["message"] == f'Successfully assigned default/{r["involved"]["name"]} to {r["source_host"]}'
    assert {r["source_host"] for r in records} == {f"node-{i}" for i in range(50)}


def check_identical(records):
    assert gaps(records) == [50 * MS] * (N - 1)
    visits = Counter(pod_index(r) for r in records)
    assert set(visits) == set(range(200)) and set(visits.values()) <= {N // 200, N // 200 + 1}
    order = [pod_index(r) for r in records[:200]]
    assert order != sorted(order), "the pods are visited in a scrambled order"
    for r in records:
        assert (r["type"], r["reason"], r["involved"]["field_path"]) == ("Warning", "BackOff", "spec.containers{app}")
        assert r["message"] == f'Back-off restarting failed container app in pod {r["involved"]["name"]}'


def check_similar(records):
    assert gaps(records) == [20 * MS] * (N - 1)
    messages = defaultdict(set)
    for r in records:
        assert (r["type"], r["reason"]) == ("Warning", "FailedMount")
        m = re.fullmatch(r'MountVolume.SetUp failed for volume "vol-(\d+)" : secret "s-(\d+)" not found', r["message"])
        assert m and m[1] == m[2] and int(m[1]) < 30, r["message"]
        messages[pod_index(r)].add(r["message"])
    assert set(messages) == set(range(100))
    assert max(len(v) for v in messages.values()) <= 30 and len(set().union(*messages.values())) == 30


def check_mixed(records):
    reasons = {"Pulling": "Normal", "Pulled": "Normal", "Created": "Normal", "Started": "Normal", "Killing": "Normal",
               "BackOff": "Warning", "Unhealthy": "Warning", "FailedMount": "Warning"}
    by_reason = Counter(r["reason"] for r in records)
    assert set(by_reason) == set(reasons) and by_reason.most_common(1)[0][0] == "BackOff"
    for r in records:
        assert r["type"] == reasons[r["reason"]]
        assert r["involved"]["namespace"] == f"ns-{pod_index(r) % 40}" and pod_index(r) < 5000
    # Exponential gaps with a mean of 5 ms, never two events at once.
    assert min(gaps(records)) >= 1 and 4.5 * MS <= statistics.mean(gaps(records)) <= 5.5 * MS
    # Skewed: the first tenth of the pods gets a third of the events or more.
    assert sum(1 for r in records if pod_index(r) < 500) >= N / 3
    # Immediate repeats: an event that is its pod's previous one again, but for the time.
    last, repeats, seen = {}, 0, 0
    for r in records:
        same = {k: v for k, v in r.items() if k != "t_ns"}
        if pod_index(r) in last:
            seen += 1
            repeats += last[pod_index(r)] == same
        last[pod_index(r)] = same
    assert 0.10 <= repeats / seen <= 0.25


def check_storm(records):
    assert [r["t_ns"] for r in records] == [BASE_NS + i * MS for i in range(N)]
    assert [pod_index(r) for r in records] == [i % 20 for i in range(N)]
    assert {(r["type"], r["reason"], r["message"], r["source_host"]) for r in records} == {
        ("Warning", "BackOff", "Back-off restarting failed container app", "node-0")}


CHECKS = {"unique": check_unique, "identical": check_identical, "similar": check_similar, "mixed": check_mixed,
          "storm": check_storm}


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_each_workload_is_what_its_documentation_says(workload):
    """The records behind the benchmark figures: each workload as ``WORKLOADS`` describes it, and the same
    records for the same seed."""
    assert set(CHECKS) == set(WORKLOADS)
    for seed in (1, 9):
        records = list(generate(workload, n=N, seed=seed))
        assert len(records) == N and records == list(generate(workload, n=N, seed=seed))
        for r in records:
            assert set(r) == {"t_ns", "source_component", "source_host", "involved", "type", "reason", "message"}
            assert r["source_component"] == "kubelet"
            i = r["involved"]
            assert (i["kind"], i["api_version"], i["uid"]) == ("Pod", "v1", f'uid-{i["name"]}')
        assert [r["t_ns"] for r in records] == sorted(r["t_ns"] for r in records)
        assert BASE_NS <= records[0]["t_ns"] < BASE_NS + S
        CHECKS[workload](records)
        assert kubevents.simulate(records).totals["events"] == N
    if workload in ("similar", "mixed"):
        assert list(generate(workload, n=N, seed=1)) != list(generate(workload, n=N, seed=9))


def test_a_workload_iterates_again_with_the_same_records():
    w = generate("similar", n=500, seed=3)
    assert isinstance(w, Workload) and len(w) == 500
    first = list(w)
    assert first == list(w) and len(first) == 500
    assert first != list(generate("similar", n=500, seed=4))
    # Re-iterable, so decisions() can replay it.
    sim = kubevents.simulate(w)
    assert sum(1 for _ in sim.decisions()) == 500


@pytest.mark.parametrize("args, match", [(("nope", 5, 1), "unknown workload 'nope'"), (("storm", -1, 1), "n must be")])
def test_generate_rejects_bad_arguments(args, match):
    with pytest.raises(ValueError, match=match):
        generate(*args)


def test_jsonl_round_trip(tmp_path):
    records = list(generate("mixed", n=300, seed=2))
    path = tmp_path / "m.jsonl"
    assert write_jsonl(records, path) == 300
    assert list(read_jsonl(path)) == records
    assert kubevents.simulate(path).totals == kubevents.simulate(records).totals
    path.write_text(path.read_text() + "\n\n{broken\n")
    with pytest.raises(ValueError, match=r"line 303"):
        list(read_jsonl(path))


def core_event(name, reason, message, count, first, last, **extra):
    e = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.17a6", "namespace": "web"},
        "involvedObject": {"kind": "Pod", "namespace": "web", "name": name, "uid": f"uid-{name}",
                           "apiVersion": "v1", "fieldPath": "spec.containers{app}"},
        "reason": reason,
        "message": message,
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": first,
        "lastTimestamp": last,
        "count": count,
        "type": "Warning",
        "eventTime": None,
        "reportingComponent": "kubelet",
        "reportingInstance": "node-1",
    }
    e.update(extra)
    return e


T = 1_704_067_200 * S  # 2024-01-01T00:00:00Z


def test_core_v1_list_spreads_each_count_evenly():
    dump = {"apiVersion": "v1", "kind": "List", "items": [
        core_event("api-0", "BackOff", "Back-off restarting", 4, "2024-01-01T00:00:00Z", "2024-01-01T00:01:00Z"),
        core_event("api-1", "Pulled", "Pulled image", 1, "2024-01-01T00:00:30Z", "2024-01-01T00:00:30Z"),
        core_event("api-2", "Unhealthy", "(combined from similar events): probe failed: 7", 3,
                   "2024-01-01T00:00:10Z", "2024-01-01T00:00:11Z"),
    ]}
    trace = list(from_kubectl(dump))
    got = [(r["t_ns"] - T, r["involved"]["name"], r["reason"], r["message"]) for r in trace]
    assert got == [
        (0, "api-0", "BackOff", "Back-off restarting"),
        (10 * S, "api-2", "Unhealthy", "probe failed: 7"),
        (10 * S + S // 2, "api-2", "Unhealthy", "probe failed: 7"),
        (11 * S, "api-2", "Unhealthy", "probe failed: 7"),
        (20 * S, "api-0", "BackOff", "Back-off restarting"),
        (30 * S, "api-1", "Pulled", "Pulled image"),  # ties keep the dump's order
        (40 * S, "api-0", "BackOff", "Back-off restarting"),
        (60 * S, "api-0", "BackOff", "Back-off restarting"),
    ]
    r = trace[0]
    assert r["involved"] == {"kind": "Pod", "namespace": "web", "name": "api-0", "uid": "uid-api-0",
                             "api_version": "v1", "resource_version": "", "field_path": "spec.containers{app}"}
    assert (r["source_component"], r["source_host"], r["type"]) == ("kubelet", "node-1", "Warning")
    # A replay of the dump writes the first occurrence of each event, then counts the rest.
    assert kubevents.simulate(trace).totals == {"events": 8, "creates": 3, "patches": 5, "skips": 0, "aggregated": 0}


def test_core_v1_series_event_recorded_through_events_k8s_io():
    # How `kubectl get events` shows an event the scheduler recorded through events.k8s.io/v1.
    e = core_event("db-0", "FailedScheduling", "0/6 nodes are available", None, None, None,
                   eventTime="2024-01-01T00:00:00.250000Z", source={}, reportingComponent="default-scheduler",
                   reportingInstance="default-scheduler-node-0",
                   series={"count": 3, "lastObservedTime": "2024-01-01T00:00:02.250000Z"})
    del e["count"]
    trace = from_kubectl([e])
    assert [r["t_ns"] - T for r in trace] == [S // 4, S + S // 4, 2 * S + S // 4]
    assert {(r["source_component"], r["source_host"]) for r in trace} == {
        ("default-scheduler", "default-scheduler-node-0")}


def test_events_k8s_io_v1_list():
    dump = {"apiVersion": "v1", "kind": "List", "items": [
        {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "db-0.17a6", "namespace": "data", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "eventTime": "2024-01-01T00:00:00.000000Z",
            "series": {"count": 5, "lastObservedTime": "2024-01-01T00:00:08.000000Z"},
            "reportingController": "default-scheduler",
            "reportingInstance": "default-scheduler-node-0",
            "action": "Scheduling",
            "reason": "FailedScheduling",
            "regarding": {"kind": "Pod", "namespace": "data", "name": "db-0", "uid": "u-db-0", "apiVersion": "v1"},
            "note": "0/6 nodes are available",
            "type": "Warning",
        },
        {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "db-0.17a7", "namespace": "data"},
            "eventTime": None,
            "reason": "BackOff",
            "regarding": {"kind": "Pod", "namespace": "data", "name": "db-0", "uid": "u-db-0", "apiVersion": "v1",
                          "fieldPath": "spec.containers{db}"},
            "note": "Back-off restarting failed container db",
            "type": "Warning",
            "deprecatedSource": {"component": "kubelet", "host": "node-2"},
            "deprecatedFirstTimestamp": "2024-01-01T00:00:01Z",
            "deprecatedLastTimestamp": "2024-01-01T00:00:04Z",
            "deprecatedCount": 2,
        },
    ]}
    trace = list(from_kubectl(dump))
    got = [(r["t_ns"] - T, r["reason"], r["source_component"], r["source_host"]) for r in trace]
    assert got == [
        (0, "FailedScheduling", "default-scheduler", "default-scheduler-node-0"),
        (S, "BackOff", "kubelet", "node-2"),
        (2 * S, "FailedScheduling", "default-scheduler", "default-scheduler-node-0"),
        (4 * S, "FailedScheduling", "default-scheduler", "default-scheduler-node-0"),  # ties keep the dump's order
        (4 * S, "BackOff", "kubelet", "node-2"),
        (6 * S, "FailedScheduling", "default-scheduler", "default-scheduler-node-0"),
        (8 * S, "FailedScheduling", "default-scheduler", "default-scheduler-node-0"),
    ]
    assert trace[1]["message"] == "Back-off restarting failed container db"
    assert trace[1]["involved"]["field_path"] == "spec.containers{db}"


def test_the_shipped_sample_dump():
    dump = json.loads(SAMPLE.read_text())
    trace = from_kubectl(SAMPLE)
    assert list(trace) == list(from_kubectl(dump))
    counts = sum(i.get("count") or i["series"]["count"] for i in dump["items"])
    assert len(trace) == counts > len(dump["items"])
    assert [r["t_ns"] for r in trace] == sorted(r["t_ns"] for r in trace)
    assert kubevents.simulate(trace).totals["events"] == counts


@pytest.mark.parametrize("mutate, exc, match", [
    (lambda d: d["items"].__setitem__(0, "x"), TypeError, r"items\[0\]: expected an Event"),
    (lambda d: d["items"][0].__setitem__("count", -2), ValueError, r"items\[0\]\.count: must be a positive int, got -2"),
    (lambda d: d["items"][0].__setitem__("firstTimestamp", "yesterday"), ValueError,
     r"items\[0\]\.firstTimestamp: not an RFC 3339 time"),
    (lambda d: d["items"][0].update(firstTimestamp=None, lastTimestamp=None), ValueError, r"items\[0\]: no time"),
    (lambda d: d["items"][0]["involvedObject"].__setitem__("name", 5), TypeError,
     r"items\[0\]\.involvedObject\.name: expected a str"),
    (lambda d: d.pop("items"), ValueError, "expected a List with 'items'"),
    # A wrong type names its field (these were AttributeErrors, or silently taken as missing).
    (lambda d: d["items"][0].__setitem__("source", "kubelet"), TypeError,
     r"items\[0\]\.source: expected an object, got str"),
    (lambda d: d["items"][0]["source"].__setitem__("component", 7), TypeError,
     r"items\[0\]\.source\.component: expected a str, got int"),
    (lambda d: d["items"][0]["source"].update(host=["n"]), TypeError, r"items\[0\]\.source\.host: expected a str"),
    (lambda d: d["items"][0].update(source=None, reportingComponent=1), TypeError,
     r"items\[0\]\.reportingComponent: expected a str, got int"),
    (lambda d: d["items"][0].__setitem__("message", {"text": "m"}), TypeError,
     r"items\[0\]\.message: expected a str, got dict"),
    (lambda d: d["items"][0].__setitem__("reason", 3), TypeError, r"items\[0\]\.reason: expected a str, got int"),
    (lambda d: d["items"][0].__setitem__("type", True), TypeError, r"items\[0\]\.type: expected a str, got bool"),
    (lambda d: d["items"][0].__setitem__("count", "2"), TypeError, r"items\[0\]\.count: expected an int, got str"),
    (lambda d: d["items"][0].__setitem__("count", 2.0), TypeError, r"items\[0\]\.count: expected an int"),
    (lambda d: d["items"][0].update(count=None, series=5), TypeError,
     r"items\[0\]\.series: expected an object, got int"),
    (lambda d: d["items"][0].update(firstTimestamp=None, metadata="m"), TypeError,
     r"items\[0\]\.metadata: expected an object, got str"),
    (lambda d: d["items"][0].__setitem__("lastTimestamp", 5), TypeError,
     r"items\[0\]\.lastTimestamp: expected an RFC 3339 string, got int"),
    (lambda d: d.__setitem__("items", {"a": 1}), TypeError, r"items: expected a list of Events, got dict"),
    # Counts the API allows (int32) but that no replay should expand.
    (lambda d: d["items"][0].__setitem__("count", 2**31 - 1), ValueError,
     r"items\[0\]\.count: 2147483647 is above the limit of 1,000,000 occurrences per event"),
    (lambda d: d["items"][0].update(count=None, series={"count": MAX_COUNT + 1}), ValueError,
     r"items\[0\]\.series\.count: 1000001 is above the limit"),
])
def test_bad_dumps(mutate, exc, match):
    dump = {"kind": "List", "items": [core_event("a", "R", "m", 2, "2024-01-01T00:00:00Z", "2024-01-01T00:00:01Z")]}
    dump = copy.deepcopy(dump)
    mutate(dump)
    with pytest.raises(exc, match=match):
        from_kubectl(dump)


def test_bad_source():
    with pytest.raises(TypeError, match="expected a path"):
        from_kubectl(42)
    with pytest.raises(FileNotFoundError):
        from_kubectl("/nonexistent/events.json")


def test_v1_note_of_the_wrong_type_names_the_field():
    e = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "eventTime": "2024-01-01T00:00:00.000000Z",
         "regarding": {"kind": "Pod", "name": "p"}, "note": 5}
    with pytest.raises(TypeError, match=r"items\[0\]\.note: expected a str, got int"):
        from_kubectl([e])
    e.update(note="n", deprecatedSource="kubelet")
    with pytest.raises(TypeError, match=r"items\[0\]\.deprecatedSource: expected an object, got str"):
        from_kubectl([e])


def test_a_count_is_not_materialised():
    """A 400-byte dump of one event counted a million times took 600 MB as a list of records; the trace makes
    the occurrences as they are iterated (Python allocations measured with tracemalloc, not wall time)."""
    import itertools
    import tracemalloc

    dump = [core_event("a", "BackOff", "m", MAX_COUNT, "2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z"),
            core_event("b", "Pulled", "p", 3, "2024-01-01T12:00:00Z", "2024-01-01T12:00:00Z")]
    tracemalloc.start()
    try:
        trace = from_kubectl(dump)
        assert isinstance(trace, KubectlTrace) and len(trace) == MAX_COUNT + 3 and trace.events == 2
        first = list(itertools.islice(trace, 3))
        middle = list(itertools.islice(trace, MAX_COUNT // 2, MAX_COUNT // 2 + 5))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    assert [r["t_ns"] - T for r in first] == [0, 86_400 * S // (MAX_COUNT - 1), 2 * 86_400 * S // (MAX_COUNT - 1)]
    # Merged in time order: the three "b" occurrences at noon follow the 500,000 "a" occurrences before noon.
    assert [r["involved"]["name"] for r in middle] == ["b", "b", "b", "a", "a"]
    assert [r["t_ns"] - T for r in middle[2:4]] == [43_200 * S, 500_000 * 86_400 * S // (MAX_COUNT - 1)]


def test_a_kubectl_trace_iterates_again_and_travels_to_an_executor_as_it_is():
    from concurrent.futures import ThreadPoolExecutor

    trace = from_kubectl(SAMPLE)
    assert list(trace) == list(trace) and repr(trace).startswith("<KubectlTrace: ")
    sim = kubevents.simulate(trace)
    assert sum(1 for _ in sim.decisions()) == len(trace) == sim.totals["events"]
    seen = []

    class Recording(ThreadPoolExecutor):
        def submit(self, fn, *args, **kwargs):
            seen.append(args[0])
            return super().submit(fn, *args, **kwargs)

    with Recording(2) as ex:
        rows = kubevents.sweep(trace, {"burst": [5, 25]}, executor=ex, chunksize=1, progress=False)
    assert seen == [trace, trace]
    assert rows == kubevents.sweep(list(trace), {"burst": [5, 25]}, progress=False)
