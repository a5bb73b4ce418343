"""The core/v1 Broadcaster around the process: exit, fork, Ctrl-C, asyncio, timeouts, concurrent shutdowns,
and what it logs when sinks and callbacks fail. Scenarios that could crash or hang run in a child process."""

import asyncio
import logging
import threading

import pytest

import kubevents
from child import assert_clean, interrupt_when_ready, run

POD = {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u", "apiVersion": "v1"}


def pod(i):
    return {**POD, "name": f"p{i}"}


# A module-level broadcaster with thousands of events queued and a sink busy in Python, never shut down.
# An atexit handler registered before kubevents is imported runs after kubevents' own hook.
BUSY_AT_EXIT = """
    import atexit
    n = [0]
    atexit.register(lambda: print("delivered", n[0], flush=True))
    import kubevents
    class Sink:
        def create(self, e):
            x = 0
            for i in range(2000):
                x += i
            n[0] += 1
        def patch(self, e, p):
            n[0] += 1
    b = kubevents.Broadcaster(queue_length=10000)
    b.start_recording_to_sink(Sink())
    b.start_event_watcher(lambda e: None)
    r = b.new_recorder("c")
    for i in range(5000):
        r.eventf({"kind": "Pod", "namespace": "ns", "name": f"p{i}", "uid": "u"}, "Normal", "R", "m %d", i)
"""


@pytest.mark.parametrize("run_no", range(4))
def test_exit_without_shutdown_delivers_and_exits_cleanly(run_no):
    p = run(BUSY_AT_EXIT)
    assert_clean(p)
    assert "delivered 5000" in p.stdout


def test_exit_with_a_sink_call_that_never_returns_is_clean_and_logged():
    # The flush at exit gives up after the exit timeout; the thread stuck in the sink must not crash the exit.
    p = run("""
        import logging, threading, kubevents
        logging.basicConfig(level=logging.WARNING)
        kubevents.set_exit_timeout(0.5)
        never = threading.Event()
        class Sink:
            def create(self, e):
                never.wait()
            def patch(self, e, p):
                never.wait()
        b = kubevents.Broadcaster()
        b.start_recording_to_sink(Sink())
        r = b.new_recorder("c")
        for i in range(20):
            r.eventf({"kind": "Pod", "namespace": "ns", "name": f"p{i}", "uid": "u"}, "Normal", "R", "m")
        try:
            b.shutdown(timeout=0.2)
        except TimeoutError as e:
            print("timed out:", e)
    """)
    assert_clean(p)
    assert "timed out: shutdown timed out with 20 events still pending" in p.stdout
    # Logged once, with the count of what was lost.
    assert p.stderr.count("at exit, 20 events could not be delivered") == 1, p.stderr


HANGING_REQUEST = {
    "core/v1": ("from kubevents.sinks import CoreV1Sink as Sink", "CoreV1Api",
                "b = kubevents.Broadcaster(); b.start_recording_to_sink(sink)",
                "b.new_recorder('c').eventf(POD, 'Normal', 'R', 'm')"),
    "events.k8s.io/v1": ("from kubevents.events_v1 import EventsV1Sink as Sink", "EventsV1Api",
                         "b = kubevents.EventsBroadcaster(); b.start_recording_to_sink(sink)",
                         "b.new_recorder('c').eventf(POD, None, 'Normal', 'R', 'A', 'm')"),
}


@pytest.mark.parametrize("api", HANGING_REQUEST)
def test_exit_while_an_http_request_hangs_is_clean(api):
    # The official client's sink against a server that accepts the connection and never answers. The
    # finalization closes the listening socket, so the request returns while the interpreter finalizes, through
    # the frames of the client's own Rust extension (pydantic-core).
    imp, api_class, start, record = HANGING_REQUEST[api]
    p = run(f"""
        import socket, kubevents, kubernetes
        {imp}
        POD = {{"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u"}}
        kubevents.set_exit_timeout(0.5)
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        cfg = kubernetes.client.Configuration()
        cfg.host = "http://127.0.0.1:%d" % srv.getsockname()[1]
        sink = Sink(kubernetes.client.{api_class}(kubernetes.client.ApiClient(cfg)))
        {start}
        {record}
        try:
            b.shutdown(timeout=1)
        except TimeoutError:
            print("timed out")
    """)
    assert_clean(p)
    assert "timed out" in p.stdout
    assert "1 sink or runtime calls were still running" in p.stderr


def test_set_exit_timeout_checks_its_argument():
    with pytest.raises(ValueError, match="exit timeout: must be >= 0"):
        kubevents.set_exit_timeout(-1)
    with pytest.raises(TypeError, match="exit timeout: expected seconds"):
        kubevents.set_exit_timeout("5")
    before = kubevents.get_exit_timeout()
    try:
        kubevents.set_exit_timeout(2)
        assert kubevents.get_exit_timeout() == 2.0
    finally:
        kubevents.set_exit_timeout(before)
    assert kubevents.DEFAULT_EXIT_TIMEOUT == 5.0


def test_shutdown_honours_its_timeout_with_a_stuck_watcher_in_wait_mode():
    # The distribution waits for the full watcher; shutdown used to join it before looking at its deadline.
    p = run("""
        import threading, kubevents
        release = threading.Event()
        b = kubevents.Broadcaster(queue_length=2, full_channel="wait")
        b.start_event_watcher(lambda e: release.wait())
        r = b.new_recorder("c")
        for i in range(10):
            r.eventf({"kind": "Pod", "namespace": "ns", "name": f"p{i}", "uid": "u"}, "Normal", "R", "m")
        try:
            b.shutdown(timeout=1)
        except TimeoutError as e:
            print("timed out")
        release.set()
        print("stats", b.shutdown(timeout=30)["received"])
    """, timeout=60)
    assert_clean(p)
    assert "timed out" in p.stdout and "stats 10" in p.stdout


def test_concurrent_shutdowns_all_wait_for_the_end():
    release = threading.Event()
    delivered = []

    class Sink:
        def create(self, e):
            release.wait(30)
            delivered.append(e)

        def patch(self, e, p):
            delivered.append(e)

    b = kubevents.Broadcaster()
    b.start_recording_to_sink(Sink())
    r = b.new_recorder("c")
    for i in range(20):
        r.eventf(pod(i), "Normal", "R", "m")
    results = []

    def shut():
        results.append(b.shutdown(timeout=60)["created"])

    threads = [threading.Thread(target=shut) for _ in range(2)]
    for t in threads:
        t.start()
    # Neither caller may return while the deliveries are held.
    for t in threads:
        t.join(0.3)
        assert t.is_alive()
    release.set()
    for t in threads:
        t.join(60)
    assert results == [20, 20] and len(delivered) == 20


@pytest.mark.parametrize("call", ["b.shutdown()", "b.wait_idle()"])
def test_ctrl_c_interrupts_a_wait_behind_a_hanging_sink(call):
    p = interrupt_when_ready(f"""
        import threading, kubevents
        started = threading.Event()
        class Sink:
            def create(self, e):
                started.set()
                threading.Event().wait()
            def patch(self, e, p):
                pass
        kubevents.set_exit_timeout(0)
        b = kubevents.Broadcaster()
        b.start_recording_to_sink(Sink())
        b.new_recorder("c").eventf({{"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u"}}, "Normal", "R", "m")
        started.wait()
        when_waiting(ready)
        try:
            {call}
        except KeyboardInterrupt:
            print("interrupted in the call")
    """)
    assert "interrupted in the call" in p.stdout, p.stderr
    assert not any(m in p.stderr for m in ("Fatal Python error", "panicked at")), p.stderr


def test_fork_child_refuses_a_broadcaster_made_before_the_fork():
    p = run("""
        import os, kubevents
        from kubevents.sinks import MemorySink
        b = kubevents.Broadcaster()
        b.start_recording_to_sink(MemorySink())
        r = b.new_recorder("c")
        pid = os.fork()
        if pid == 0:
            refused = 0
            for call in (lambda: b.shutdown(timeout=2), b.stats, lambda: b.wait_idle(1),
                         lambda: r.eventf({"kind": "Pod", "name": "p"}, "Normal", "R", "m"),
                         lambda: b.new_recorder("x")):
                try:
                    call()
                except RuntimeError as e:
                    refused += "created before os.fork()" in str(e)
            # A new broadcaster works in the child.
            c = kubevents.Broadcaster()
            sink = MemorySink()
            c.start_recording_to_sink(sink)
            c.new_recorder("c").eventf({"kind": "Pod", "name": "p"}, "Normal", "R", "m")
            c.shutdown(timeout=10)
            del b, r
            os._exit(40 + refused if len(sink) == 1 else 1)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
        print("parent", b.shutdown(timeout=10)["received"])
    """)
    assert_clean(p)
    assert "child 45" in p.stdout and "parent 0" in p.stdout


@pytest.mark.parametrize("exc", ["KeyboardInterrupt", "SystemExit(3)"])
def test_keyboard_interrupt_in_a_sink_is_not_retried_and_raised_again(exc):
    calls = []

    class Sink:
        def create(self, e):
            calls.append(e)
            raise eval(exc)

        def patch(self, e, p):
            pass

    clock = kubevents.FakeClock(1_700_000_000)
    b = kubevents.Broadcaster(clock=clock)
    b.start_recording_to_sink(Sink())
    b.new_recorder("c").eventf(POD, "Normal", "R", "m")
    with pytest.raises(BaseException) as info:
        b.wait_idle(30)
    assert type(info.value).__name__ == exc.split("(")[0]
    assert len(calls) == 1
    s = b.shutdown(timeout=30)
    assert (s["abandoned"], s["retries"], len(calls)) == (1, 0, 1)


def test_a_bug_in_a_sink_is_worded_as_such_with_its_traceback_once(caplog):
    class Sink:
        def create(self, e):
            raise TypeError("my sink bug")

        def patch(self, e, p):
            pass

    with caplog.at_level(logging.WARNING, logger="kubevents"):
        b = kubevents.Broadcaster()
        b.start_recording_to_sink(Sink())
        r = b.new_recorder("c")
        for i in range(3):
            r.eventf(pod(i), "Normal", "R", "m")
        s = b.shutdown(timeout=30)
    assert s["abandoned"] == 3
    messages = [rec.getMessage() for rec in caplog.records if "failed to write an event" in rec.getMessage()]
    # The first failure with its traceback; the others are counted in the shutdown's summary.
    assert len(messages) == 1
    assert messages[0].startswith(
        f"kubevents: sink {b.name}/sink-1 (Sink) failed to write an event: TypeError: my sink bug; the event is "
        "given up (not retryable (TypeError)): Pod "
    )
    assert messages[0].count("Traceback (most recent call last)") == 1
    assert 'raise TypeError("my sink bug")' in messages[0]
    assert "rejected" not in caplog.text
    [summary] = [rec.getMessage() for rec in caplog.records if " shut down: " in rec.getMessage()]
    assert "3 events given up (3 not retryable (TypeError))" in summary


def test_a_failing_callback_is_logged_with_its_traceback_once(caplog):
    def callback(e):
        raise RuntimeError(f"callback bug {e['involvedObject']['name']}")

    with caplog.at_level(logging.ERROR, logger="kubevents"):
        b = kubevents.Broadcaster()
        b.start_event_watcher(callback)
        r = b.new_recorder("c")
        for i in range(3):
            r.eventf(pod(i), "Normal", "R", "m")
        s = b.shutdown(timeout=30)
    assert s["handler_errors"] == 3
    messages = [rec.getMessage() for rec in caplog.records if "callback bug" in rec.getMessage()]
    assert len(messages) == 3
    assert sum("Traceback (most recent call last)" in m for m in messages) == 1


def test_drops_at_a_sink_queue_are_logged(caplog):
    class Sink:
        def __init__(self):
            self.release = threading.Event()

        def create(self, e):
            self.release.wait(30)

        def patch(self, e, p):
            pass

    # A burst loses events at the sink's full queue, or at the incoming queue when the distribution thread
    # is descheduled in the middle of a batch; the latter is a matter of scheduling, so a few tries.
    for _ in range(20):
        caplog.clear()
        sink = Sink()
        with caplog.at_level(logging.WARNING, logger="kubevents"):
            b = kubevents.Broadcaster(queue_length=4, catch_up_wait=0)
            b.start_recording_to_sink(sink)
            r = b.new_recorder("c")
            for i in range(50):
                r.eventf(pod(i), "Normal", "R", "m")
            sink.release.set()
            s = b.shutdown(timeout=30)
        if s["dropped_incoming"] == 0:
            break
    lost = sum(s["dropped_watchers"].values())
    assert s["dropped_incoming"] == 0 and lost > 0, s
    assert "dropping events: a watcher's queue is full" in caplog.text


def test_exit_method_returns_none():
    b = kubevents.Broadcaster()
    assert b.__exit__(None, None, None) is None


class AsyncSink:
    def __init__(self):
        self.events = []

    async def create(self, e):
        await asyncio.sleep(0)
        self.events.append(e)

    async def patch(self, e, p):
        self.events.append(e)


@pytest.mark.parametrize("call", ["shutdown", "wait_idle", "with"])
def test_blocking_calls_on_the_async_sinks_loop_raise_instead_of_hanging(call):
    async def main():
        b = kubevents.Broadcaster()
        sink = AsyncSink()
        b.start_recording_to_sink(sink)
        b.new_recorder("c").eventf(POD, "Normal", "R", "m")
        with pytest.raises(RuntimeError, match=r"aclose\(\)"):
            if call == "with":
                with b:
                    pass
            else:
                getattr(b, call)()
        stats = await b.aclose(timeout=30)
        return stats, sink

    stats, sink = asyncio.run(main())
    assert stats["created"] == 1 and len(sink.events) == 1


def test_async_with_and_aclose_deliver_from_the_loop():
    async def main():
        sink = AsyncSink()
        async with kubevents.Broadcaster() as b:
            b.start_recording_to_sink(sink, workers=2)
            r = b.new_recorder("c")
            for i in range(30):
                r.eventf(pod(i), "Normal", "R", "m")
        return b.stats(), sink

    stats, sink = asyncio.run(main())
    assert stats["created"] == 30 and len(sink.events) == 30


def test_an_async_sink_whose_loop_stopped_does_not_hang_shutdown():
    p = run("""
        import asyncio, kubevents
        class Sink:
            async def create(self, e):
                await asyncio.sleep(3600)
            async def patch(self, e, p):
                pass
        loop = asyncio.new_event_loop()
        b = kubevents.Broadcaster()
        async def start():
            b.start_recording_to_sink(Sink())
            r = b.new_recorder("c")
            for i in range(5):
                r.eventf({"kind": "Pod", "namespace": "ns", "name": f"p{i}", "uid": "u"}, "Normal", "R", "m")
            await asyncio.sleep(0.2)
        loop.run_until_complete(start())
        # The loop is stopped, not closed: the pending call and the queued events cannot complete.
        s = b.shutdown(timeout=30)
        print("abandoned", s["abandoned"], "created", s["created"])
    """)
    assert_clean(p)
    assert "abandoned 5 created 0" in p.stdout
