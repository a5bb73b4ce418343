"""Era C's on-demand per-pod relist (``on_demand_relist=True``): a port of generic_test.go's TestWorkerLoop
driven by ``loop_iteration()`` on a fake clock, the option's switches, and the loop started by ``start()``."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime

import pytest
from pleg_fakes import C, E, FakeRuntime, pod, wait_for

from kubevents import FakeClock
from kubevents.pleg import GenericPLEG, PodCache

R = "running"


class Runtime(FakeRuntime):
    """Logs every runtime call in order; ``get_pod`` answers from ``pods``; statuses carry the clock's time."""

    def __init__(self, clock: FakeClock, pods=None) -> None:
        super().__init__(pods)
        self.clock = clock
        self.log: list[tuple[str, ...]] = []
        self.get_pod_error: BaseException | None = None

    def get_pods(self):
        self.log.append(("GetPods",))
        return super().get_pods()

    def get_pod(self, uid):
        self.log.append(("GetPod", uid))
        if self.get_pod_error is not None:
            raise self.get_pod_error
        return next((p for p in self.pods if p["id"] == uid), None)

    def get_pod_status(self, pod):
        self.log.append(("GetPodStatus", pod["id"]))
        return {"id": pod["id"], "timestamp": self.clock.now()}

    def taken(self) -> list[tuple[str, ...]]:
        """The calls since the last look."""
        out, self.log = self.log, []
        return out


def new_pleg(rt, clock, on_demand_relist: bool = True) -> GenericPLEG:
    return GenericPLEG(
        rt,
        cache=PodCache(),
        clock=clock,
        relist_period=2,
        channel_capacity=100,
        pod_sync_on_reinspect=True,
        on_demand_relist=on_demand_relist,
    )


def relisted_node(on_demand_relist: bool = True) -> tuple[FakeClock, Runtime, GenericPLEG]:
    """A node with pod "p" (container "c" running), relisted once at 0 by the loop; events and calls taken."""
    clock = FakeClock(0)
    rt = Runtime(clock, [pod("p", [C("c", R)])])
    pleg = new_pleg(rt, clock, on_demand_relist)
    assert pleg.loop_iteration() == "relist"
    assert pleg.watch().drain() == [E("p", "ContainerStarted", "c")]
    rt.taken()
    return clock, rt, pleg


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


async def settle() -> None:
    """Lets answers already handed to the event loop (call_soon_threadsafe) land; a few turns, no waiting."""
    for _ in range(3):
        await asyncio.sleep(0)


def test_worker_loop():
    """TestWorkerLoop: a single-pod relist, a due global relist taking priority over a queued request, stale
    requests skipped, and a reinspection served by the global relist; with the runtime calls and the
    GetNewerThan waiters released at each step.

    Go sets the global timer to 2 s without relisting first; here the first pass relists an empty node (as
    ``Start`` does) and the test starts one second later, so that requests are newer than that relist."""
    clock = FakeClock(100)
    rt = Runtime(clock)
    pleg = new_pleg(rt, clock)
    cache, ch = pleg.cache, pleg.watch()
    pod1, pod2 = pod("pod1", [C("c1", R)], name="pod1"), pod("pod2", [C("c2", R)], name="pod2")

    async def main():
        assert pleg.loop_iteration() == "relist"
        assert rt.taken() == [("GetPods",)]
        start = clock.step(1).timestamp()

        p1 = cache.get_newer_than_async("pod1", start)
        p2 = cache.get_newer_than_async("pod2", start)
        await settle()
        assert not p1.done() and not p2.done()

        # Single-pod relist (no reinspection).
        rt.pods = [pod1]
        assert pleg.request_relist("pod1")
        assert pleg.loop_iteration() == "relist_pod"
        assert rt.taken() == [("GetPod", "pod1"), ("GetPodStatus", "pod1")]
        await settle()
        assert p1.done(), "pod1 is unblocked"
        p1_status, err = p1.result()
        assert err is None and p1_status == {"id": "pod1", "timestamp": at(start)}
        assert not p2.done(), "pod2 is still blocked"
        assert ch.drain() == [E("pod1", "ContainerStarted", "c1")]
        assert pleg.relist_time == at(100) and cache.timestamp == at(100), "the global state is left alone"

        p1_new = cache.get_newer_than_async("pod1", start + 2)
        await settle()
        assert not p1_new.done()

        # A queued pod2 request and a due global relist: the global relist goes first.
        assert pleg.request_relist("pod2")
        clock.step(2)
        rt.pods = [pod1, pod2]
        assert pleg.loop_iteration() == "relist"
        assert rt.taken() == [("GetPods",), ("GetPodStatus", "pod2")]
        await settle()
        assert p2.done() and p2.result() == ({"id": "pod2", "timestamp": at(start + 2)}, None)
        assert p1_new.done(), "released by the global timestamp"
        assert p1_new.result()[0] is p1_status, "pod1's status is unchanged"
        assert ch.drain() == [E("pod2", "ContainerStarted", "c2")]

        # The pod2 request was made before that relist: it is skipped, GetPod is not called.
        assert pleg.loop_iteration() == "skipped"
        assert rt.taken() == []

        # Reinspection: a relist request and a due global relist; the relist reinspects pod1.
        p1_reinspect = cache.get_newer_than_async("pod1", clock.now())
        await settle()
        assert not p1_reinspect.done()
        pleg.request_reinspect("pod1")
        assert pleg.request_relist("pod1")
        clock.step(2)
        assert pleg.loop_iteration() == "relist"
        assert rt.taken() == [("GetPods",), ("GetPodStatus", "pod1")]
        await settle()
        assert p1_reinspect.done()
        assert p1_reinspect.result() == ({"id": "pod1", "timestamp": at(start + 4)}, None), "updated"
        assert ch.drain() == [E("pod1", "PodSync")]

        # The pod1 request is older than that relist.
        assert pleg.loop_iteration() == "skipped"
        assert rt.taken() == []
        assert pleg.loop_iteration() is None, "nothing is due"
        assert cache.waiters == 0

    asyncio.run(main())
    stats = pleg.stats()
    assert (stats["relists"], stats["pod_relists"], stats["relist_requests_skipped"]) == (3, 1, 2)


def test_unchanged_pod_is_marked_observed_without_an_inspection():
    """No event and no reinspection: nothing is inspected or written, yet waiters up to the listing's time
    are released (SetObservedTime) with the stored status; later ones wait."""
    clock, rt, pleg = relisted_node()
    stored = pleg.cache.get("p")
    clock.step(1)
    got = []
    waiter = threading.Thread(target=lambda: got.append(pleg.cache.get_newer_than("p", 1, timeout=10)))
    waiter.start()
    wait_for(lambda: pleg.cache.waiters == 1, "the waiter to subscribe")
    assert pleg.request_relist("p")
    assert pleg.loop_iteration() == "relist_pod"
    assert rt.taken() == [("GetPod", "p")]
    assert pleg.cache.waiters == 0
    waiter.join(10)
    assert got == [stored]
    assert pleg.cache.observed_time("p") == at(1)
    with pytest.raises(TimeoutError):
        pleg.cache.get_newer_than("p", 1, timeout=0.01)
    assert pleg.cache.get_newer_than("p", 0.5, timeout=0.01) == stored
    assert pleg.watch().drain() == []


def test_get_pod_error_changes_nothing():
    clock, rt, pleg = relisted_node()
    rt.pods = [pod("p", [C("c", "exited")])]
    rt.get_pod_error = ConnectionError("runtime down")
    clock.step(1)
    assert pleg.request_relist("p")
    with pytest.raises(ConnectionError, match="runtime down"):
        pleg.loop_iteration()
    assert pleg.watch().drain() == []
    assert pleg.cache.observed_time("p") is None
    assert pleg.stats()["pod_relist_failures"] == 1
    clock.step(1)
    assert pleg.loop_iteration() == "relist"
    assert pleg.watch().drain() == [E("p", "ContainerDied", "c")]


def test_get_pod_none_is_a_pod_without_containers():
    clock, rt, pleg = relisted_node()
    rt.pods = []
    clock.step(1)
    pleg.request_relist("p")
    assert pleg.loop_iteration() == "relist_pod"
    assert pleg.watch().drain() == [E("p", "ContainerDied", "c"), E("p", "ContainerRemoved", "c")]


def test_get_pod_answer_is_checked():
    clock = FakeClock(0)
    rt = Runtime(clock)
    rt.get_pod = lambda uid: pod("other")
    pleg = new_pleg(rt, clock)
    assert pleg.loop_iteration() == "relist"
    clock.step(1)
    pleg.request_relist("p")
    with pytest.raises(ValueError, match='get_pod\\(\\): asked for pod "p", got pod "other"'):
        pleg.loop_iteration()
    rt.get_pod = lambda uid: {"id": uid, "containers": [C("c", "paused")]}
    pleg.request_relist("p")
    with pytest.raises(ValueError, match="get_pod\\(\\).containers\\[0\\].state"):
        pleg.loop_iteration()


def test_queue_holds_200_requests_and_counts_the_drops():
    clock = FakeClock(0)
    pleg = new_pleg(Runtime(clock), clock)
    assert all(pleg.request_relist(f"p{i}") for i in range(200))
    assert not pleg.request_relist("dropped")
    stats = pleg.stats()
    assert (stats["relist_requests_queued"], stats["relist_requests_dropped"]) == (200, 1)


def test_request_relist_does_nothing_when_the_option_is_off():
    clock, rt, pleg = relisted_node(on_demand_relist=False)
    rt.pods = [pod("p", [C("c", "exited")])]
    clock.step(1)
    assert pleg.request_relist("p") is False
    assert pleg.loop_iteration() is None
    assert rt.taken() == []
    assert pleg.watch().drain() == []
    stats = pleg.stats()
    assert (stats["relist_requests_queued"], stats["relist_requests_dropped"], stats["pod_relists"]) == (0, 0, 0)


def test_option_needs_era_c_and_get_pod():
    class NoGetPod:
        def get_pods(self):
            return []

        def get_pod_status(self, pod):
            return {"id": pod["id"]}

    with pytest.raises(TypeError, match="on_demand_relist needs get_pod\\(uid\\), NoGetPod has none"):
        GenericPLEG(NoGetPod(), cache=PodCache(), pod_sync_on_reinspect=True, on_demand_relist=True)
    # Without the option the runtime needs no get_pod.
    GenericPLEG(NoGetPod(), cache=PodCache(), pod_sync_on_reinspect=True)
    with pytest.raises(ValueError, match="on_demand_relist needs pod_sync_on_reinspect"):
        GenericPLEG(Runtime(FakeClock(0)), cache=PodCache(), on_demand_relist=True)


def test_started_loop_serves_requests_between_relists():
    clock = FakeClock(0)
    rt = Runtime(clock, [pod("p", [C("c", R)])])
    pleg = new_pleg(rt, clock)
    pleg.start()
    try:
        assert pleg.watch().recv(timeout=10) == E("p", "ContainerStarted", "c")
        wait_for(lambda: pleg.next_relist_at is not None, "the loop to wait")
        with pytest.raises(RuntimeError, match="loop_iteration\\(\\) while the loop"):
            pleg.loop_iteration()
        rt.pods = [pod("p", [C("c", "exited")])]
        clock.step(1)
        pleg.request_relist("p")
        # Served at once: the clock is short of the next global relist.
        assert pleg.watch().recv(timeout=10) == E("p", "ContainerDied", "c")
        assert pleg.stats()["relists"] == 1
        clock.step(1)
        wait_for(lambda: pleg.stats()["relists"] == 2, "the global relist")
    finally:
        pleg.stop()
    assert not pleg.running


def test_stop_wakes_a_loop_waiting_on_the_real_clock():
    """The loop sleeps the whole period on the system clock; stop() must not wait for it."""
    rt = Runtime(FakeClock(0))
    pleg = GenericPLEG(rt, cache=PodCache(), relist_period=3600, pod_sync_on_reinspect=True, on_demand_relist=True)
    pleg.start()
    wait_for(lambda: pleg.next_relist_at is not None, "the loop to wait")
    rt.pods = [pod("p", [C("c", R)])]
    pleg.request_relist("p")
    assert pleg.watch().recv(timeout=10) == E("p", "ContainerStarted", "c")
    # A daemon: should stop() hang, the test fails instead of keeping the process alive.
    stopper = threading.Thread(target=pleg.stop, daemon=True)
    stopper.start()
    stopper.join(10)
    assert not stopper.is_alive() and not pleg.running
