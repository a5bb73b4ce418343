"""GenericPLEG's relist loop on a fake clock, the event channel's blocking and async forms, parallel and
time-bounded inspections, bad input, and the module's example."""

from __future__ import annotations

import asyncio
import doctest
import threading

import pytest
from pleg_fakes import C, E, FakeRuntime, pod, wait_for

import kubevents.pleg
from kubevents import FakeClock
from kubevents.pleg import EventChannel, GenericPLEG, PodCache, PodList


def test_start_relists_now_and_after_each_period_on_the_clock():
    clock = FakeClock(0)
    rt = FakeRuntime([pod("p", [C("c", "running")])])
    pleg = GenericPLEG(rt, cache=PodCache(), clock=clock, relist_period=10)
    pleg.start()
    try:
        assert pleg.watch().recv(timeout=10) == E("p", "ContainerStarted", "c")
        wait_for(lambda: pleg.next_relist_at is not None, "the loop to wait")
        assert pleg.next_relist_at.timestamp() == 10
        assert pleg.stats()["relists"] == 1
        rt.pods = [pod("p", [C("c", "exited")])]
        clock.step(9)
        assert pleg.watch().recv(timeout=0.05) is None, "no relist before the period has passed"
        clock.step(1)
        assert pleg.watch().recv(timeout=10) == E("p", "ContainerDied", "c")
        assert pleg.stats()["relists"] == 2
        assert pleg.healthy() == (True, None)
    finally:
        pleg.stop()
    assert not pleg.running
    clock.step(100)
    assert pleg.watch().recv(timeout=0.05) is None
    assert pleg.stats()["relists"] == 2


def test_loop_keeps_going_after_a_failed_listing():
    clock = FakeClock(0)
    rt = FakeRuntime([])
    rt.list_error = ConnectionError("runtime down")
    pleg = GenericPLEG(rt, cache=PodCache(), clock=clock)
    pleg.start()
    try:
        wait_for(lambda: pleg.next_relist_at is not None, "the loop to wait")
        assert pleg.stats()["relist_failures"] == 1
        assert "runtime down" in pleg.last_error
        rt.list_error = None
        clock.step(1)
        wait_for(lambda: pleg.relist_time is not None, "a successful relist")
        assert pleg.stats()["relists"] == 2
        assert pleg.healthy() == (True, None)
    finally:
        pleg.stop()


def test_channel_blocking_iteration_timeout_and_close():
    ch = EventChannel(2)
    assert ch.recv(timeout=0) is None
    got = []
    reader = threading.Thread(target=lambda: got.extend(ch))
    reader.start()
    pleg = GenericPLEG(FakeRuntime([pod("p", [C("c", "running")])]), cache=PodCache(), clock=FakeClock(0))
    pleg.relist()
    ch2 = pleg.watch()
    assert ch2 is not ch and list(iter(ch2.try_recv, None)) == [E("p", "ContainerStarted", "c")]
    ch.close()
    reader.join(10)
    assert got == [] and ch.closed
    with pytest.raises(ValueError, match="capacity must be >= 1"):
        EventChannel(0)


def test_async_iteration():
    rt = FakeRuntime([pod("a", [C("c", "running")])])
    pleg = GenericPLEG(rt, cache=PodCache(), clock=FakeClock(0))

    async def main():
        got = []

        async def consume():
            async for ev in pleg.watch():
                got.append(ev)
                if len(got) == 2:
                    return

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0)
        assert not task.done()
        await asyncio.to_thread(pleg.relist)
        rt.pods = [pod("a", [C("c", "exited")])]
        await asyncio.to_thread(pleg.relist)
        await asyncio.wait_for(task, 10)
        return got

    assert asyncio.run(main()) == [E("a", "ContainerStarted", "c"), E("a", "ContainerDied", "c")]


def test_async_iteration_ends_when_closed():
    ch = EventChannel(4)

    async def main():
        out = []
        closer = asyncio.get_running_loop().call_later(0, ch.close)
        async for ev in ch:
            out.append(ev)
        closer.cancel()
        return out

    assert asyncio.run(main()) == []


class BarrierRuntime(FakeRuntime):
    """Inspections pass only when two run at the same time."""

    def __init__(self, pods):
        super().__init__(pods)
        self.barrier = threading.Barrier(2, timeout=10)

    def get_pod_status(self, pod):
        self.barrier.wait()
        return {"id": pod["id"]}


def test_inspections_run_in_parallel():
    rt = BarrierRuntime([pod("a", [C("c", "running")]), pod("b", [C("c", "running")])])
    pleg = GenericPLEG(rt, cache=PodCache(), clock=FakeClock(0), inspect_concurrency=2)
    pleg.relist()
    assert pleg.watch().drain() == [E("a", "ContainerStarted", "c"), E("b", "ContainerStarted", "c")]
    assert pleg.stats()["inspections"] == 2


class HangingRuntime(FakeRuntime):
    def __init__(self, pods, hung):
        super().__init__(pods)
        self.hung = hung
        self.release = threading.Event()

    def get_pod_status(self, pod):
        self.calls.append(pod["id"])
        if pod["id"] == self.hung:
            self.release.wait(30)
        return {"id": pod["id"]}


def test_a_hung_inspection_does_not_stall_the_relist():
    rt = HangingRuntime([pod(p, [C("c", "running")]) for p in "abc"], hung="a")
    pleg = GenericPLEG(rt, cache=PodCache(), clock=FakeClock(0), inspect_timeout=0.5)
    try:
        pleg.relist()
        assert pleg.watch().drain() == [E("b", "ContainerStarted", "c"), E("c", "ContainerStarted", "c")]
        status, err = pleg.cache.get("a")
        assert status is None and isinstance(err, TimeoutError)
        assert pleg.pods_to_reinspect() == ["a"]
        assert pleg.stats()["inspection_timeouts"] == 1
        # Still hung: no second call piles onto it.
        pleg.relist()
        assert pleg.watch().drain() == []
        assert "has not returned yet" in str(pleg.cache.get("a")[1])
    finally:
        rt.release.set()

    def recovered():
        pleg.relist()
        return pleg.cache.get("a")[1] is None

    wait_for(recovered, "the hung inspection to return")
    assert pleg.watch().drain() == [E("a", "ContainerStarted", "c")]


def test_relist_releases_the_gil_while_waiting():
    rt = HangingRuntime([pod("a", [C("c", "running")])], hung="a")
    pleg = GenericPLEG(rt, cache=PodCache(), clock=FakeClock(0), inspect_timeout=30)
    th = threading.Thread(target=pleg.relist)
    th.start()
    # This thread runs Python while the relist waits on the inspection thread.
    wait_for(lambda: rt.calls == ["a"], "the inspection to start")
    rt.release.set()
    th.join(10)
    assert pleg.watch().drain() == [E("a", "ContainerStarted", "c")]


def test_pod_list_bulk_form():
    pods = PodList([("p1", "n1", "ns", [("c1", "running")], [("s1", "running")]), pod("p2", [C("c", "exited")])])
    assert len(pods) == 2
    pleg = GenericPLEG(FakeRuntime(pods), cache=PodCache(), clock=FakeClock(0))
    pleg.relist()
    assert pleg.watch().drain() == [
        E("p1", "ContainerStarted", "c1"),
        E("p1", "ContainerStarted", "s1"),
        E("p2", "ContainerDied", "c"),
    ]


def test_runtime_receives_the_pod_as_a_dict():
    rt = FakeRuntime([("p1", "web-0", "web", [("c1", "running")], [])])
    seen = []
    rt.statuses["p1"] = lambda p: seen.append(p) or {"id": p["id"]}
    GenericPLEG(rt, cache=PodCache(), clock=FakeClock(0)).relist()
    assert seen == [pod("p1", [C("c1", "running")], name="web-0", namespace="web")]


def test_bad_listing_raises_and_changes_nothing():
    rt = FakeRuntime([pod("p", [C("c", "paused")])])
    pleg = GenericPLEG(rt, cache=PodCache(), clock=FakeClock(0))
    with pytest.raises(ValueError, match=r"pods\[0\].containers\[0\].state: unrecognized container state"):
        pleg.relist()
    assert pleg.relist_time is None
    rt.pods = "not pods"
    with pytest.raises(TypeError, match="get_pods\\(\\): expected a list of pods"):
        pleg.relist()


def test_bad_status_is_raised_after_the_relist_and_retried():
    rt = FakeRuntime([pod("a", [C("c", "running")]), pod("b", [C("c", "running")])])
    rt.statuses["a"] = ["not", "a", "dict"]
    pleg = GenericPLEG(rt, cache=PodCache(), clock=FakeClock(0))
    with pytest.raises(TypeError, match="get_pod_status\\(\\): expected a status dict, got list"):
        pleg.relist()
    assert pleg.watch().drain() == [E("b", "ContainerStarted", "c")]
    assert isinstance(pleg.cache.get("a")[1], TypeError)
    assert pleg.pods_to_reinspect() == ["a"]
    del rt.statuses["a"]
    pleg.relist()
    assert pleg.watch().drain() == [E("a", "ContainerStarted", "c")]


@pytest.mark.parametrize(
    "kw,exc,msg",
    [
        ({"relist_period": 0}, ValueError, "relist_period must be > 0"),
        ({"relist_threshold": -1}, ValueError, "relist_threshold must be >= 0"),
        ({"channel_capacity": 0}, ValueError, "channel_capacity must be >= 1"),
        ({"inspect_concurrency": 0}, ValueError, "inspect_concurrency must be >= 1"),
        ({"inspect_timeout": 0}, ValueError, "inspect_timeout must be > 0"),
        ({"clock": object()}, TypeError, "now\\(\\) method"),
    ],
)
def test_bad_options(kw, exc, msg):
    with pytest.raises(exc, match=msg):
        GenericPLEG(FakeRuntime(), cache=PodCache(), **kw)


def test_runtime_and_condition_must_fit():
    with pytest.raises(TypeError, match="get_pods\\(\\) and get_pod_status"):
        GenericPLEG(object(), cache=PodCache())
    pleg = GenericPLEG(FakeRuntime(), cache=PodCache())
    with pytest.raises(TypeError, match="condition must be callable"):
        pleg.set_pod_watch_condition("p", "k", 42)


def test_defaults_and_update():
    pleg = GenericPLEG(FakeRuntime(), cache=PodCache())
    assert (pleg.relist_period, pleg.relist_threshold, pleg.watch().capacity) == (1.0, 180.0, 1000)
    pleg.update(300, 600)
    assert (pleg.relist_period, pleg.relist_threshold) == (300.0, 600.0)


def test_module_example():
    failures, tried = doctest.testmod(kubevents.pleg)
    assert tried > 0 and failures == 0


def test_unchanged_pods_are_reused_but_every_change_is_seen():
    """get_pods() answers in plain data are compared with the last listing; any difference is converted."""
    first = [("p1", "web-0", "web", [("c1", "running")], [("s1", "running")]), pod("p2", [C("c", "running")])]
    rt = FakeRuntime(first)
    seen = []
    rt.statuses["p1"] = lambda p: seen.append(p["name"]) or {"id": "p1"}
    pleg = GenericPLEG(rt, cache=PodCache(), clock=FakeClock(0))
    pleg.relist()
    assert len(pleg.watch().drain()) == 3
    # Renamed (same containers): no event, but the pod the relist holds is the new one.
    rt.pods = [("p1", "web-1", "web", [("c1", "running")], [("s1", "running")]), pod("p2", [C("c", "running")])]
    pleg.relist()
    assert pleg.watch().drain() == []
    rt.pods = [("p1", "web-1", "web", [("c1", "exited")], [("s1", "running")]), pod("p2", [C("c", "exited")])]
    pleg.relist()
    assert pleg.watch().drain() == [E("p1", "ContainerDied", "c1"), E("p2", "ContainerDied", "c")]
    assert seen == ["web-0", "web-1"]
    rt.pods = [("p1", "web-1", "web", [("c1", "paused")], [("s1", "running")])]
    with pytest.raises(ValueError, match="unrecognized container state"):
        pleg.relist()


def test_calling_back_into_the_pleg_from_its_own_relist_raises():
    rt = FakeRuntime([pod("a", [C("c", "running")]), pod("b", [C("c", "running")])])
    pleg = GenericPLEG(rt, cache=PodCache(), clock=FakeClock(0))

    def relist_again(_pod):
        pleg.relist()
        return {"id": "a"}

    rt.statuses["a"] = relist_again
    pleg.relist()
    err = pleg.cache.get("a")[1]
    assert isinstance(err, RuntimeError) and "relist() was called from a runtime call" in str(err)
    assert pleg.watch().drain() == [E("b", "ContainerStarted", "c")]

    pleg.set_pod_watch_condition("b", "k", lambda _s: pleg.pods_to_reinspect() == [])
    pleg.request_reinspect("b")
    with pytest.raises(RuntimeError, match="pods_to_reinspect\\(\\) was called"):
        pleg.relist()


def test_calling_back_from_an_inspection_thread_raises_too():
    rt = FakeRuntime([pod("a", [C("c", "running")])])
    pleg = GenericPLEG(rt, cache=PodCache(), clock=FakeClock(0), inspect_concurrency=2)

    def relist_again(_pod):
        pleg.request_reinspect("x")
        return {"id": "a"}

    rt.statuses["a"] = relist_again
    pleg.relist()
    assert isinstance(pleg.cache.get("a")[1], RuntimeError)


def test_interpreter_exit_with_a_loop_running(tmp_path):
    """A loop left running does not keep the process from exiting."""
    import subprocess
    import sys

    script = tmp_path / "leave_running.py"
    script.write_text(
        "from kubevents.pleg import GenericPLEG, PodCache\n"
        "class R:\n"
        "    def get_pods(self): return [{'id': 'p', 'containers': [{'id': 'c', 'state': 'running'}]}]\n"
        "    def get_pod_status(self, pod): return {'id': pod['id']}\n"
        "pleg = GenericPLEG(R(), cache=PodCache(), relist_period=0.001)\n"
        "pleg.start()\n"
        "pleg.watch().recv(timeout=10)\n"
        "print('done')\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "done"
