#!/usr/bin/env python3
"""A fixed number of ``Recorder.eventf`` or ``Correlator.correlate`` calls, or a burst, from Python, for
``valgrind --tool=callgrind``: the set-up (the workload's events) does not depend on ``--calls``, so
the instructions of a run with ``--calls N`` minus those of a run with ``--calls 0``, divided by N, are the cost
of one call (with its share of the Python loop). ``eventf`` records into a broadcaster with no sink or watcher:
count the recording thread only (``--separate-threads=yes``, file ``cg.out-01``). ``burst`` is
``burst_callgrind.py``'s burst (a no-op Python sink, then ``shutdown()``): count every thread.

``record`` is one event's whole cost through ``--api core-v1`` (``Broadcaster``) or ``--api events-v1``
(``EventsBroadcaster``) into a no-op Python sink, driven alike: ``eventf`` on the caller's thread,
``wait_idle()`` every 500 events, then ``shutdown()``, on a FakeClock that stays put, as
``bench_events_v1.py`` drives them. Count every thread. It runs on builds from before ``EventsBroadcaster``
took its sink in ``start_recording_to_sink`` too, so that builds can be compared.

Usage: PYTHONHASHSEED=0 valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file=cg.out \\
python benches/calls_callgrind.py --what correlate --calls 20000, then the ``summary:`` line of ``cg.out-01``
(of every ``cg.out-NN`` for ``burst`` and ``record``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import kubevents
from bench_pipeline import calls_of, load_records
from burst_callgrind import NoOpSink

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--what", choices=["eventf", "correlate", "burst", "record"], required=True)
    ap.add_argument("--api", choices=["core-v1", "events-v1"], default="core-v1", help="for --what record")
    ap.add_argument("--workload", default="mixed")
    ap.add_argument("--calls", type=int, default=20_000)
    ap.add_argument("--events", type=int, default=20_000, help="events prepared (the set-up); at least --calls")
    ap.add_argument("--workloads", type=Path, default=ROOT.parent / "shared" / "workloads.py")
    args = ap.parse_args()
    if args.calls > args.events:
        ap.error("--calls exceeds --events")
    calls = calls_of(load_records(args.workloads, args.workload, args.events))
    if args.what == "record":
        record(args.api, calls[: args.calls])
        return
    if args.what in ("eventf", "burst"):
        b = kubevents.Broadcaster(queue_length=10 * args.events)
        if args.what == "burst":
            b.start_recording_to_sink(NoOpSink())
        eventf = b.new_recorder("kubelet", "node-1").eventf
        for ref, type_, reason, message in calls[: args.calls]:
            eventf(ref, type_, reason, message)
        b.shutdown()
        return
    clock = kubevents.FakeClock(1_700_000_000)
    source = {"component": "kubelet", "host": "node-1"}
    events = [kubevents.make_event(ref, t, r, m, source=source, clock=clock) for ref, t, r, m in calls]
    correlate = kubevents.Correlator(clock=clock).correlate
    for e in events[: args.calls]:
        correlate(e)


def record(api: str, calls: list[tuple]) -> None:
    clock = kubevents.FakeClock(1_700_000_000)
    if api == "core-v1":
        b = kubevents.Broadcaster(clock=clock)
        b.start_recording_to_sink(NoOpSink())
        rec = b.new_recorder("kubelet", "node-1")

        def eventf(ref: dict, type_: str, reason: str, message: str) -> None:
            rec.eventf(ref, type_, reason, message)
    else:
        try:
            b = kubevents.EventsBroadcaster(clock=clock)
            b.start_recording_to_sink(NoOpSink())
        except TypeError:  # a build whose EventsBroadcaster takes the sink
            b = kubevents.EventsBroadcaster(NoOpSink(), clock=clock)
            b.start_recording_to_sink()
        v1 = b.new_recorder("kubelet", "node-1")

        def eventf(ref: dict, type_: str, reason: str, message: str) -> None:
            v1.eventf(ref, None, type_, reason, reason, message)
    for i, (ref, type_, reason, message) in enumerate(calls, 1):
        eventf(ref, type_, reason, message)
        if i % 500 == 0:
            b.wait_idle()
    b.shutdown()


if __name__ == "__main__":
    main()
