"""events.k8s.io/v1 through the official clients, read back from the API server: the first occurrence, the
series patch (count 2), the 30-minute refresh and the 6-minute finish round each leave the right
``series.count``; a note over 1 KiB is cut and accepted; the adapter picks the API discovery offers."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from pytest_httpserver import HTTPServer

import kubevents
from e2e_support import CORE_V1, EVENTS_V1, EVENTS_V1_SINKS, WAIT, FakeServer, list_events, record
from fake_apiserver import FakeCluster

T0 = datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=timezone.utc)
CONTROLLER = "kubevents.io/e2e"
INSTANCE = "kubevents-e2e-1"


def micro(seconds: float) -> str:
    """The MicroTime ``seconds`` after T0, as the server serves it."""
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def pod(namespace: str) -> dict[str, str]:
    return {"kind": "Pod", "namespace": namespace, "name": "api-0", "uid": "7c1e0d4a", "apiVersion": "v1"}


# One occurrence at 0 s and 1 s, then every 5 minutes up to 29 min, and one at 31 min. The clock stops at every
# minute, so the 6-minute finish rounds and the 30-minute refresh run exactly on time.
OCCURRENCES = [0, 1, 300, 600, 900, 1200, 1500, 1740, 1860]
# The series count on the server once the clock has reached each time (None: a single event, no series).
ON_SERVER = {
    0: None,
    1: 2,  # the second occurrence patches the first event
    1740: 2,  # later ones are only counted
    1800: 8,  # the refresh writes every live series
    2160: 8,  # the 36-minute round: quiet for 5 minutes only
    2520: 9,  # the 42-minute round: quiet for 11 minutes, written a last time and forgotten
}


@pytest.mark.parametrize("sink_name", EVENTS_V1_SINKS)
def test_a_series_lands_with_the_right_count_at_each_write(server, sink_name):
    ns = server.namespace
    clock = kubevents.FakeClock(T0)
    seen: dict[int, Any] = {}

    def drive(b: Any) -> None:
        rec = b.new_recorder(CONTROLLER, INSTANCE)
        with server.api_client() as client:
            for at in sorted({*OCCURRENCES, *range(0, 2521, 60)}):
                clock.set(T0 + timedelta(seconds=at))
                assert b.wait_idle(WAIT)  # the rounds due now run first, as in the engine
                if at in OCCURRENCES:
                    rec.eventf(pod(ns), None, "Warning", "BackOff", "Restart", "Back-off restarting %s", f"c{at}")
                    assert b.wait_idle(WAIT)
                if at in ON_SERVER:
                    seen[at] = list_events(client, ns, EVENTS_V1)
        assert b.stats()["cache_len"] == 0

    stats = record(server, sink_name, drive, clock=clock)

    for at, count in ON_SERVER.items():
        [event] = seen[at]
        assert (event.get("series") or {}).get("count") == count, f"at {at} s"
    [first] = seen[0]
    assert first["eventTime"] == micro(0) and first["note"] == "Back-off restarting c0"
    assert (first["reportingController"], first["reportingInstance"], first["action"]) == (CONTROLLER, INSTANCE, "Restart")
    assert first["regarding"]["name"] == "api-0" and first["metadata"]["namespace"] == ns
    last_observed = {at: seen[at][0]["series"]["lastObservedTime"] for at in (1, 1800, 2520)}
    assert last_observed == {1: micro(1), 1800: micro(1740), 2520: micro(1860)}
    # The patches carry only the series: the note of the first occurrence stays.
    assert seen[2520][0]["note"] == "Back-off restarting c0" and seen[2520][0]["eventTime"] == micro(0)
    assert (stats["writes_ok"], stats["write_errors"], stats["retries"], stats["abandoned"]) == (4, 0, 0, 0)
    assert (stats["refresh_writes"], stats["finish_writes"]) == (1, 1)


@pytest.mark.parametrize("sink_name", EVENTS_V1_SINKS)
def test_a_note_over_1_kib_is_cut_and_accepted(server, sink_name):
    ns = server.namespace
    note = "ä" * 700  # 1400 bytes

    def drive(b: Any) -> None:
        b.new_recorder(CONTROLLER, INSTANCE).eventf(pod(ns), None, "Normal", "Synced", "Sync", note)
        assert b.wait_idle(WAIT)

    stats = record(server, sink_name, drive, clock=kubevents.FakeClock(T0))

    with server.api_client() as client:
        [event] = list_events(client, ns, EVENTS_V1)
    stored = event["note"]
    assert stored.endswith(" ...") and note.startswith(stored[:-4])
    assert 1024 - 5 <= len(stored.encode()) <= 1024
    assert (stats["truncated_notes"], stats["writes_ok"], stats["write_errors"]) == (1, 1, 0)


def record_through_the_adapter(server: Any, namespace: str) -> None:
    with server.api_client() as client:
        adapter = kubevents.new_event_broadcaster_adapter(client, clock=kubevents.FakeClock(T0))
        served = server.fake is None or server.fake.serves_events_v1
        assert (adapter.events_v1 is not None) == served
        adapter.start_recording_to_sink()
        adapter.new_recorder(CONTROLLER).eventf(pod(namespace), None, "Normal", "Synced", "Sync", "synced %s", "api-0")
        adapter.shutdown(timeout=WAIT)


def test_the_adapter_records_through_events_v1_which_discovery_offers(server):
    record_through_the_adapter(server, server.namespace)
    with server.api_client() as client:
        [event] = list_events(client, server.namespace, EVENTS_V1)
    assert (event["reportingController"], event["action"], event["note"]) == (CONTROLLER, "Sync", "synced api-0")


def test_the_adapter_falls_back_to_core_v1_without_events_v1():
    """Only the fake can go without events.k8s.io/v1 (served by every cluster since Kubernetes 1.19)."""
    http = HTTPServer()
    http.start()
    try:
        fake = FakeServer(FakeCluster(http, serves_events_v1=False))
        fake.fake.namespaces.add("web")
        record_through_the_adapter(fake, "web")
        with fake.api_client() as client:
            [event] = list_events(client, "web", CORE_V1)
        assert (event["source"]["component"], event["message"], event["involvedObject"]["name"]) == \
            (CONTROLLER, "synced api-0", "api-0")
        assert fake.fake.events_v1 is None
    finally:
        http.clear()
        http.stop()
