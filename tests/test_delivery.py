"""Delivery under failure and load: retries on the broadcaster's clock, outages, slow sinks, shutdown,
threads, callbacks that raise, and several delivery workers."""

import threading
from datetime import datetime, timezone

import pytest

import kubevents
from kubevents.sinks import ApiError, MemorySink

START = datetime(2024, 1, 1, tzinfo=timezone.utc)
NS = 1_000_000_000


def pod(i):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{i}", "namespace": "prod", "uid": f"u{i}"}}


def dropped(s):
    """Events lost to a full queue: the incoming one (while the distribution thread had it) or a watcher's."""
    return s["dropped_incoming"] + sum(s["dropped_watchers"].values())


def accounted(s):
    """Every event offered ends up in exactly one counter (for one sink watcher)."""
    handled = s["created"] + s["patched"] + s["skipped"] + s["abandoned"]
    return dropped(s) + s["dropped_after_shutdown"] + handled


class HeldSink:
    """Creates wait until ``gate`` is set (or ``timeout`` seconds pass); patches return at once."""

    def __init__(self, timeout=10):
        self.gate = threading.Event()
        self.timeout = timeout

    def create(self, event):
        self.gate.wait(self.timeout)
        return event

    def patch(self, event, patch):
        return event


def test_outage_of_30_minutes_then_recovery():
    clock = kubevents.FakeClock(START)
    start_ns = clock.now_ns()
    recovery = start_ns + 1800 * NS
    attempts = {}

    class Sink:
        def create(self, event):
            attempts.setdefault(event["message"], []).append(clock.now_ns())
            if clock.now_ns() < recovery:
                raise ApiError(503, "ServiceUnavailable")
            return event

        def patch(self, event, patch):
            raise AssertionError("no repeats in this test")

    b = kubevents.Broadcaster(clock=clock, sleep_duration=10, max_tries=12)
    b.start_recording_to_sink(Sink())
    r = b.new_recorder("ctl")
    for second in range(0, 2400, 2):
        if second % 60 == 0 and second < 1800:
            r.event(pod(second // 60), "Warning", "Failed", f"event-{second // 60}")
        assert b.wait_idle(10)
        clock.step(2)
    assert b.wait_idle(10)
    stats = b.shutdown(10)
    assert len(attempts) == 30
    delivered = [m for m, ts in attempts.items() if ts[-1] >= recovery]
    abandoned = [m for m, ts in attempts.items() if ts[-1] < recovery]
    # An event arrives exactly when its retries reached past the outage; the others used all 12 tries.
    assert all(len(attempts[m]) == 12 for m in abandoned)
    assert all(len(attempts[m]) <= 12 for m in delivered)
    assert delivered and abandoned
    assert (stats["created"], stats["abandoned"], stats["pending"]) == (len(delivered), len(abandoned), 0)
    assert stats["retries"] == sum(len(ts) for ts in attempts.values()) - 30
    # Retries followed client-go's timing: the first sleep under 10 s, the later ones 10 s (2 s clock steps).
    for ts in attempts.values():
        gaps = [(b - a) / NS for a, b in zip(ts, ts[1:])]
        assert all(9 <= g <= 12 for g in gaps[1:]), gaps


def test_slow_sink_under_a_burst_never_blocks_and_counts_every_drop():
    release = threading.Event()
    calls = []

    class SlowSink:
        def create(self, event):
            calls.append(event)
            # 100 ms per call during the burst; afterwards the backlog drains at once.
            release.wait(0.1)
            return event

        def patch(self, event, patch):
            calls.append(event)
            release.wait(0.1)
            return event

    b = kubevents.Broadcaster()
    b.start_recording_to_sink(SlowSink())
    r = b.new_recorder("ctl")
    n = 100_000
    for i in range(n):
        r.eventf(pod(i % 500), "Warning", "BackOff", "back-off %d", i % 7)
    during = b.stats()
    release.set()
    stats = b.shutdown(60)
    assert stats["received"] == n
    # Bounded memory: at most the incoming queue, the sink's queue and the batch in hand were held.
    assert during["pending"] <= 1000 + 1000 + 512
    assert dropped(stats) > n // 2
    assert accounted(stats) == n
    assert len(calls) == stats["created"] + stats["patched"]


def test_a_burst_into_fast_python_watchers_is_delivered_whole_at_default_settings():
    # The burst client-go loses most of: 100k events of the mixed workload, made as fast as one thread can,
    # into a sink and a callback that return at once. Both need the GIL the recording thread holds; a
    # recorder call gives it to them when they fall behind, so neither queue overflows.
    from kubevents.traces import generate

    calls = []
    for r in generate("mixed", 100_000):
        i = r["involved"]
        ref = {"kind": i["kind"], "namespace": i["namespace"], "name": i["name"], "uid": i["uid"], "apiVersion": i["api_version"]}
        calls.append((ref, r["type"], r["reason"], r["message"]))

    class NoopSink:
        def create(self, event):
            return event

        def patch(self, event, patch):
            return event

    seen = []
    b = kubevents.Broadcaster()
    b.start_recording_to_sink(NoopSink())
    b.start_event_watcher(lambda e: seen.append(e["reason"]))
    r = b.new_recorder("kubelet")
    for c in calls:
        r.event(*c)
    stats = b.shutdown()
    assert (stats["dropped_incoming"], stats["dropped_watchers"]) == (0, {"sink-1": 0, "watcher-2": 0})
    assert stats["created"] + stats["patched"] + stats["skipped"] == len(calls)
    assert seen == [c[2] for c in calls]


def test_shutdown_delivers_everything_queued_to_a_healthy_sink():
    sink = MemorySink()
    b = kubevents.Broadcaster(queue_length=20_000, burst=1_000_000)
    b.start_recording_to_sink(sink)
    r = b.new_recorder("ctl")
    for i in range(10_000):
        r.event(pod(i), "Normal", "Scheduled", f"assigned to node-{i % 3}")
    stats = b.shutdown()
    assert (stats["received"], stats["created"], stats["pending"], stats["dropped_incoming"]) == (10_000, 10_000, 0, 0)
    assert len(sink) == 10_000


def test_shutdown_timeout_reports_what_is_pending():
    sink = HeldSink(timeout=5)
    b = kubevents.Broadcaster()
    b.start_recording_to_sink(sink)
    r = b.new_recorder("ctl")
    for i in range(3):
        r.event(pod(i), "Normal", "A", "m")
    try:
        b.shutdown(0.05)
        raise AssertionError("expected TimeoutError")
    except TimeoutError as e:
        assert "still pending" in str(e)
    sink.gate.set()
    assert b.wait_idle(10)
    assert b.shutdown(10)["created"] == 3
    # After shutdown, calls are dropped and counted, never raised.
    r.event(pod(9), "Normal", "A", "late")
    assert b.stats()["dropped_after_shutdown"] == 1


class CountingSink:
    """Remembers the last count written per event name."""

    def __init__(self):
        self.counts = {}

    def create(self, event):
        self.counts[event["metadata"]["name"]] = event["count"]
        return event

    def patch(self, event, patch):
        self.counts[event["metadata"]["name"]] = event["count"]
        return event


def test_eight_threads_record_exact_totals():
    sink = CountingSink()
    with kubevents.Broadcaster(queue_length=100_000, burst=1_000_000) as b:
        b.start_recording_to_sink(sink)
        seen = []
        b.start_event_watcher(lambda e: seen.append(e["message"]))
        r = b.new_recorder("ctl")

        def work(t):
            for i in range(10_000):
                r.eventf(pod(t), "Normal", "Tick", "tick %d", i % 5)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    stats = b.stats()
    assert stats["received"] == 80_000 and stats["dropped_incoming"] == 0
    assert len(seen) == 80_000
    # 8 objects x 5 messages: 40 events created, every other call a repeat.
    assert (stats["created"], stats["patched"]) == (40, 80_000 - 40)
    assert sorted(sink.counts.values()) == [2000] * 40


def test_callbacks_and_loggers_that_raise_do_not_stop_the_pipeline(caplog):
    sink = MemorySink()
    got = []

    def flaky(event):
        got.append(event["message"])
        if len(got) % 2:
            raise RuntimeError("callback broke")

    def bad_logger(line):
        raise ValueError("logger broke")

    class BadSink(MemorySink):
        def create(self, event):
            if event["message"] == "m3":
                raise KeyError("sink broke")
            return super().create(event)

    bad = BadSink()
    clock = kubevents.FakeClock(START)
    with kubevents.Broadcaster(clock=clock, sleep_duration=0, max_tries=2) as b:
        b.start_event_watcher(flaky)
        b.start_logging(bad_logger)
        b.start_recording_to_sink(bad)
        b.start_recording_to_sink(sink)
        r = b.new_recorder("ctl")
        for i in range(6):
            r.event(pod(i), "Normal", "R", f"m{i}")
    s = b.stats()
    assert got == [f"m{i}" for i in range(6)]
    assert len(sink) == 6 and len(bad) == 5
    assert (s["handler_errors"], s["abandoned"]) == (3 + 6, 1)
    assert any("callback broke" in r.message for r in caplog.records)
    assert any("logger broke" in r.message for r in caplog.records)


def test_a_full_watcher_queue_drops_and_counts():
    gate = threading.Event()
    called = []

    def blocked(event):
        called.append(event)
        gate.wait(10)

    b = kubevents.Broadcaster(queue_length=5, burst=1_000_000)
    sink = MemorySink()
    b.start_recording_to_sink(sink)
    w = b.start_event_watcher(blocked)
    r = b.new_recorder("ctl")
    for i in range(200):
        r.event(pod(i), "Normal", "R", "m")
    gate.set()
    stats = b.shutdown(10)
    distributed = 200 - stats["dropped_incoming"]
    # The blocked watcher lost what did not fit its queue; the sink's queue is its own.
    assert stats["dropped_watchers"][w.name] == w.dropped
    assert len(called) == distributed - w.dropped
    assert w.dropped >= distributed - 2 * 5
    assert len(sink) == distributed - stats["dropped_watchers"]["sink-1"]


def test_drop_warning_is_rate_limited(caplog):
    sink = HeldSink()
    b = kubevents.Broadcaster(queue_length=1, full_channel="wait")
    b.start_recording_to_sink(sink)
    r = b.new_recorder("ctl")
    for i in range(200):
        r.event(pod(i), "Normal", "R", "m")
    sink.gate.set()
    stats = b.shutdown(10)
    warnings = [rec for rec in caplog.records if "dropping events" in rec.message]
    assert stats["dropped_incoming"] > 100
    assert 1 <= len(warnings) < stats["dropped_incoming"]
    assert stats["dropped_incoming"] + stats["created"] == 200


def test_workers_deliver_the_same_counts_in_order_per_event():
    def run(workers):
        sink = MemorySink()
        clock = kubevents.IntervalClock(START, 0.001)
        with kubevents.Broadcaster(clock=clock, queue_length=50_000, burst=1_000_000) as b:
            b.start_recording_to_sink(sink, workers=workers)
            r = b.new_recorder("ctl")
            for i in range(5000):
                r.eventf(pod(i % 50), "Warning", "BackOff", "back-off %d", i % 3)
        counts = {}
        for op, e in sink.writes:
            counts.setdefault((e["involvedObject"]["name"], e["message"]), []).append(e["count"])
        return b.stats(), counts

    s1, c1 = run(1)
    s8, c8 = run(8)
    assert (s1["created"], s1["patched"]) == (s8["created"], s8["patched"]) == (150, 4850)
    assert {k: sorted(v) for k, v in c1.items()} == {k: sorted(v) for k, v in c8.items()}
    # The writes of one event stayed in order.
    assert all(v == sorted(v) for v in c8.values())


def test_async_sink_runs_on_the_loop_that_started_it():
    import asyncio

    async def main():
        loop = asyncio.get_running_loop()
        seen_loops = []
        store = MemorySink()

        class AsyncSink:
            async def create(self, event):
                seen_loops.append(asyncio.get_running_loop())
                await asyncio.sleep(0)
                return store.create(event)

            async def patch(self, event, patch):
                seen_loops.append(asyncio.get_running_loop())
                return store.patch(event, patch)

        clock = kubevents.IntervalClock(START, 1)
        async with kubevents.Broadcaster(clock=clock) as b:
            b.start_recording_to_sink(AsyncSink(), workers=4)
            r = b.new_recorder("ctl")
            for i in range(200):
                r.event(pod(i % 20), "Normal", "R", "m")
        return loop, seen_loops, store, b.stats()

    loop, seen, store, stats = asyncio.run(main())
    assert len(seen) == 200 and all(s is loop for s in seen)
    assert (stats["created"], stats["patched"], len(store)) == (20, 180, 20)


def test_recorder_calls_on_the_loop_of_an_async_sink_never_wait_for_it():
    import asyncio

    # The sink runs on this loop, which the recording coroutine keeps busy: waiting for the sink would only
    # stall the loop it needs. The queues overflow instead, and every event is accounted for.
    async def main():
        class AsyncSink:
            async def create(self, event):
                return event

            async def patch(self, event, patch):
                return event

        async with kubevents.Broadcaster(queue_length=10) as b:
            b.start_recording_to_sink(AsyncSink())
            r = b.new_recorder("ctl")
            for i in range(1000):
                r.event(pod(i), "Normal", "R", "m")
            during = b.stats()
        return during, b.stats()

    during, stats = asyncio.run(main())
    assert during["recorder_waits"] == 0
    assert dropped(during) > 0
    assert accounted(stats) == 1000


def test_catch_up_wait_must_not_be_negative():
    with pytest.raises(ValueError, match="catch_up_wait"):
        kubevents.Broadcaster(catch_up_wait=-1)


def test_recorder_calls_from_a_watcher_callback_never_wait():
    # A callback that records events itself: waiting would be for the queue its own thread drains. The
    # queues overflow instead, counted.
    b = kubevents.Broadcaster(queue_length=10)
    r = b.new_recorder("ctl")

    def echo(event):
        if event["reason"] == "Original":
            for k in range(100):
                r.event(pod(k), "Normal", "Echo", event["message"])

    w = b.start_event_watcher(echo)
    r.event(pod(0), "Normal", "Original", "m")
    assert b.wait_idle(60)
    stats = b.shutdown()
    assert stats["recorder_waits"] == 0
    assert stats["received"] == 101
    assert w.dropped + stats["dropped_incoming"] > 0


@pytest.mark.parametrize("catch_up_wait", [None, 0])
def test_calls_wait_for_a_sink_that_fell_behind_unless_catch_up_wait_is_zero(catch_up_wait):
    # A sink held on its first write falls behind at once. It counts as fast until it has been silent for
    # 50 ms, so the first calls past half its queue wait for it (up to 5 ms each); with catch_up_wait=0 none
    # does. Once it counts as slow, its queue overflows either way, and every event is accounted for.
    sink = HeldSink()
    options = {} if catch_up_wait is None else {"catch_up_wait": catch_up_wait}
    b = kubevents.Broadcaster(queue_length=200, **options)
    b.start_recording_to_sink(sink)
    r = b.new_recorder("ctl")
    for i in range(1000):
        r.event(pod(i), "Normal", "R", "m")
    during = b.stats()
    sink.gate.set()
    stats = b.shutdown()
    if catch_up_wait == 0:
        assert during["recorder_waits"] == 0
    else:
        assert during["recorder_waits"] > 0
    assert dropped(stats) > 0
    assert accounted(stats) == 1000


def test_async_sink_needs_a_running_loop():
    class AsyncSink:
        async def create(self, event):
            return event

        async def patch(self, event, patch):
            return event

    b = kubevents.Broadcaster()
    try:
        b.start_recording_to_sink(AsyncSink())
        raise AssertionError("expected ValueError")
    except ValueError as e:
        assert "running" in str(e)
    b.shutdown()


def test_eventf_returns_while_the_sink_is_stuck():
    # The caller is never held up by the sink: every call returns while the sink blocks.
    sink = HeldSink()
    b = kubevents.Broadcaster()
    b.start_recording_to_sink(sink)
    r = b.new_recorder("ctl")
    done = threading.Event()

    def produce():
        for i in range(5000):
            r.event(pod(i), "Normal", "R", "m")
        done.set()

    t = threading.Thread(target=produce)
    t.start()
    assert done.wait(30)
    assert not sink.gate.is_set()
    sink.gate.set()
    t.join()
    assert accounted(b.shutdown(30)) == 5000


def test_a_negative_timeout_is_refused_like_every_other_wait():
    b = kubevents.Broadcaster(clock=kubevents.FakeClock(0))
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        b.wait_idle(-1)
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        b.shutdown(timeout=-1)
    b.shutdown()
