"""Ports of the kubelet's evented_test.go (v1.32–v1.35) and the CRI event mapping of evented.go."""

from __future__ import annotations

import pytest
from pleg_fakes import C, E, FakeRuntime, pod, wait_for

from kubevents import FakeClock
from kubevents.pleg import EventedPLEG, GenericPLEG, PodCache

NS = 10**9
T = 1_700_000_000


def make(capacity=100, clock=None, runtime=None, **kw):
    clock = clock or FakeClock(0)
    generic = GenericPLEG(
        runtime or FakeRuntime([]), cache=PodCache(evented=True), clock=clock, channel_capacity=capacity
    )
    return generic, EventedPLEG(generic, **kw)


def cri(kind, cid="c1", uid="p1", at=1, status=None):
    return {
        "container_id": cid,
        "pod_uid": uid,
        "type": kind,
        "created_at": at,
        "pod_status": status if status is not None else {"id": uid},
    }


def test_healthy_evented_pleg():
    _, evented = make(capacity=100)
    evented.process_events(cri("CONTAINER_STARTED_EVENT", uid=f"p{i}", at=i + 1) for i in range(5))
    assert evented.healthy() == (True, None)
    evented.process_events(cri("CONTAINER_STARTED_EVENT", uid=f"q{i}", at=i + 1) for i in range(95))
    assert len(evented.watch()) == 100
    assert evented.healthy() == (False, "EventedPLEG: pleg event channel capacity is full with 100 events")


IPS_CASES = [
    (
        "status ips is not empty",
        {"id": "62212", "ips": ["10.0.0.10", "10.23.0.1"]},
        ["192.168.0.10", "192.168.0.1"],
        ["10.0.0.10", "10.23.0.1"],
    ),
    (
        "status ips is empty and SandboxStatuses has PodSandboxState_SANDBOX_READY state",
        {
            "id": "62212",
            "sandbox_statuses": [
                {"id": "sandboxID2", "attempt": 1, "state": "SANDBOX_READY"},
                {"id": "sandboxID1", "attempt": 0, "state": "SANDBOX_NOTREADY"},
            ],
        },
        ["192.168.0.10", "192.168.0.1"],
        None,
    ),
    ("status and cache ips are empty", {"id": "62212"}, [], None),
    (
        "sandbox state is no PodSandboxState_SANDBOX_READY",
        {
            "id": "62212",
            "sandbox_statuses": [
                {"id": "sandboxID2", "attempt": 1, "state": "SANDBOX_NOTREADY"},
                {"id": "sandboxID1", "attempt": 0, "state": "SANDBOX_NOTREADY"},
            ],
        },
        ["192.168.0.10", "192.168.0.1"],
        ["192.168.0.10", "192.168.0.1"],
    ),
]


@pytest.mark.parametrize("name,new,old_ips,expected", IPS_CASES, ids=[c[0] for c in IPS_CASES])
def test_evented_pleg_get_pod_ips(name, new, old_ips, expected):
    generic, evented = make()
    generic.cache.set("62212", {"id": "62212", "ips": old_ips}, None, None)
    evented.process_events([cri("CONTAINER_STARTED_EVENT", uid="62212", at=T * NS, status=new)])
    got = generic.cache.get("62212")[0]
    assert (got.get("ips") or None) == expected


def test_cri_event_mapping():
    generic, evented = make()
    ch = evented.watch()
    status = {"id": "p1", "sandbox_statuses": [{"id": "sb", "state": "SANDBOX_READY"}]}
    assert evented.process_events([cri("CONTAINER_CREATED_EVENT", at=1, status=status)]) == 0
    assert generic.cache.get("p1") == (status, None), "CREATED only updates the cache"
    assert evented.process_events([cri("CONTAINER_STARTED_EVENT", at=2, status=status)]) == 1
    assert evented.process_events([cri("CONTAINER_STOPPED_EVENT", at=3, status=status)]) == 1
    assert ch.drain() == [E("p1", "ContainerStarted", "c1"), E("p1", "ContainerDied", "c1")]

    # DELETED of a container: Died + Removed, the cache entry stays.
    assert evented.process_events([cri("CONTAINER_DELETED_EVENT", at=0, status=status)]) == 2
    assert generic.cache.get("p1") == (status, None)
    # DELETED of the sandbox: the entry goes too.
    assert evented.process_events([cri("CONTAINER_DELETED_EVENT", cid="sb", at=0, status=status)]) == 2
    assert generic.cache.get("p1") == ({"id": "p1"}, None)
    assert ch.drain() == [
        E("p1", "ContainerDied", "c1"),
        E("p1", "ContainerRemoved", "c1"),
        E("p1", "ContainerDied", "sb"),
        E("p1", "ContainerRemoved", "sb"),
    ]


def test_events_older_than_the_cache_are_not_sent():
    generic, evented = make()
    assert evented.process_events([cri("STOPPED", at=10 * NS)]) == 1
    assert evented.process_events([cri("STARTED", at=5 * NS)]) == 0
    assert evented.process_events([cri("STARTED", at=10 * NS)]) == 1, "an equal timestamp is accepted"
    assert evented.stats()["events_rejected"] == 1
    assert [e.type for e in evented.watch().drain()] == ["ContainerDied", "ContainerStarted"]


def test_event_without_sandbox_metadata_is_ignored():
    generic, evented = make()
    assert evented.process_events([cri(2, uid=None)]) == 0
    assert len(generic.cache) == 0
    assert evented.stats()["events_ignored"] == 1


def test_relist_period_switches_while_evented_is_in_use():
    generic, evented = make()
    assert (generic.relist_period, generic.relist_threshold) == (300.0, 600.0)
    assert not evented.in_use
    evented.start()
    assert evented.in_use
    evented.stop()
    assert not evented.in_use


def test_generic_relist_uses_status_timestamps_and_skips_rejected_pods():
    rt = FakeRuntime([pod("p", [C("c", "running")])])
    rt.statuses["p"] = {"id": "p", "timestamp": T}
    generic, evented = make(runtime=rt)
    evented.start()
    try:
        # The event stream already stored a newer status.
        evented.process_events([cri("STARTED", cid="c", uid="p", at=(T + 5) * NS)])
        evented.watch().drain()
        generic.relist()
        # The cache rejected the relist's older status: no commit, nothing sent, the diff is retried.
        assert generic.cache.get("p")[0].get("timestamp") is None
        assert evented.watch().drain() == []
        rt.statuses["p"] = {"id": "p", "timestamp": T + 6}
        generic.relist()
        assert generic.cache.get("p")[0]["timestamp"] == T + 6
        assert evented.watch().drain() == [E("p", "ContainerStarted", "c")]
    finally:
        evented.stop()


class FailingService:
    def __init__(self):
        self.calls = 0

    def get_container_events(self):
        self.calls += 1
        raise ConnectionError("stream broken")


def test_fall_back_to_generic_relisting_after_stream_failures():
    clock = FakeClock(0)
    rt = FakeRuntime([])
    service = FailingService()
    generic, evented = make(clock=clock, runtime=rt, runtime_service=service)
    generic.start()
    evented.start()
    try:
        wait_for(lambda: evented.stats()["fell_back"], "the fall-back")
        assert service.calls == 5
        assert evented.stats()["stream_failures"] == 5
        assert "stream broken" in evented.last_error
        assert not evented.in_use
        assert (generic.relist_period, generic.relist_threshold) == (1.0, 180.0)
        assert generic.running
        # One forced relist per failure, on top of the loop's.
        assert generic.stats()["relists"] >= 5
        wait_for(lambda: generic.next_relist_at is not None, "the restarted loop to wait")
        before = generic.stats()["relists"]
        clock.step(1)
        wait_for(lambda: generic.stats()["relists"] > before, "a relist at the 1 s period")
    finally:
        generic.stop()
        evented.stop()


class ListService:
    def __init__(self, events):
        self.events = events
        self.calls = 0

    def get_container_events(self):
        self.calls += 1
        if self.calls == 1:
            return iter(self.events)
        raise ConnectionError("gone")


def test_stream_events_reach_the_channel():
    service = ListService([cri("STARTED", at=1), cri("STOPPED", at=2)])
    generic, evented = make(runtime_service=service, max_stream_retries=1)
    evented.start()
    try:
        wait_for(lambda: evented.stats()["fell_back"], "the stream to end")
        assert evented.watch().drain() == [E("p1", "ContainerStarted", "c1"), E("p1", "ContainerDied", "c1")]
    finally:
        evented.stop()


def test_global_cache_tick_follows_the_clock():
    clock = FakeClock(T)
    generic, evented = make(clock=clock)
    evented.start()
    try:
        # The tick thread reads the clock when it starts: keep stepping until one period has passed for it.
        wait_for(lambda: clock.step(1) and generic.cache.timestamp is not None, "the cache tick")
        assert generic.cache.timestamp.timestamp() >= T + 2
    finally:
        evented.stop()


def test_needs_an_evented_cache_and_valid_events():
    generic = GenericPLEG(FakeRuntime([]), cache=PodCache())
    with pytest.raises(ValueError, match="evented=True"):
        EventedPLEG(generic)
    _, evented = make()
    with pytest.raises(ValueError, match="unknown container event type"):
        evented.process_events([cri("EXPLODED")])
    with pytest.raises(TypeError, match="created_at: expected int nanoseconds"):
        evented.process_events([cri("STARTED", at="now")])
    with pytest.raises(ValueError, match=r'events\[0\]: missing "pod_status"'):
        evented.process_events([{"container_id": "c", "type": "STARTED", "created_at": 1}])


def test_update_running_pod_metric():
    """TestUpdateRunningPodMetric: the sandbox counts as running when the container status with its id runs."""
    _, evented = make()

    def status(pid, state):
        return {"id": pid, "sandbox_statuses": [{"id": pid}], "container_statuses": [{"id": pid, "state": state}]}

    def event(kind, i, at, state):
        pid = f"test-pod-{i}"
        return cri(kind, cid=pid, uid=pid, at=at, status=status(pid, state))

    evented.process_events(event("STARTED", i, 1, "running") for i in range(5))
    assert evented.stats()["running_pods"] == 5
    evented.process_events(event("STOPPED", i, 2, "exited") for i in range(2))
    assert evented.stats()["running_pods"] == 3
