"""Writes the API server refuses, through each sink: a token it does not know (401), a service account no RBAC
binding names (403), a namespace that does not exist (404). None is retried (client-go retries none of them),
each is counted, each is logged once, on one line naming the status and the reason, and the broadcaster
shuts down promptly. ``MemorySink`` refuses a missing namespace the same way."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import kubevents
from e2e_support import CORE_V1, EVENTS_V1, SINKS, list_events, record, service_account_token, start, unique_name
from kubevents.sinks import MemorySink

T0 = 1_700_000_000
PROMPT = 10  # seconds: shutdown has nothing left to do, so this is ample
POD = "web-0"
# What each pipeline records: core/v1 repeats the first event, so the third write is a patch of its name;
# events.k8s.io/v1 records three events, none a series (whose final count shutdown would write again).
RECORDED = {
    CORE_V1: [("BackOff", "Back-off restarting failed container"), ("Unhealthy", "Readiness probe failed"),
              ("BackOff", "Back-off restarting failed container")],
    EVENTS_V1: [("BackOff", "Back-off restarting failed container"), ("Unhealthy", "Readiness probe failed"),
                ("Killing", "Stopping container app")],
}
# The requests each fault costs: nothing is retried; a patch that finds nothing becomes a create.
REQUESTS = {
    (CORE_V1, "unauthorized"): ["POST", "POST", "PATCH"],
    (CORE_V1, "forbidden"): ["POST", "POST", "PATCH"],
    (CORE_V1, "missing-namespace"): ["POST", "POST", "PATCH", "POST"],
    (EVENTS_V1, "unauthorized"): ["POST"] * 3,
    (EVENTS_V1, "forbidden"): ["POST"] * 3,
    (EVENTS_V1, "missing-namespace"): ["POST"] * 3,
}


def drive(api: str, namespace: str, clock: kubevents.FakeClock):
    def run(b: Any) -> None:
        obj = {"kind": "Pod", "namespace": namespace, "name": POD, "uid": "u-web-0", "apiVersion": "v1"}
        if api == CORE_V1:
            rec = b.new_recorder("kubevents-e2e")
            calls = [lambda r=r, m=m: rec.event(obj, "Warning", r, m) for r, m in RECORDED[api]]
        else:
            rec = b.new_recorder("kubevents.io/e2e", "kubevents-e2e-1")
            calls = [lambda r=r, m=m: rec.eventf(obj, None, "Warning", r, "Restart", m) for r, m in RECORDED[api]]
        for call in calls:
            call()
            assert b.wait_idle(PROMPT)
            clock.step(1)

    return run


def expected_lines(api: str, fault: str, namespace: str, user: str = "") -> list[str]:
    """What each refused write's log line says of the answer: status, reason, the server's message."""
    if fault == "unauthorized":
        return ["HTTP 401: Unauthorized: Unauthorized"] * 3
    if fault == "missing-namespace":
        return [f'HTTP 404: NotFound: namespaces "{namespace}" not found'] * 3
    group = "" if api == CORE_V1 else "events.k8s.io"

    def forbidden(verb: str, name: str = "") -> str:
        subject = ("events" if api == CORE_V1 else "events.events.k8s.io") + (f' "{name}"' if name else "")
        # A server's authorizers may add a reason after this (": RBAC: ..."), none does for a plain no-match.
        return f'HTTP 403: Forbidden: {subject} is forbidden: User "{user}" cannot {verb} resource "events" in ' \
               f'API group "{group}" in the namespace "{namespace}"'

    if api == CORE_V1:
        return [forbidden("create"), forbidden("create"), forbidden("patch", f"{POD}.{T0 * 10**9:x}")]
    return [forbidden("create")] * 3


def check_refused(api: str, stats: dict[str, Any], caplog: pytest.LogCaptureFixture, expected: list[str]) -> None:
    if api == CORE_V1:
        assert (stats["abandoned"], stats["retries"], stats["created"], stats["patched"]) == (3, 0, 0, 0)
    else:
        counters = ("write_errors", "retries", "pending_retries", "abandoned", "writes_ok")
        assert tuple(stats[k] for k in counters) == (3, 0, 0, 3, 0)
    status = expected[0].split(":")[0].removeprefix("HTTP ")
    assert stats["sinks"]["sink-1"]["given_up"] == {f"rejected (HTTP {status})": 3}
    lines = [r.getMessage() for r in caplog.records if r.name == "kubevents" and r.levelno >= logging.WARNING]
    # The first refusal at once, the other two in the shutdown's summary: two lines, one each.
    assert len(lines) == 2, lines
    first, summary = lines
    assert "\n" not in first and f"failed to write an event: {expected[0]}; the event is given up" in first, first
    assert " shut down: 3 events received; " in summary, summary
    assert f"3 events given up (3 rejected (HTTP {status})), last error: {expected[-1]}" in summary, summary


@pytest.mark.parametrize("fault", ["unauthorized", "forbidden", "missing-namespace"])
@pytest.mark.parametrize("sink_name", list(SINKS))
def test_a_refused_write_is_not_retried_counted_and_logged_once(server, sink_name, fault, caplog):
    api = SINKS[sink_name][0]
    namespace, token, user = server.namespace, None, ""
    if fault == "unauthorized":
        token = "kubevents-e2e-not-a-token"
    elif fault == "forbidden":
        with server.api_client() as admin:
            user, token = service_account_token(admin, namespace)
    else:
        namespace = unique_name()
    clock = kubevents.FakeClock(T0)

    stats = record(server, sink_name, drive(api, namespace, clock), clock=clock, token=token, shutdown_timeout=PROMPT)

    check_refused(api, stats, caplog, expected_lines(api, fault, namespace, user))
    if server.fake is not None:
        seen = (server.fake.core_v1 if api == CORE_V1 else server.fake.events_v1).requests
        assert [r.method for r in seen] == REQUESTS[(api, fault)]
    with server.api_client() as admin:
        assert list_events(admin, namespace, api) == []


@pytest.mark.parametrize("api", [CORE_V1, EVENTS_V1])
def test_memory_sink_refuses_a_missing_namespace_as_the_server_does(api, caplog):
    sink = MemorySink(namespaces={"default"})
    clock = kubevents.FakeClock(T0)
    b = start(sink, api, clock)
    drive(api, "gone", clock)(b)
    stats = b.shutdown(timeout=PROMPT)
    check_refused(api, stats, caplog, expected_lines(api, "missing-namespace", "gone"))
    assert len(sink) == 0 and sink.writes == []
