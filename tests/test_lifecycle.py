"""A broadcaster that is dropped without a shutdown still ends its threads; the exit hook's abort handler."""

import gc
import os
import signal
import time

import pytest
from child import run

import kubevents
from kubevents.sinks import MemorySink


def os_threads():
    """kubevents' own native threads (named kubevents-...), which other tests' leftovers cannot be."""
    names = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                names.append(f.read())
        except FileNotFoundError:  # ended meanwhile
            pass
    return sum(n.startswith("kubevents-") for n in names)


def test_dropping_a_broadcaster_ends_its_threads():
    before = os_threads()
    sink, lines = MemorySink(), []
    b = kubevents.Broadcaster()
    b.start_recording_to_sink(sink)
    b.start_logging(lines.append)
    b.start_event_watcher(lambda e: None)
    r = b.new_recorder("ctl")
    r.event({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"}}, "Normal", "R", "m")
    assert os_threads() > before
    del b, r
    gc.collect()
    # Waiting for a condition, bounded: the threads deliver what was queued and exit.
    for _ in range(1000):
        if os_threads() == before:
            break
        time.sleep(0.01)
    assert os_threads() == before
    assert len(sink) == 1 and len(lines) == 1


@pytest.mark.parametrize("before", ["", "import faulthandler; faulthandler.enable()"], ids=["default", "faulthandler"])
def test_closing_the_gate_twice_leaves_an_abort_elsewhere_to_the_handler_before(before):
    # Closing the gate (the exit hook does) installs a SIGABRT handler for kubevents' own threads. Installed a
    # second time, it would hand the main thread's abort on to itself, forever: the child would hang.
    p = run(f"""
        {before}
        import os
        from kubevents import _native
        _native._close_gate(0)
        _native._close_gate(0)
        os.abort()
    """, timeout=30)
    assert p.returncode == -signal.SIGABRT, (p.returncode, p.stderr)
    # faulthandler's handler, the one before, ran.
    assert ("Fatal Python error: Aborted" in p.stderr) == bool(before), p.stderr
