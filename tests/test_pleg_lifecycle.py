"""The PLEG at interpreter exit, after os.fork(), with KeyboardInterrupt or SystemExit raised in a runtime, and
under Ctrl-C and timeouts. What could crash or hang runs in a child process with a timeout."""

from __future__ import annotations

import logging
import os
import textwrap
import threading

import pytest
from child import CTRL_C, assert_clean, run
from pleg_fakes import C, E, FakeRuntime, pod, wait_for

from kubevents import FakeClock
from kubevents.pleg import EventedPLEG, GenericPLEG, PodCache


# A runtime whose calls take a little time (`WORK` is "busy" or "sleep"), listing 30 changed pods every time so
# that every relist inspects them all; the child scripts start with it. These durations made the old code
# abort at exit in nearly every run.
RUNTIME = """
import threading, time
from kubevents.pleg import EventChannel, EventedPLEG, GenericPLEG, PodCache

def work(seconds):
    if WORK == "sleep":
        time.sleep(seconds)
    else:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            sum(range(100))

class Runtime:
    def __init__(self):
        self.n = 0
    def get_pods(self):
        work(0.005)
        self.n += 1
        return [{"id": f"p{i}", "containers": [{"id": f"c{self.n}", "state": "running"}]} for i in range(30)]
    def get_pod_status(self, pod):
        work(0.01 if WORK == "busy" else 0.002)
        return {"id": pod["id"], "ips": ["10.0.0.1"]}
"""


# -- exit ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("work", ["busy", "sleep"])
def test_exit_with_a_started_pleg_in_a_runtime_call(work):
    """The interpreter exits while the loop is in (or returning from) a Python runtime call: no abort."""
    code = f"WORK = {work!r}\n{RUNTIME}" + textwrap.dedent("""
        pleg = GenericPLEG(Runtime(), cache=PodCache(), relist_period=0.001)
        pleg.start()
        pleg.watch().recv(timeout=30)
        print("done")
    """)
    for _ in range(4):
        assert_clean(run(code), stdout="done")


@pytest.mark.parametrize("work", ["busy", "sleep"])
def test_exit_with_a_started_evented_pleg_and_python_threads_waiting(work):
    """An EventedPLEG streaming from a Python generator, a Python clock, and daemon threads relisting and
    waiting on the channel and the cache, all left running at exit."""
    code = f"WORK = {work!r}\n{RUNTIME}" + textwrap.dedent("""
        from datetime import datetime, timezone

        class Clock:
            def now(self):
                work(0.001)
                return datetime.now(timezone.utc)

        class Service:
            def get_container_events(self):
                n = 0
                while True:
                    work(0.02)
                    n += 1
                    yield {"container_id": f"c{n}", "pod_uid": "e", "type": "STARTED", "created_at": n,
                           "pod_status": {"id": "e"}}

        cache = PodCache(evented=True)
        generic = GenericPLEG(Runtime(), cache=cache, clock=Clock(), relist_period=0.001)
        evented = EventedPLEG(generic, runtime_service=Service(), relist_period=0.001, cache_update_period=0.001)
        generic.start()
        evented.start()

        def relist_forever():
            while True:
                generic.relist()

        def iterate():
            for _ in generic.watch():
                pass

        def wait_in_cache():
            while True:
                try:
                    cache.get_newer_than("nobody", 4e9, timeout=1)
                except TimeoutError:
                    pass

        for target in (relist_forever, iterate, wait_in_cache):
            threading.Thread(target=target, daemon=True).start()
        while evented.stats()["events_received"] < 2:
            time.sleep(0.01)
        print("done")
    """)
    for _ in range(3):
        assert_clean(run(code), stdout="done")


def test_exit_is_bounded_by_the_exit_timeout_with_a_hung_runtime_call():
    code = """
        import threading, time
        import kubevents
        from kubevents.pleg import GenericPLEG, PodCache

        entered = threading.Event()

        class Runtime:
            def get_pods(self):
                return [{"id": "p", "containers": [{"id": "c", "state": "running"}]}]
            def get_pod_status(self, pod):
                entered.set()
                time.sleep(3600)

        kubevents.set_exit_timeout(0.2)
        pleg = GenericPLEG(Runtime(), cache=PodCache())
        pleg.start()
        entered.wait(30)
        print("done")
    """
    assert_clean(run(code), stdout="done")


# -- fork ------------------------------------------------------------------------------------------------------

FORK = RUNTIME + """
import gc, os, sys, traceback

def in_child(check):
    pid = os.fork()
    if pid == 0:
        try:
            check()
            code = 0
        except BaseException:
            traceback.print_exc()
            code = 1
        os._exit(code)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return "hung"

def refused(call):
    try:
        call()
    except RuntimeError as e:
        assert "created before os.fork()" in str(e), e
    else:
        raise AssertionError(f"{call} did not raise")
"""


@pytest.mark.parametrize("work", ["busy", "sleep"])
def test_a_pleg_made_before_fork_refuses_every_call_in_the_child(work):
    code = f"WORK = {work!r}\n{FORK}" + textwrap.dedent("""
        cache = PodCache(evented=True)
        pleg = GenericPLEG(Runtime(), cache=cache, relist_period=0.001, inspect_concurrency=2)
        evented = EventedPLEG(pleg, cache_update_period=0.001)
        channel = pleg.watch()
        pleg.start()
        evented.start()
        channel.recv(timeout=30)

        def check():
            global pleg, evented, cache, channel
            calls = [
                pleg.stop, pleg.start, pleg.relist, pleg.healthy, pleg.watch, pleg.stats, pleg.pods_to_reinspect,
                pleg.loop_iteration, lambda: pleg.running, lambda: pleg.cache, lambda: pleg.last_error,
                lambda: pleg.relist_time, lambda: pleg.relist_period, lambda: pleg.next_relist_at,
                lambda: pleg.request_reinspect("p0"), lambda: pleg.request_relist("p0"),
                lambda: pleg.update(1, 2), lambda: pleg.watch_conditions("p0"),
                lambda: pleg.set_pod_watch_condition("p0", "k", bool),
                evented.stop, evented.start, evented.healthy, evented.relist, evented.watch, evented.stats,
                lambda: evented.in_use, lambda: evented.last_error, lambda: evented.generic,
                lambda: evented.process_events([]),
                lambda: cache.get("p0"), lambda: cache.set("p0", {"id": "p0"}), lambda: cache.delete("p0"),
                lambda: cache.update_time(1), lambda: cache.set_observed_time("p0", 1),
                lambda: cache.observed_time("p0"), lambda: cache.timestamp, lambda: len(cache),
                lambda: cache.waiters, lambda: cache.evented, lambda: cache.get_newer_than("p0", 0, timeout=1),
                lambda: cache.get_newer_than_async("p0", 0),
                lambda: channel.recv(timeout=1), channel.try_recv, channel.drain, lambda: len(channel),
                lambda: channel.capacity, lambda: channel.dropped, channel.close, lambda: channel.closed,
                lambda: next(channel), lambda: channel._on_ready(print),
                lambda: GenericPLEG(Runtime(), cache=cache), lambda: EventedPLEG(pleg),
            ]
            for call in calls:
                refused(call)
            assert "created before os.fork()" in repr(pleg) + repr(evented) + repr(cache) + repr(channel)
            # What is made in the child works.
            fresh = GenericPLEG(Runtime(), cache=PodCache())
            fresh.relist()
            assert len(fresh.watch().drain()) == 30
            # Dropping the inherited objects must not wait for the parent's threads or locks.
            del pleg, evented, cache, channel, calls
            gc.collect()

        print(in_child(check))
        # The parent's PLEG goes on and stops as usual.
        channel.recv(timeout=30)
        evented.stop()
        pleg.stop(timeout=30)
    """)
    out = run(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0"], out.stderr


# -- KeyboardInterrupt and SystemExit from the runtime -----------------------------------------------------------


class Interrupting(FakeRuntime):
    """``get_pod_status`` (or ``get_pods``) raises ``exc`` while it is set."""

    def __init__(self, pods, exc: BaseException | None = None, in_listing: bool = False) -> None:
        super().__init__(pods)
        self.exc = exc
        self.in_listing = in_listing

    def get_pods(self):
        if self.exc is not None and self.in_listing:
            raise self.exc
        return super().get_pods()

    def get_pod_status(self, pod):
        if self.exc is not None and not self.in_listing and pod["id"] == "b":
            raise self.exc
        return super().get_pod_status(pod)

    def get_pod(self, uid):
        if self.exc is not None:
            raise self.exc
        return next((p for p in self.pods if p["id"] == uid), None)


def inspection_threads() -> int:
    """The PLEG's inspection threads alive (named kubevents-pleg-inspect, cut to 15 characters)."""
    count = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                count += f.read().startswith("kubevents-pleg-")
        except FileNotFoundError:  # ended meanwhile
            pass
    return count


PODS = [pod("a", [C("c", "running")]), pod("b", [C("c", "running")]), pod("c", [C("c", "running")])]


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(3)], ids=type)
@pytest.mark.parametrize("inspect_concurrency", [1, 2])
def test_an_interrupt_in_get_pod_status_stops_the_relist_and_is_raised(exc, inspect_concurrency):
    rt = Interrupting(PODS, exc)
    clock = FakeClock(0)
    pleg = GenericPLEG(rt, cache=PodCache(), clock=clock, inspect_concurrency=inspect_concurrency)
    with pytest.raises(type(exc)):
        pleg.relist()
    # Not an inspection error: nothing of "b" is stored, and the relist did not mark the cache fresh.
    assert pleg.cache.get("b") == ({"id": "b"}, None)
    assert pleg.stats()["inspection_errors"] == 0
    assert pleg.cache.timestamp is None
    # An inspection thread may still be finishing a call it began before the interrupt; a relist meanwhile
    # would take that pod's call for a hung one (by design), so wait for the thread to end first.
    wait_for(lambda: inspection_threads() == 0, "the interrupted relist's inspection threads to end")
    rt.exc = None
    pleg.relist()
    events = pleg.watch().drain()
    assert E("b", "ContainerStarted", "c") in events and E("c", "ContainerStarted", "c") in events


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(3)], ids=type)
def test_an_interrupt_in_get_pods_get_pod_or_a_condition_is_raised(exc):
    rt = Interrupting(PODS, exc, in_listing=True)
    clock = FakeClock(0)
    pleg = GenericPLEG(rt, cache=PodCache(), clock=clock, pod_sync_on_reinspect=True, on_demand_relist=True)
    with pytest.raises(type(exc)):
        pleg.relist()
    with pytest.raises(type(exc)):
        pleg.loop_iteration()
    rt.exc = None
    pleg.relist()
    # An on-demand relist between global relists: get_pod() raises.
    rt.exc, rt.in_listing = exc, False
    clock.step(0.5)
    assert pleg.request_relist("a")
    with pytest.raises(type(exc)):
        pleg.loop_iteration()
    rt.exc = None

    def condition(status):
        raise exc

    pleg.set_pod_watch_condition("a", "k", condition)
    pleg.request_reinspect("a")
    with pytest.raises(type(exc)):
        pleg.relist()


def test_an_exception_is_still_an_inspection_error():
    rt = Interrupting(PODS, ConnectionError("runtime down"))
    pleg = GenericPLEG(rt, cache=PodCache(), clock=FakeClock(0))
    pleg.relist()
    status, err = pleg.cache.get("b")
    assert status is None and isinstance(err, ConnectionError)
    assert pleg.pods_to_reinspect() == ["b"]


@pytest.mark.parametrize("raised_by", ["healthy", "stop"])
def test_an_interrupt_stops_the_loop_is_logged_and_raised_once(raised_by, caplog):
    rt = Interrupting(PODS, SystemExit(3))
    pleg = GenericPLEG(rt, cache=PodCache(), clock=FakeClock(0))
    with caplog.at_level(logging.ERROR, logger="kubevents"):
        pleg.start()
        wait_for(lambda: not pleg.running, "the loop to stop")
    (record,) = [r for r in caplog.records if r.name == "kubevents"]
    assert "SystemExit(3)" in record.getMessage() and record.exc_info is not None
    assert pleg.last_error == "SystemExit: 3"
    with pytest.raises(SystemExit) as raised:
        getattr(pleg, raised_by)()
    assert raised.value.code == 3
    # Once: the next calls answer as usual.
    assert pleg.healthy() == (True, None)
    pleg.stop()
    rt.exc = None
    pleg.start()
    try:
        wait_for(lambda: pleg.next_relist_at is not None, "the restarted loop to wait")
    finally:
        pleg.stop()


def test_an_interrupt_in_the_event_stream_stops_the_evented_pleg():
    class Service:
        def get_container_events(self):
            raise KeyboardInterrupt

    generic = GenericPLEG(FakeRuntime([]), cache=PodCache(evented=True), clock=FakeClock(0))
    evented = EventedPLEG(generic, runtime_service=Service())
    evented.start()
    wait_for(lambda: not evented.in_use, "the evented PLEG to stop")
    assert evented.stats()["stream_failures"] == 1 and not evented.stats()["fell_back"]
    with pytest.raises(KeyboardInterrupt):
        evented.healthy()
    assert evented.healthy() == (True, None)
    evented.stop()


# -- Ctrl-C and timeouts -----------------------------------------------------------------------------------------


class Hanging(FakeRuntime):
    """``get_pod_status`` of pod "h" blocks until ``release`` is set."""

    def __init__(self, pods) -> None:
        super().__init__(pods)
        self.entered = threading.Event()
        self.release = threading.Event()

    def get_pod_status(self, pod):
        if pod["id"] == "h":
            self.entered.set()
            self.release.wait(60)
        return super().get_pod_status(pod)


def test_stop_with_a_timeout_does_not_wait_for_a_hung_runtime_call():
    rt = Hanging([pod("h", [C("c", "running")])])
    pleg = GenericPLEG(rt, cache=PodCache(), clock=FakeClock(0))
    pleg.start()
    try:
        assert rt.entered.wait(30)
        with pytest.raises(TimeoutError, match="ends when the runtime call in progress returns"):
            pleg.stop(timeout=0.05)
        assert not pleg.running
        with pytest.raises(RuntimeError, match="has not ended yet"):
            pleg.start()
    finally:
        rt.release.set()
    pleg.stop(timeout=30)
    pleg.start()
    assert pleg.running
    pleg.stop()


def test_stop_from_the_loops_own_runtime_call_is_refused():
    errors = []

    class Stopping(FakeRuntime):
        def get_pod_status(self, pod):
            try:
                pleg.stop()
            except RuntimeError as e:
                errors.append(str(e))
            return super().get_pod_status(pod)

    pleg = GenericPLEG(Stopping([pod("a", [C("c", "running")])]), cache=PodCache(), clock=FakeClock(0))
    pleg.start()
    try:
        wait_for(lambda: errors, "the runtime call")
    finally:
        pleg.stop()
    assert "would wait for itself" in errors[0]


def test_get_newer_than_times_out_and_leaves_no_waiter():
    cache = PodCache()
    with pytest.raises(TimeoutError):
        cache.get_newer_than("p", 10, timeout=0.05)
    assert cache.waiters == 0


INTERRUPT = CTRL_C + """
import threading
from kubevents import FakeClock
from kubevents.pleg import GenericPLEG, PodCache

entered, release = threading.Event(), threading.Event()

class Runtime:
    def get_pods(self):
        return [{"id": "h", "containers": [{"id": "c", "state": "running"}]}]
    def get_pod_status(self, pod):
        entered.set()
        release.wait(120)
        return {"id": pod["id"]}

def interrupted(call):
    try:
        call()
    except KeyboardInterrupt:
        return "interrupted"
    return "returned"
"""


@pytest.mark.parametrize(
    "call",
    [
        # stop() waiting for the loop's hung runtime call.
        "pleg.start(); entered.wait(60); ctrl_c_once_waiting(); print(interrupted(pleg.stop))",
        # relist() waiting for the relist lock held by the loop.
        "pleg.start(); entered.wait(60); ctrl_c_once_waiting(); print(interrupted(pleg.relist))",
        # relist() waiting for its own inspection threads.
        "pleg = GenericPLEG(Runtime(), cache=PodCache(), clock=FakeClock(0), inspect_concurrency=2); "
        "ctrl_c_once_waiting(); print(interrupted(pleg.relist))",
        # The channel and the cache.
        "ctrl_c_once_waiting(); print(interrupted(pleg.watch().recv))",
        "ctrl_c_once_waiting(); print(interrupted(lambda: pleg.cache.get_newer_than('h', 10)))",
    ],
    ids=["stop", "relist-lock", "relist-inspections", "recv", "get_newer_than"],
)
def test_ctrl_c_interrupts_every_wait(call):
    code = INTERRUPT + "pleg = GenericPLEG(Runtime(), cache=PodCache(), clock=FakeClock(0))\n" + call + "\nrelease.set()\n"
    out = run(code, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["interrupted"], out.stderr
