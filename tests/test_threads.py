"""The Correlator shared between threads, and user code that calls back into it."""

import threading

import pytest

import kubevents

POD = {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u", "apiVersion": "v1"}


def event(clock, message="m"):
    return kubevents.make_event(POD, "Normal", "Started", message, source="test", clock=clock)


def test_threads_share_one_correlator_without_losing_counts():
    clock = kubevents.FakeClock(1_700_000_000)
    c = kubevents.Correlator(clock=clock, burst=100_000)
    first = c.correlate(event(clock))
    c.update_state(first.event)
    counts = []

    def work():
        mine = []
        for _ in range(500):
            r = c.correlate(event(clock))
            mine.append(r.event["count"])
        counts.append(mine)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seen = sorted(n for mine in counts for n in mine)
    # Every occurrence got its own count: 2..4001, each exactly once.
    assert seen == list(range(2, 8 * 500 + 2))
    for mine in counts:
        assert mine == sorted(mine)


def test_key_function_calling_back_into_the_correlator_raises_instead_of_hanging():
    clock = kubevents.FakeClock(1_700_000_000)
    holder = {}

    def key_func(ev):
        holder["c"].correlate(ev)
        return ("a", "b")

    holder["c"] = kubevents.Correlator(clock=clock, key_func=key_func)
    with pytest.raises(RuntimeError, match="called again from its own key function or clock"):
        holder["c"].correlate(event(clock))
    # The correlator is still usable afterwards.
    holder["c"] = kubevents.Correlator(clock=clock)
    assert holder["c"].correlate(event(clock)).event["count"] == 1


def test_clock_calling_back_into_the_correlator_raises():
    class Clock:
        def now(self):
            c.update_state(event(kubevents.FakeClock(0)))
            return 1_700_000_000

    c = kubevents.Correlator(clock=Clock())
    with pytest.raises(RuntimeError, match="called again"):
        c.correlate(event(kubevents.FakeClock(0)))
