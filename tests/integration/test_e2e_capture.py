"""kubevents.capture on a cluster: what it captures while events are recorded replays with the counts the
server holds, for events written through core/v1 and through events.k8s.io/v1."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import kubernetes.client as k8s
import pytest

import kubevents
from cluster_support import RunningCapture, record_each
from e2e_support import CORE_V1, EVENTS_V1, WAIT, FakeServer, Server, list_events, record
from kubevents.traces import generate, read_jsonl

T0 = 1_700_000_000


def counts(events: list[dict[str, Any]]) -> Counter[tuple[str, str, str]]:
    out: Counter[tuple[str, str, str]] = Counter()
    for e in events:
        message = (e.get("message") or "").removeprefix("(combined from similar events): ")
        out[(e["involvedObject"]["name"], e["reason"], message)] += e.get("count") or 1
    return out


def test_a_capture_replays_with_the_counts_on_the_server(server: Server, tmp_path: Path) -> None:
    ns = server.namespace
    path = tmp_path / "capture.jsonl"
    workload = list(generate("mixed", 400, seed=5))
    clock = kubevents.FakeClock(workload[0]["t_ns"] / 1e9)
    with server.api_client() as client:
        running = RunningCapture(path, namespaces=[ns], api=CORE_V1, api_client=client)
        assert running.capture.watching.wait(WAIT)
        record(server, "CoreV1Sink", lambda b: record_each(b, workload, ns, clock), clock=clock)
        on_server = counts(list_events(client, ns))
        running.until(on_server.total())
        stats = running.stop()
    records = list(read_jsonl(path))
    assert Counter((r["involved"]["name"], r["reason"], r["message"]) for r in records) == on_server
    assert kubevents.simulate(path).totals["events"] == stats.occurrences == on_server.total() > 300


@pytest.mark.parametrize("watched", [EVENTS_V1, CORE_V1])
def test_series_counts_of_events_k8s_io_v1(server: Server, tmp_path: Path, watched: str) -> None:
    """An event written through events.k8s.io/v1 and its series, captured through that API or through core/v1,
    which serves the same events (the fake keeps the two APIs' events apart: that case is the real server's)."""
    if watched == CORE_V1 and isinstance(server, FakeServer):
        pytest.skip("the fake serves events.k8s.io/v1 events on their own API only")
    ns = server.namespace
    path = tmp_path / "capture.jsonl"
    event = {"metadata": {"name": f"web-0.{T0:x}", "namespace": ns}, "eventTime": "2023-11-14T22:13:20.250000Z",
             "reportingController": "kubevents.io/e2e", "reportingInstance": "kubevents-e2e-1", "action": "Restart",
             "reason": "BackOff", "type": "Warning", "note": "Back-off restarting failed container",
             "regarding": {"kind": "Pod", "namespace": ns, "name": "web-0", "uid": "u-web-0", "apiVersion": "v1"}}
    series = [(2, "2023-11-14T22:18:20.500000Z"), (5, "2023-11-14T22:22:20.000001Z")]
    with server.api_client() as client:
        running = RunningCapture(path, namespaces=[ns], api=watched, api_client=client)
        assert running.capture.watching.wait(WAIT)
        sink = kubevents.EventsV1Sink(k8s.EventsV1Api(client))
        sink.create(event)
        for count, at in series:
            sink.patch(event, json.dumps({"series": {"count": count, "lastObservedTime": at}}).encode())
        running.until(5)
        stats = running.stop()
    records = list(read_jsonl(path))
    parse = kubevents.traces._parse_time
    assert [r["t_ns"] for r in records] == [parse(event["eventTime"], "t"), parse(series[0][1], "t")] \
        + [parse(series[1][1], "t")] * 3
    assert {(r["involved"]["name"], r["reason"], r["message"], r["source_component"]) for r in records} == \
        {("web-0", "BackOff", "Back-off restarting failed container", "kubevents.io/e2e")}
    assert (stats.events, stats.occurrences) == (1, 5)
