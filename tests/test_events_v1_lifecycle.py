"""EventsBroadcaster over the process's life: exit without shutdown, asyncio loops, several threads shutting
down at once, Ctrl-C, os.fork(), and what a sink's exceptions become. What could crash or hang the
interpreter runs in a child process with a timeout."""

import asyncio
import gc
import logging
import os
import sys
import threading
import time

import pytest
from child import CTRL_C, assert_clean, run

import kubevents
from kubevents.sinks import ApiError, MemorySink

T0 = 1_704_067_200
POD = {"kind": "Pod", "namespace": "ns", "name": "p", "apiVersion": "v1"}

# Prepended to every child's code.
PRELUDE = CTRL_C + """
import asyncio, gc, os, signal, sys, threading, time
POD = {"kind": "Pod", "namespace": "ns", "name": "p", "apiVersion": "v1"}

def pod(i):
    return dict(POD, name=f"p{i}")

class NullSink:
    def create(self, event):
        return None

    def patch(self, event, patch):
        return None

class SlowSink(NullSink):
    \"\"\"Each create takes `delay` seconds; counts them.\"\"\"

    def __init__(self, delay):
        self.delay, self.n = delay, 0

    def create(self, event):
        time.sleep(self.delay)
        self.n += 1

class HangingSink(NullSink):
    \"\"\"create waits until released (at most a minute).\"\"\"

    def __init__(self):
        self.entered, self.release = threading.Event(), threading.Event()

    def create(self, event):
        self.entered.set()
        self.release.wait(60)
"""


def run_child(code, timeout=60):
    return run(code, timeout, prelude=PRELUDE)


class NullSink:
    def create(self, event):
        return None

    def patch(self, event, patch):
        return None


# 1. Exit


def test_a_broadcaster_left_running_delivers_its_queue_at_exit_and_exits_cleanly():
    # The handler is registered before kubevents is imported: it runs after kubevents' exit hook.
    code = """
    import atexit
    seen = {}

    def report():
        print(seen["before"] < 1000, seen["sink"].n, seen["b"].stats()["dropped_incoming"])

    atexit.register(report)
    import kubevents

    kubevents.set_exit_timeout(60)
    sink = SlowSink(0.001)
    b = kubevents.EventsBroadcaster()
    b.start_recording_to_sink(sink)
    rec = b.new_recorder("c", "i")
    # The engine's queue holds 1000: none is dropped.
    for i in range(1000):
        rec.eventf(pod(i), None, "Normal", "r", "a", "n")
    seen.update(sink=sink, b=b, before=sink.n)
    """
    for _ in range(3):
        assert_clean(run_child(code), stdout="True 1000 0")


def test_exit_after_a_shutdown_that_timed_out_is_clean_while_the_engine_thread_calls_the_sink():
    code = """
    import logging
    import kubevents

    logging.basicConfig()
    kubevents.set_exit_timeout(0)
    sink = SlowSink(0.001)
    b = kubevents.EventsBroadcaster()
    b.start_recording_to_sink(sink)
    rec = b.new_recorder("c", "i")
    for i in range(1000):
        rec.eventf(pod(i), None, "Normal", "r", "a", "n")
    try:
        b.shutdown(timeout=0.01)
    except TimeoutError:
        print("timed out")
    """
    for _ in range(3):
        p = run_child(code)
        assert_clean(p, stdout="timed out")
        assert "could not be delivered" in p.stderr


def test_a_broadcaster_dropped_without_shutdown_writes_what_it_holds_and_ends_its_thread():
    def os_threads():
        return len(os.listdir("/proc/self/task"))

    before = os_threads()
    sink = MemorySink()
    b = kubevents.EventsBroadcaster(clock=kubevents.FakeClock(T0))
    b.start_recording_to_sink(sink)
    b.new_recorder("c", "i").eventf(POD, None, "Normal", "r", "a", "n")
    assert os_threads() > before
    del b
    gc.collect()
    # Waiting for a condition, bounded: the engine thread writes the event and exits.
    # (A thread of an earlier test may still be ending: at most as many as before.)
    for _ in range(1000):
        if os_threads() <= before:
            break
        time.sleep(0.01)
    assert os_threads() <= before and len(sink) == 1


# 2. asyncio


class AsyncSink:
    def __init__(self):
        self.calls = 0

    async def create(self, event):
        await asyncio.sleep(0)
        self.calls += 1
        return event

    async def patch(self, event, patch):
        self.calls += 1
        return None


def test_aclose_shuts_down_off_the_loop():
    sink = AsyncSink()

    async def main():
        b = kubevents.EventsBroadcaster(clock=kubevents.FakeClock(T0))
        b.start_recording_to_sink(sink)
        rec = b.new_recorder("c", "i")
        for _ in range(3):
            rec.eventf(POD, None, "Normal", "r", "a", "n")
        return await b.aclose(timeout=10)

    stats = asyncio.run(main())
    # create, the series patch and the final count
    assert (sink.calls, stats["writes_ok"], stats["shutdown_writes"]) == (3, 3, 1)


def test_blocking_calls_on_the_async_sinks_loop_raise_instead_of_hanging():
    code = """
    import kubevents

    class AsyncSink(NullSink):
        async def create(self, event):
            return None

    async def main():
        b = kubevents.EventsBroadcaster()
        b.start_recording_to_sink(AsyncSink())
        b.new_recorder("c", "i").eventf(POD, None, "Normal", "r", "a", "n")
        for name, call in (("shutdown", b.shutdown), ("wait_idle", b.wait_idle), ("exit", lambda: b.__exit__())):
            try:
                call()
                print(name, "returned")
            except RuntimeError as e:
                print(name, "aclose()" in str(e))
        print((await b.aclose())["writes_ok"])

    asyncio.run(main())
    """
    assert_clean(run_child(code), stdout="shutdown True wait_idle True exit True 1")


def test_an_async_sink_whose_loop_stopped_is_abandoned_and_counted():
    code = """
    import kubevents

    entered = None

    class AsyncSink(NullSink):
        async def create(self, event):
            entered.set()
            await asyncio.sleep(3600)

    async def start():
        global entered
        entered = asyncio.Event()
        b = kubevents.EventsBroadcaster()
        b.start_recording_to_sink(AsyncSink())
        rec = b.new_recorder("c", "i")
        rec.eventf(pod(1), None, "Normal", "r", "a", "n")
        await entered.wait()
        rec.eventf(pod(2), None, "Normal", "r", "a", "n")
        return b

    loop = asyncio.new_event_loop()
    b = loop.run_until_complete(start())
    # The loop has stopped, with the first create pending on it.
    s = b.shutdown()
    print(s["writes_ok"], s["write_errors"], s["pending_retries"], s["pending"])
    """
    assert_clean(run_child(code), stdout="0 2 0 0")


# 3. Concurrent shutdown


def test_threads_shutting_down_at_once_all_return_when_everything_is_delivered():
    code = """
    import kubevents

    for trial in range(12):
        sink, seen = SlowSink(0.005), []
        b = kubevents.EventsBroadcaster()
        b.start_recording_to_sink(sink)
        b.start_event_watcher(lambda e: (time.sleep(0.002), seen.append(e)))
        rec = b.new_recorder("c", "i")
        for i in range(20):
            rec.eventf(pod(i), None, "Normal", "r", "a", "n")
        results = []

        def shut():
            results.append((b.shutdown()["writes_ok"], sink.n, len(seen)))

        threads = [threading.Thread(target=shut) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads), f"trial {trial}: shutdown hung"
        assert results == [(20, 20, 20)] * 2, results
    print("ok")
    """
    assert_clean(run_child(code, timeout=120), stdout="ok")


def test_a_full_watcher_queue_does_not_hold_shutdown_past_its_timeout():
    code = """
    import kubevents

    busy, release = threading.Event(), threading.Event()
    b = kubevents.EventsBroadcaster()
    b.start_event_watcher(lambda e: (busy.set(), release.wait(60)))
    rec = b.new_recorder("c", "i")
    rec.eventf(POD, None, "Normal", "r", "a", "n")
    busy.wait(30)
    # 1000 wait in the watcher's queue, 99 are dropped.
    for _ in range(1099):
        rec.eventf(POD, None, "Normal", "r", "a", "n")
    try:
        b.shutdown(timeout=0.2)
    except TimeoutError:
        print("timed out")
    release.set()
    print(sum(b.shutdown(timeout=30)["dropped_watchers"].values()))
    """
    assert_clean(run_child(code), stdout="timed out 99")


def test_blocked_watchers_make_a_shutdown_time_out_and_finish_once_released():
    release = threading.Event()
    b = kubevents.EventsBroadcaster(clock=kubevents.FakeClock(T0))
    for _ in range(3):
        b.start_event_watcher(lambda e: release.wait(30))
    b.new_recorder("c", "i").eventf(POD, None, "Normal", "r", "a", "n")
    try:
        with pytest.raises(TimeoutError, match="still pending; they go on in the background"):
            b.shutdown(timeout=0.3)
    finally:
        release.set()
    assert b.shutdown(timeout=10)["pending"] == 0


# 4. Ctrl-C


@pytest.mark.parametrize("method", ["shutdown", "wait_idle"])
def test_ctrl_c_interrupts_a_wait_behind_a_hanging_sink(method):
    code = f"""
    import kubevents

    sink = HangingSink()
    b = kubevents.EventsBroadcaster()
    b.start_recording_to_sink(sink)
    b.new_recorder("c", "i").eventf(POD, None, "Normal", "r", "a", "n")
    sink.entered.wait(30)
    ctrl_c_once_waiting()
    try:
        b.{method}()
        print("returned")
    except KeyboardInterrupt:
        print("interrupted")
    sink.release.set()
    print(b.shutdown(timeout=30)["writes_ok"])
    """
    assert_clean(run_child(code, timeout=30), stdout="interrupted 1")


# 5. stats()


def test_stats_does_not_wait_for_a_sink_call():
    entered, release = threading.Event(), threading.Event()

    class Sink(NullSink):
        def create(self, event):
            entered.set()
            release.wait(30)

    b = kubevents.EventsBroadcaster(clock=kubevents.FakeClock(T0))
    b.start_recording_to_sink(Sink())
    b.new_recorder("c", "i").eventf(POD, None, "Normal", "r", "a", "n")
    seen = []
    try:
        assert entered.wait(10)
        # Another thread: if stats() waited for the sink, this one would release it only after the wait.
        t = threading.Thread(target=lambda: seen.append(b.stats()), daemon=True)
        t.start()
        t.join(10)
        assert not t.is_alive(), "stats() waited for the sink call"
    finally:
        release.set()
    assert (seen[0]["observed"], seen[0]["first_occurrences"], seen[0]["writes_ok"]) == (1, 1, 0)
    assert b.shutdown(timeout=10)["writes_ok"] == 1


# 6. fork


def test_a_broadcaster_inherited_through_fork_refuses_to_be_used_and_drops_quietly():
    code = """
    import kubevents

    sink = SlowSink(0.001)
    b = kubevents.EventsBroadcaster()
    b.start_recording_to_sink(sink)
    b.start_event_watcher(lambda e: None)
    rec = b.new_recorder("c", "i")
    for i in range(200):
        rec.eventf(pod(i), None, "Normal", "r", "a", "n")
    pid = os.fork()
    if pid == 0:
        calls = {
            "shutdown": lambda: b.shutdown(timeout=2),
            "wait_idle": lambda: b.wait_idle(timeout=2),
            "stats": b.stats,
            "start_recording_to_sink": lambda: b.start_recording_to_sink(sink),
            "start_event_watcher": lambda: b.start_event_watcher(print),
            "start_structured_logging": b.start_structured_logging,
            "new_recorder": lambda: b.new_recorder("c"),
            "eventf": lambda: rec.eventf(POD, None, "Normal", "r", "a", "n"),
            "aclose": lambda: asyncio.run(b.aclose(timeout=2)),
            "with": lambda: b.__exit__(None, None, None),
        }
        refused = []
        for name, call in calls.items():
            try:
                call()
            except RuntimeError as e:
                if "created before os.fork()" in str(e) and "EventsBroadcaster" in str(e):
                    refused.append(name)
        if refused != list(calls):
            print("not refused:", set(calls) - set(refused), flush=True)
            os._exit(1)
        del b, rec
        gc.collect()
        sys.exit(7)
    for _ in range(3000):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.01)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        status = -1
    print(os.waitstatus_to_exitcode(status), b.shutdown(timeout=30)["writes_ok"])
    """
    assert_clean(run_child(code), stdout="7 200")


# 7. KeyboardInterrupt and SystemExit raised in a sink


@pytest.mark.parametrize(("exc", "method"), [(KeyboardInterrupt, "wait_idle"), (SystemExit, "shutdown")])
def test_an_interrupt_raised_in_the_sink_is_not_retried_and_raised_again_by_the_caller(exc, method):
    clock = kubevents.FakeClock(T0)
    calls = []

    class Sink(NullSink):
        def create(self, event):
            calls.append(event["regarding"]["name"])
            if len(calls) == 1:
                raise exc("from the sink")

    b = kubevents.EventsBroadcaster(clock=clock)
    b.start_recording_to_sink(Sink())
    rec = b.new_recorder("c", "i")
    rec.eventf(POD, None, "Normal", "r", "a", "n")
    rec.eventf(dict(POD, name="q"), None, "Normal", "r", "a", "n")
    with pytest.raises(exc, match="from the sink"):
        getattr(b, method)(timeout=10)
    # A retry would be due by now, and shutdown gives every pending retry one last attempt.
    clock.step(60)
    st = b.shutdown(timeout=10)
    # Raised once; the event was abandoned, never retried.
    assert calls == ["p", "q"]
    assert (st["retries"], st["pending_retries"], st["write_errors"], st["writes_ok"]) == (0, 0, 1, 1)


# 8. Sink errors a user can act on


def test_a_bug_in_the_sink_is_logged_as_such_with_its_traceback_once(caplog):
    class Buggy(NullSink):
        def create(self, event):
            if event["regarding"]["name"] == "rejected":
                raise ApiError(422, "Invalid")
            raise TypeError("my sink bug")

    b = kubevents.EventsBroadcaster(clock=kubevents.FakeClock(T0))
    b.start_recording_to_sink(Buggy())
    rec = b.new_recorder("c", "i")
    with caplog.at_level(logging.WARNING, logger="kubevents"):
        for name in ("a", "b", "rejected"):
            rec.eventf(dict(POD, name=name), None, "Normal", "r", "a", "n")
        b.shutdown(timeout=10)
    bugs = [r.getMessage() for r in caplog.records if "my sink bug" in r.getMessage()]
    # One line for the first failure, with the traceback; the rest are counted in the shutdown's line.
    assert len(bugs) == 1
    assert bugs[0].startswith(
        f"kubevents: sink {b.name}/sink-1 (Buggy) failed to write an event: TypeError: my sink bug; the event is "
        'given up (not retryable (TypeError)): Pod ns/a: Normal r (a): "n"'
    )
    assert "raise TypeError" in bugs[0] and bugs[0].count("Traceback") == 1
    summary = [r.getMessage() for r in caplog.records if "shut down" in r.getMessage()]
    assert summary == [
        f"kubevents: {b.name} shut down: 3 events received; sink {b.name}/sink-1 (Buggy): 3 failed writes, 3 events "
        "given up (2 not retryable (TypeError), 1 rejected (HTTP 422)), last error: HTTP 422: Invalid"
    ]