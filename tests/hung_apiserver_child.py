"""Sinks writing to an API server that accepts requests and never answers them, run by the tests in a child
process (``run_in_child(scenario)``) so that a hang fails them instead of stalling pytest.

The server leaves the first two writes unanswered; the sink's ``request_timeout`` (0.2 s) ends each, and the
broadcaster retries. The child prints the broadcaster's stats and the requests the server saw, as JSON.
"""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import kubernetes.client as k8s
import kubernetes_asyncio.client as k8s_asyncio
from pytest_httpserver import HTTPServer

import kubevents
from fake_apiserver import FakeApiServer
from kubevents.sinks import AsyncCoreV1Sink, CoreV1Sink

T0 = 1_700_000_000
POD = {"kind": "Pod", "namespace": "prod", "name": "web-0", "uid": "u1", "apiVersion": "v1"}
TIMEOUT = 0.2
HANGS = 2
CORE_V1 = "/api/v1"
EVENTS_V1 = "/apis/events.k8s.io/v1"


def core_v1(api):
    with kubevents.Broadcaster(clock=kubevents.FakeClock(T0), sleep_duration=0) as b:
        client = k8s.CoreV1Api(k8s.ApiClient(k8s.Configuration(host=api.host)))
        b.start_recording_to_sink(CoreV1Sink(client, request_timeout=TIMEOUT))
        b.new_recorder("ctl").event(POD, "Warning", "BackOff", "m")
        assert b.wait_idle(60)
    return b.stats()


def core_v1_async(api):
    async def main():
        async with k8s_asyncio.ApiClient(k8s_asyncio.Configuration(host=api.host)) as client:
            async with kubevents.Broadcaster(clock=kubevents.FakeClock(T0), sleep_duration=0) as b:
                b.start_recording_to_sink(AsyncCoreV1Sink(k8s_asyncio.CoreV1Api(client), request_timeout=TIMEOUT))
                b.new_recorder("ctl").event(POD, "Warning", "BackOff", "m")
                assert await asyncio.to_thread(b.wait_idle, 60)
        return b.stats()

    return asyncio.run(main())


def record_v1(b, clock):
    """Records one event; each failed attempt is retried 10-12.5 s later on the broadcaster's clock."""
    b.new_recorder("ctl", "ctl-1").eventf(POD, None, "Warning", "BackOff", "Restarting", "m")
    assert b.wait_idle(60)
    for _ in range(HANGS):
        clock.step(12.5)
        assert b.wait_idle(60)
    return b.shutdown(timeout=60)


def events_v1(api):
    client = k8s.EventsV1Api(k8s.ApiClient(k8s.Configuration(host=api.host)))
    clock = kubevents.FakeClock(T0)
    b = kubevents.EventsBroadcaster(clock=clock)
    b.start_recording_to_sink(kubevents.EventsV1Sink(client, request_timeout=TIMEOUT))
    return record_v1(b, clock)


def events_v1_async(api):
    async def main():
        async with k8s_asyncio.ApiClient(k8s_asyncio.Configuration(host=api.host)) as client:
            sink = kubevents.AsyncEventsV1Sink(k8s_asyncio.EventsV1Api(client), request_timeout=TIMEOUT)
            clock = kubevents.FakeClock(T0)
            b = kubevents.EventsBroadcaster(clock=clock)
            b.start_recording_to_sink(sink)  # on this loop, where the sink's calls run
            return await asyncio.to_thread(record_v1, b, clock)

    return asyncio.run(main())


def adapter(api):
    """The adapter's discovery request is not answered either: it times out, which selects core/v1."""
    api.server.expect_request(EVENTS_V1 + "/").respond_with_handler(api.hung)
    core = FakeApiServer(api.server, prefix=CORE_V1)
    client = k8s.ApiClient(k8s.Configuration(host=api.host))
    adapter = kubevents.new_event_broadcaster_adapter(client, clock=kubevents.FakeClock(T0), request_timeout=TIMEOUT)
    assert adapter.events_v1 is None
    adapter.start_recording_to_sink()
    adapter.new_recorder("ctl").eventf(POD, None, "Normal", "Synced", "Sync", "synced")
    adapter.shutdown(timeout=60)
    assert [r.method for r in core.requests] == ["POST"]
    return adapter.core.stats()


SCENARIOS = {"core_v1": (core_v1, CORE_V1), "core_v1_async": (core_v1_async, CORE_V1),
             "events_v1": (events_v1, EVENTS_V1), "events_v1_async": (events_v1_async, EVENTS_V1),
             "adapter": (adapter, EVENTS_V1)}


def run_in_child(name):
    """Runs scenario ``name`` in a child process; its JSON output, or an AssertionError if it failed or hung."""
    try:
        p = subprocess.run([sys.executable, __file__, name], capture_output=True, text=True, timeout=60,
                           cwd=Path(__file__).parent)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{name}: the write hung\n{e.stderr}") from None
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def main(name):
    scenario, prefix = SCENARIOS[name]
    server = HTTPServer(threaded=True)
    server.start()
    api = FakeApiServer(server, prefix=prefix)
    api.hang_next(HANGS)
    try:
        stats = scenario(api)
    finally:
        api.release()
        server.clear()
        server.stop()
    print(json.dumps({"stats": stats, "requests": [r.method for r in api.requests], "stored": len(api.events)}))


if __name__ == "__main__":
    main(sys.argv[1])
