#!/usr/bin/env python3
"""One burst of ``mixed`` events through a recorder into a no-op Python sink, then ``shutdown()``: a fixed
amount of work for ``valgrind --tool=callgrind``, whose instruction counts do not depend on the machine's load
(wall times on a shared 2-vCPU VM vary by tens of percent). ``--api core-v1`` (default) records with
``Broadcaster``'s ``Recorder.eventf``; ``--api events-v1`` with ``EventsBroadcaster`` on a FakeClock, waiting
for the engine every 500 events so that none is dropped (as ``bench_events_v1.py`` does).

``--workers N`` writes to the sink with N delivery workers (core/v1 only).

Usage: valgrind --tool=callgrind --callgrind-out-file=cg.out python benches/burst_callgrind.py [--n 20000]
[--api events-v1] [--workers 4], then ``callgrind_annotate --inclusive=yes cg.out | grep -E 'write|eventf|run'``.
With ``--separate-threads=yes`` valgrind writes one file per thread (``cg.out-01`` is the recording thread).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import kubevents
from bench_pipeline import calls_of, load_records

ROOT = Path(__file__).resolve().parent.parent


class NoOpSink:
    def create(self, event: dict) -> None:
        return None

    def patch(self, event: dict, patch: bytes) -> None:
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--workloads", type=Path, default=ROOT.parent / "shared" / "workloads.py")
    ap.add_argument("--api", choices=["core-v1", "events-v1"], default="core-v1")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--workload", default="mixed")
    args = ap.parse_args()
    calls = calls_of(load_records(args.workloads, args.workload, args.n))
    if args.api == "events-v1":
        events_v1(calls)
        return
    b = kubevents.Broadcaster(queue_length=100_000)
    b.start_recording_to_sink(NoOpSink(), workers=args.workers)
    rec = b.new_recorder("kubelet", "node-1")
    for ref, type_, reason, message in calls:
        rec.eventf(ref, type_, reason, message)
    s = b.shutdown()
    print(s["created"], s["patched"], s["skipped"], sum(s["dropped_watchers"].values()))


def events_v1(calls: list[tuple]) -> None:
    b = kubevents.EventsBroadcaster(clock=kubevents.FakeClock(1_700_000_000))
    b.start_recording_to_sink(NoOpSink())
    rec = b.new_recorder("kubelet", "node-1")
    for i, (ref, type_, reason, message) in enumerate(calls, 1):
        rec.eventf(ref, None, type_, reason, "Recording", message)
        if i % 500 == 0:
            b.wait_idle()
    s = b.shutdown()
    print(s["first_occurrences"], s["counted"], s["dropped_incoming"] + sum(s["dropped_watchers"].values()))


if __name__ == "__main__":
    main()
