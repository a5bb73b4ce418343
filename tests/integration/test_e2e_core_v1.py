"""core/v1 Events through the official clients: a replay of the ``mixed`` workload, on a FakeClock, leaves on
the API server exactly what ``MemorySink`` holds after the same calls, read back from the server."""

from __future__ import annotations

from typing import Any

import kubernetes.client as k8s
import pytest

import kubevents
from cluster_support import record_each
from e2e_support import CORE_V1, CORE_V1_SINKS, WAIT, list_events, record, start, unique_name
from kubevents.sinks import MemorySink
from kubevents.traces import generate

EVENTS = 3000  # a few thousand: well within a test cluster's rate limits
SEED = 1
T0 = 1_700_000_000
FIELDS = ("count", "message", "reason", "type", "firstTimestamp", "lastTimestamp")


def replay(namespace: str, clock: kubevents.FakeClock):
    """Records the workload, every object moved into ``namespace``, one recorder per source, each event
    handled before the clock moves on: the same decisions in every run."""
    return lambda b: record_each(b, generate("mixed", EVENTS, seed=SEED), namespace, clock)


def kept(events: list[dict[str, Any]], uids: set[str]) -> dict[str, dict[str, Any]]:
    """The compared fields of the workload's events (those about its objects), by name."""
    return {e["metadata"]["name"]: {f: e.get(f) for f in FIELDS} for e in events if e["involvedObject"]["uid"] in uids}


def clock() -> kubevents.FakeClock:
    return kubevents.FakeClock(next(iter(generate("mixed", 1, seed=SEED)))["t_ns"] / 1e9)


@pytest.mark.parametrize("sink_name", CORE_V1_SINKS)
def test_a_replay_leaves_on_the_server_what_memory_sink_holds(server, sink_name):
    ns = server.namespace
    memory = MemorySink()
    c = clock()
    b = start(memory, CORE_V1, c)
    replay(ns, c)(b)
    expected_stats = b.shutdown(timeout=WAIT)

    c = clock()
    stats = record(server, sink_name, replay(ns, c), clock=c)

    uids = {r["involved"]["uid"] for r in generate("mixed", EVENTS, seed=SEED)}
    with server.api_client() as client:
        on_server = kept(list_events(client, ns), uids)
    expected = kept(memory.events(), uids)
    assert len(on_server) == len(expected) > 1000
    assert on_server == expected
    counters = ("received", "created", "patched", "skipped", "aggregated", "abandoned", "retries")
    assert {k: stats[k] for k in counters} == {k: expected_stats[k] for k in counters}
    assert (stats["received"], stats["abandoned"], stats["retries"]) == (EVENTS, 0, 0)


@pytest.mark.parametrize("sink_name", CORE_V1_SINKS)
def test_events_of_a_cluster_scoped_object_go_to_default(server, sink_name):
    """client-go's makeEvent puts them in "default", the only namespace the server's validation allows for
    them (besides "kube-system" for events with an eventTime); the server takes them there."""
    node = {"kind": "Node", "name": unique_name("kubevents-e2e-node"), "uid": unique_name("u"), "apiVersion": "v1"}

    def drive(b: Any) -> None:
        rec = b.new_recorder("kubevents-e2e")
        for _ in range(2):
            rec.event(node, "Normal", "Rebooted", "Node rebooted")
            assert b.wait_idle(WAIT)

    stats = record(server, sink_name, drive, clock=kubevents.FakeClock(T0))
    assert (stats["created"], stats["patched"], stats["abandoned"]) == (1, 1, 0)
    with server.api_client() as client:
        try:
            [event] = [e for e in list_events(client, "default") if e["involvedObject"]["name"] == node["name"]]
            assert event["metadata"]["namespace"] == "default" and event["count"] == 2
            assert event["involvedObject"] == node
        finally:
            for e in list_events(client, "default"):
                if e["involvedObject"].get("name") == node["name"]:
                    k8s.CoreV1Api(client).delete_namespaced_event(e["metadata"]["name"], "default",
                                                                  _preload_content=False)
