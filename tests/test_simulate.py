"""kubevents.simulate: replays of traces, checked against hand-computed decisions and against a manual
loop of make_event + Correlator.correlate + update_state."""

from __future__ import annotations

import copy
import json
import pathlib

import pytest

import kubevents
from kubevents.testing import FakeClock
from kubevents import traces
from kubevents.traces import kubelet_storm

NS = 10**9
T0 = 1_700_000_000 * NS  # 2023-11-14T22:13:20Z


def rec(t_s, pod, message, *, reason="BackOff", type_="Warning", **extra):
    r = {
        "t_ns": T0 + t_s * NS,
        "source_component": "kubelet",
        "source_host": "node-0",
        "involved": {"kind": "Pod", "namespace": "web", "name": pod, "uid": f"uid-{pod}", "api_version": "v1"},
        "type": type_,
        "reason": reason,
        "message": message,
    }
    r.update(extra)
    return r


RECORDS = [
    rec(0, "p1", "m"),
    rec(1, "p1", "m"),
    rec(2, "p2", "assigned", reason="Scheduled", type_="Normal"),
    rec(3, "p1", "m"),
    rec(4, "p1", "m"),
    rec(5, "p3", "a", reason="Unhealthy"),
    rec(6, "p3", "b", reason="Unhealthy"),
    rec(7, "p3", "c", reason="Unhealthy"),
]
OPTIONS = dict(burst=3, max_events=2)
AGG = "(combined from similar events): "


def hexname(pod, t_s):
    return f"{pod}.{T0 + t_s * NS:x}"


EXPECTED = [dict(d, source_component="kubelet", source_host="node-0") for d in [
    dict(index=0, action="create", name=hexname("p1", 0), count=1, message="m", patch=None),
    dict(index=1, action="patch", name=hexname("p1", 0), count=2, message="m",
         patch='{"count":2,"lastTimestamp":"2023-11-14T22:13:21Z","message":"m"}'),
    dict(index=2, action="create", name=hexname("p2", 2), count=1, message="assigned", patch=None),
    dict(index=3, action="patch", name=hexname("p1", 0), count=3, message="m",
         patch='{"count":3,"lastTimestamp":"2023-11-14T22:13:23Z","message":"m"}'),
    dict(index=4, action="skip", name=None, count=None, message=None, patch=None),
    dict(index=5, action="create", name=hexname("p3", 5), count=1, message="a", patch=None),
    dict(index=6, action="create", name=hexname("p3", 6), count=1, message=AGG + "b", patch=None),
    dict(index=7, action="patch", name=hexname("p3", 6), count=2, message=AGG + "c",
         patch='{"count":2,"lastTimestamp":"2023-11-14T22:13:27Z","message":"(combined from similar events): c"}'),
]]
EXPECTED_TOTALS = {"events": 8, "creates": 4, "patches": 3, "skips": 1, "aggregated": 2}


def write_jsonl(path: pathlib.Path, records, blank_lines=False) -> pathlib.Path:
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
            if blank_lines:
                f.write("\n   \n")
    return path


# --- hand-written trace -------------------------------------------------------------------------------

def test_simulate_list_exact_totals_and_decisions():
    sim = kubevents.simulate(RECORDS, **OPTIONS)
    assert sim.totals == EXPECTED_TOTALS
    assert list(sim.decisions()) == EXPECTED
    t = sim.totals
    assert t["creates"] + t["patches"] + t["skips"] == t["events"] == len(RECORDS)
    assert repr(sim) == ('Simulation(events=8, creates=4, patches=3, skips=1, aggregated=2, correlators="per-source", '
                         'sources=1)')


def test_simulate_defaults_on_the_same_trace():
    sim = kubevents.simulate(RECORDS)
    # burst 25: nothing is skipped; max_events 10: nothing is aggregated.
    assert sim.totals == {"events": 8, "creates": 5, "patches": 3, "skips": 0, "aggregated": 0}
    actions = [d["action"] for d in sim.decisions()]
    assert actions == ["create", "patch", "create", "patch", "patch", "create", "create", "create"]


def test_jsonl_file_gives_the_same_decisions(tmp_path):
    path = write_jsonl(tmp_path / "trace.jsonl", RECORDS, blank_lines=True)
    from_list = kubevents.simulate(RECORDS, **OPTIONS)
    for p in (path, str(path)):
        sim = kubevents.simulate(p, **OPTIONS)
        assert sim.totals == from_list.totals
        assert list(sim.decisions()) == list(from_list.decisions()) == EXPECTED


def test_decisions_can_be_called_twice():
    sim = kubevents.simulate(RECORDS, **OPTIONS)
    first = list(sim.decisions())
    second = list(sim.decisions())
    assert first == second == EXPECTED
    # Two live iterators are independent replays.
    a, b = sim.decisions(), sim.decisions()
    assert next(a)["index"] == 0 and next(a)["index"] == 1 and next(b)["index"] == 0


def test_decisions_iterator_protocol():
    d = kubevents.simulate(RECORDS, **OPTIONS).decisions()
    assert iter(d) is d
    assert len(list(d)) == len(RECORDS)
    with pytest.raises(StopIteration):
        next(d)


def test_one_shot_generator_gives_totals_but_not_decisions():
    sim = kubevents.simulate((r for r in RECORDS), **OPTIONS)
    assert sim.totals == EXPECTED_TOTALS
    with pytest.raises(TypeError):
        sim.decisions()


def test_reiterable_object_replays():
    class Trace:
        def __iter__(self):
            return iter(RECORDS)

    sim = kubevents.simulate(Trace(), **OPTIONS)
    assert sim.totals == EXPECTED_TOTALS
    assert list(sim.decisions()) == EXPECTED


def test_per_object_and_top_objects():
    sim = kubevents.simulate(RECORDS, per_object=True, **OPTIONS)
    p1 = dict(kind="Pod", namespace="web", name="p1", events=4, writes=3, creates=1, patches=2, skips=1)
    p3 = dict(kind="Pod", namespace="web", name="p3", events=3, writes=3, creates=2, patches=1, skips=0)
    p2 = dict(kind="Pod", namespace="web", name="p2", events=1, writes=1, creates=1, patches=0, skips=0)
    # Most writes first; a tie (p1, p3) goes to the object with more events.
    assert sim.top_objects(2) == [p1, p3]
    assert sim.top_objects() == [p1, p3, p2]
    assert sim.top_objects(0) == []
    assert sum(o["events"] for o in sim.top_objects(100)) == sim.totals["events"]


def test_top_objects_needs_per_object():
    sim = kubevents.simulate(RECORDS, **OPTIONS)
    with pytest.raises(TypeError, match="per_object"):
        sim.top_objects(3)


def test_empty_trace():
    sim = kubevents.simulate([], per_object=True)
    assert sim.totals == {"events": 0, "creates": 0, "patches": 0, "skips": 0, "aggregated": 0}
    assert list(sim.decisions()) == []
    assert sim.top_objects() == []


def test_annotations_and_involved_resource_version_are_accepted():
    r = rec(0, "p1", "m", annotations={"a": "b"})
    r["involved"]["resource_version"] = "12"
    r["involved"]["field_path"] = "spec.containers{app}"
    sim = kubevents.simulate([r, dict(r, t_ns=r["t_ns"] + NS)])
    assert [d["action"] for d in sim.decisions()] == ["create", "patch"]


def test_only_t_ns_and_involved_are_required():
    sim = kubevents.simulate([{"t_ns": T0, "involved": {"name": "x"}}, {"t_ns": T0 + NS, "involved": {"name": "x"}}])
    d = list(sim.decisions())
    assert [x["action"] for x in d] == ["create", "patch"]
    assert d[0]["name"] == f"x.{T0:x}" and d[0]["message"] == ""
    assert d[1]["patch"] == '{"count":2,"lastTimestamp":"2023-11-14T22:13:21Z"}'


def test_uuid_fallback_names_repeat_across_replays():
    records = [rec(i, "Not_A_Subdomain", f"m{i}") for i in range(3)]
    sim = kubevents.simulate(records)
    a = [d["name"] for d in sim.decisions()]
    b = [d["name"] for d in kubevents.simulate(records).decisions()]
    assert a == b == [d["name"] for d in sim.decisions()]
    assert len(set(a)) == 3


def test_custom_key_funcs_are_used_by_simulate_and_its_replays():
    calls = []

    def spam_key(e):
        calls.append(e["reason"])
        return "one bucket"

    sim = kubevents.simulate(RECORDS, burst=2, spam_key_func=spam_key)
    assert sim.totals["skips"] == len(RECORDS) - 2
    assert len(calls) == len(RECORDS)
    assert [d["action"] for d in sim.decisions()] == ["create", "patch"] + ["skip"] * 6
    assert len(calls) == 2 * len(RECORDS)


# --- equivalence with a manual loop -------------------------------------------------------------------

def set_ns(clock: FakeClock, ns: int) -> None:
    clock.set(ns // NS)
    clock.step((ns % NS) / 1e9)
    assert clock.now_ns() == ns


def manual(records, per_source=False, **options):
    """What simulate does, spelled out with the public API: make_event, correlate, update_state; with
    ``per_source``, one correlator for each source, as in a cluster."""
    clock = FakeClock(0)
    correlators = {}
    decisions = []
    totals = {"events": 0, "creates": 0, "patches": 0, "skips": 0, "aggregated": 0}
    rv = 1
    for i, r in enumerate(records):
        set_ns(clock, r["t_ns"])
        key = (r.get("source_component", ""), r.get("source_host", "")) if per_source else None
        if key not in correlators:
            correlators[key] = kubevents.Correlator(clock=clock, **options)
        c = correlators[key]
        inv = r["involved"]
        ref = {"kind": inv.get("kind", ""), "namespace": inv.get("namespace", ""), "name": inv.get("name", ""),
               "uid": inv.get("uid", ""), "apiVersion": inv.get("api_version", ""),
               "resourceVersion": inv.get("resource_version", ""), "fieldPath": inv.get("field_path", "")}
        source = {"component": r.get("source_component", ""), "host": r.get("source_host", "")}
        ev = kubevents.make_event(ref, r.get("type", ""), r.get("reason", ""), r.get("message", ""),
                                  source=source, clock=clock, annotations=r.get("annotations") or None)
        res = c.correlate(ev)
        totals["events"] += 1
        totals["aggregated"] += res.aggregated
        if res.skip:
            assert res.event is None and res.patch is None
            totals["skips"] += 1
            decisions.append(dict(index=i, action="skip", name=None, count=None, message=None, patch=None,
                                  source_component=source["component"], source_host=source["host"]))
            continue
        e = res.event
        if e["count"] > 1:
            action = "patch"
            answer = e  # the server's answer to these patches is the event as sent
        else:
            action = "create"
            answer = copy.deepcopy(e)
            answer["metadata"]["resourceVersion"] = str(rv)
            rv += 1
        c.update_state(answer)
        totals[action + "es" if action == "patch" else "creates"] += 1
        decisions.append(dict(index=i, action=action, name=e["metadata"]["name"], count=e["count"],
                              message=e.get("message", ""),
                              patch=None if res.patch is None else res.patch.decode("utf-8"),
                              source_component=source["component"], source_host=source["host"]))
    return totals, decisions


def assert_equivalent(records, **options):
    """simulate equals the manual loop, with one correlator per source and with one shared."""
    for correlators in ("per-source", "shared"):
        sim = kubevents.simulate(records, correlators=correlators, **options)
        totals, decisions = manual(records, per_source=correlators == "per-source", **options)
        assert sim.totals == totals
        got = list(sim.decisions())
        assert len(got) == len(decisions)
        for g, d in zip(got, decisions):
            assert g == d
    return totals


def test_manual_loop_matches_hand_written_expectations():
    totals, decisions = manual(RECORDS, **OPTIONS)
    assert totals == EXPECTED_TOTALS
    assert decisions == EXPECTED


def test_simulate_equals_manual_loop_on_kubelet_storm():
    trace = kubelet_storm(seed=7, minutes=30)
    assert len(trace) > 1024  # more than one batch
    totals = assert_equivalent(trace)
    # The storm exercises every path.
    assert totals["creates"] and totals["patches"] and totals["skips"] and totals["aggregated"]


def test_simulate_equals_manual_loop_with_small_options():
    trace = kubelet_storm(seed=3, minutes=10)
    totals = assert_equivalent(trace, burst=4, qps=0.05, max_events=3, max_interval=30, lru_cache_size=8)
    assert totals["skips"] and totals["aggregated"]


def test_simulate_equals_manual_loop_on_synthetic_trace():
    trace = []
    for i in range(300):
        pod = f"pod-{i % 7}"
        msg = f"message {i % 5}" if i % 3 else "same"
        trace.append(rec(i // 3, pod, msg, reason=("A", "B")[i % 2], type_=("Normal", "Warning")[i % 4 == 0],
                         annotations={"i": str(i)} if i % 10 == 0 else {}))
    assert_equivalent(trace, burst=5, qps=0.5, max_events=4)


def test_kubelet_storm_is_deterministic_and_sorted():
    a, b = kubelet_storm(seed=5, minutes=5), kubelet_storm(seed=5, minutes=5)
    assert a == b
    assert [r["t_ns"] for r in a] == sorted(r["t_ns"] for r in a)
    assert kubevents.simulate(a).totals == kubevents.simulate(b).totals


@pytest.mark.parametrize("workload", ["mixed", "similar", "storm"])
def test_simulate_equals_manual_loop_on_workloads(workload):
    trace = list(traces.generate(workload, n=1500, seed=1))
    assert_equivalent(trace)


def test_workload_file_and_list_agree(tmp_path):
    trace = list(traces.generate("mixed", n=2000, seed=2))
    path = write_jsonl(tmp_path / "mixed.jsonl", trace)
    a, b = kubevents.simulate(trace, per_object=True), kubevents.simulate(path, per_object=True)
    assert a.totals == b.totals
    assert a.top_objects(20) == b.top_objects(20)
    assert list(a.decisions()) == list(b.decisions())
