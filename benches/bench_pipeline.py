#!/usr/bin/env python3
"""Benchmarks of the recording pipeline from Python: the cost of ``Recorder.eventf`` beside a no-op pyo3
method (the floor), end-to-end events/s from ``eventf`` to a no-op Python sink on the ``mixed`` workload,
and delivery workers against a sink that takes 2 ms per call.

Usage: python benches/bench_pipeline.py [--n 100000] [--workloads ../shared/workloads.py]

Build with ``maturin develop --release`` first. Figures go to stdout; copy them into BENCHMARKS.md with the
machine and date.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import statistics
import time
from pathlib import Path

import kubevents

ROOT = Path(__file__).resolve().parent.parent


def load_records(workloads: Path, name: str, n: int) -> list[dict]:
    path = ROOT / "target" / "traces" / f"{name}-{n}.jsonl"
    if not path.exists():
        spec = importlib.util.spec_from_file_location("workloads", workloads)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as f:
            for rec in mod.generate(name, n):
                f.write(json.dumps(rec, separators=(",", ":")) + "\n")
    with open(path) as f:
        return [json.loads(line) for line in f]


def calls_of(records: list[dict]) -> list[tuple]:
    """(object reference, type, reason, message) per record: what a controller would pass to eventf."""
    out = []
    for r in records:
        i = r["involved"]
        ref = {"kind": i["kind"], "namespace": i["namespace"], "name": i["name"], "uid": i["uid"], "apiVersion": i["api_version"]}
        if i["field_path"]:
            ref["fieldPath"] = i["field_path"]
        out.append((ref, r["type"], r["reason"], r["message"]))
    return out


def median_ns(fn, calls: int = 300_000, batch: int = 1000) -> float:
    samples = []
    for _ in range(calls // batch):
        t = time.perf_counter_ns()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter_ns() - t) / batch)
    return statistics.median(samples)


class NoopSink:
    def create(self, event):
        return event

    def patch(self, event, patch):
        return event


class SleepySink:
    """Takes 2 ms per call, as a round trip to an API server would (the GIL is released while it waits)."""

    def create(self, event):
        time.sleep(0.002)
        return event

    def patch(self, event, patch):
        time.sleep(0.002)
        return event


def bench_eventf() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "prod", "uid": "u1"}}
    clock = kubevents.FakeClock(1_700_000_000)
    floor = median_ns(clock.now_ns)
    # A queue that never fills and no watcher: the cost of the call itself.
    b = kubevents.Broadcaster(queue_length=10_000_000)
    r = b.new_recorder("bench")
    ev = r.eventf
    loop = median_ns(lambda: None)
    cost = median_ns(lambda: ev(pod, "Warning", "BackOff", "Back-off restarting failed container"))
    with_args = median_ns(lambda: ev(pod, "Warning", "BackOff", "Back-off restarting %s", "app"))
    b.shutdown()
    print(f"no-op pyo3 method (FakeClock.now_ns): {floor:.0f} ns median")
    print(f"empty lambda call (the loop's own cost, included below): {loop:.0f} ns median")
    print(f"Recorder.eventf, manifest dict, no args: {cost:.0f} ns median")
    print(f"Recorder.eventf, manifest dict, one %s arg: {with_args:.0f} ns median")


def burst(calls: list[tuple], **options) -> dict:
    b = kubevents.Broadcaster(**options)
    b.start_recording_to_sink(NoopSink())
    r = b.new_recorder("bench")
    event = r.event
    gc.collect()
    cpu0, thread0 = time.process_time(), time.thread_time()
    t0 = time.perf_counter()
    for c in calls:
        event(*c)
    t1 = time.perf_counter()
    thread1 = time.thread_time()
    stats = b.shutdown()
    t2 = time.perf_counter()
    cpu = time.process_time() - cpu0
    handled = stats["created"] + stats["patched"] + stats["skipped"]
    per_event_us = 1e6 / len(calls)
    return {
        "produce_per_s": len(calls) / (t1 - t0),
        "e2e_per_s": len(calls) / (t2 - t0),
        "handled": handled,
        # CPU time per event: the recording thread, and the rest of the process (the broadcaster's threads).
        "cpu_recording_us": (thread1 - thread0) * per_event_us,
        "cpu_others_us": (cpu - (thread1 - thread0)) * per_event_us,
        **stats,
    }


def bench_e2e(calls: list[tuple]) -> None:
    n = len(calls)
    for label, options in [("defaults (queue_length=1000)", {}), ("queue_length=n", {"queue_length": n})]:
        runs = [burst(calls, **options) for _ in range(3)]
        best = max(runs, key=lambda s: s["e2e_per_s"])
        print(
            f"mixed x{n}, {label}: eventf {best['produce_per_s']:,.0f}/s, end to end {best['e2e_per_s']:,.0f}/s; "
            f"handled {best['handled']:,} (created {best['created']:,}, patched {best['patched']:,}, "
            f"skipped {best['skipped']:,}), dropped incoming {best['dropped_incoming']:,}, "
            f"dropped at the sink queue {sum(best['dropped_watchers'].values()):,}; "
            f"recorder calls that waited {best['recorder_waits']:,}; CPU per event: recording thread "
            f"{best['cpu_recording_us']:.2f} us, broadcaster threads {best['cpu_others_us']:.2f} us; "
            f"dropped in the other bursts {[sum(r['dropped_watchers'].values()) + r['dropped_incoming'] for r in runs]}"
        )


def bench_workers(calls: list[tuple], n: int = 1000) -> None:
    results = {}
    for workers in (1, 8):
        b = kubevents.Broadcaster(queue_length=100_000)
        b.start_recording_to_sink(SleepySink(), workers=workers)
        r = b.new_recorder("bench")
        t0 = time.perf_counter()
        for c in calls[:n]:
            r.event(*c)
        stats = b.shutdown()
        dt = time.perf_counter() - t0
        writes = stats["created"] + stats["patched"]
        results[workers] = writes / dt
        print(f"sink of 2 ms per call, workers={workers}: {writes} writes in {dt:.2f} s = {writes / dt:,.0f} writes/s "
              f"(created {stats['created']}, patched {stats['patched']}, skipped {stats['skipped']})")
    print(f"workers=8 / workers=1: {results[8] / results[1]:.2f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--workloads", type=Path, default=ROOT.parent / "shared" / "workloads.py")
    args = p.parse_args()
    calls = calls_of(load_records(args.workloads, "mixed", args.n))
    # The trace is data of the benchmark, not of the pipeline: keep the collector off it.
    gc.collect()
    gc.freeze()
    bench_eventf()
    bench_e2e(calls)
    bench_workers(calls)


if __name__ == "__main__":
    main()
