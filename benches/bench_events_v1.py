#!/usr/bin/env python3
"""Benchmarks of events.k8s.io/v1 recording from Python: events/s through ``EventsBroadcaster`` to a sink
that does nothing, beside the core/v1 ``Broadcaster``, and RSS over a million distinct series keys.

Usage: python benches/bench_events_v1.py [--n 100000] [--keys 1000000] [--workloads ../shared/workloads.py]

Each figure is end to end: ``eventf`` on the caller's thread, then the engine thread's work and sink calls,
with ``wait_idle`` every 500 events so that no event is dropped from the 1000-slot queue. Both broadcasters
run on a FakeClock that stays put. Figures go to stdout; copy them into BENCHMARKS.md with machine and date.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import platform
import time
from pathlib import Path

import kubevents

ROOT = Path(__file__).resolve().parent.parent
BATCH = 500


class NullSink:
    def create(self, event):
        return None

    def patch(self, event, patch):
        return None


def load_generator(path: Path):
    spec = importlib.util.spec_from_file_location("workloads", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def calls(gen, workload: str, n: int) -> list[tuple]:
    out = []
    for r in gen.generate(workload, n):
        i = r["involved"]
        ref = {"kind": i["kind"], "namespace": i["namespace"], "name": i["name"], "uid": i["uid"],
               "apiVersion": i["api_version"], "fieldPath": i["field_path"]}
        out.append((ref, r["type"], r["reason"], r["message"], r["source_component"], r["source_host"]))
    return out


def wait_idle(b) -> float:
    """``b.wait_idle()``; returns the seconds it took."""
    t = time.perf_counter()
    b.wait_idle()
    return time.perf_counter() - t


def run_v1(events: list[tuple]) -> tuple[float, float, dict]:
    b = kubevents.EventsBroadcaster(clock=kubevents.FakeClock(1_700_000_000))
    b.start_recording_to_sink(NullSink())
    recorders = {}
    waited = 0.0
    t = time.perf_counter()
    for k, (ref, type_, reason, message, component, host) in enumerate(events):
        rec = recorders.get((component, host))
        if rec is None:
            rec = recorders[(component, host)] = b.new_recorder(component, host)
        rec.eventf(ref, None, type_, reason, reason, message)
        if k % BATCH == BATCH - 1:
            waited += wait_idle(b)
    waited += wait_idle(b)
    elapsed = time.perf_counter() - t
    return elapsed, waited, b.shutdown()


def run_core(events: list[tuple]) -> tuple[float, float, dict]:
    b = kubevents.Broadcaster(clock=kubevents.FakeClock(1_700_000_000))
    b.start_recording_to_sink(NullSink())
    recorders = {}
    waited = 0.0
    t = time.perf_counter()
    for k, (ref, type_, reason, message, component, host) in enumerate(events):
        rec = recorders.get((component, host))
        if rec is None:
            rec = recorders[(component, host)] = b.new_recorder(component, host)
        rec.eventf(ref, type_, reason, message)
        if k % BATCH == BATCH - 1:
            waited += wait_idle(b)
    waited += wait_idle(b)
    elapsed = time.perf_counter() - t
    return elapsed, waited, b.shutdown()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--workloads", type=Path, default=ROOT.parent / "shared" / "workloads.py")
    args = p.parse_args()
    gen = load_generator(args.workloads)
    print(f"# {platform.node()} {platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d')}")

    print(f"\n## events/s to a no-op sink, {args.n:,} events, end to end")
    print("| workload | events.k8s.io/v1 EventsBroadcaster | in wait_idle | writes | core/v1 Broadcaster "
          "| in wait_idle | writes |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for w in ("identical", "mixed"):
        events = calls(gen, w, args.n)
        t1, w1, s1 = run_v1(events)
        t2, w2, s2 = run_core(events)
        v1_writes = s1["writes_ok"] + s1["write_errors"]
        core_writes = s2["created"] + s2["patched"]
        assert s1["dropped_incoming"] == 0 and not any(s1["dropped_watchers"].values()), s1
        print(f"| {w} | {args.n / t1:,.0f} | {w1 * 1000:.0f} ms | {v1_writes:,} | {args.n / t2:,.0f} "
              f"| {w2 * 1000:.0f} ms | {core_writes:,} |")

    print(f"\n## RSS over {args.keys:,} distinct series keys (default cache_size)")
    gc.collect()
    before = rss_mb()
    b = kubevents.EventsBroadcaster(clock=kubevents.FakeClock(1_700_000_000))
    b.start_recording_to_sink(NullSink())
    rec = b.new_recorder("bench", "bench-1")
    ref = {"kind": "Pod", "namespace": "ns", "name": "pod", "uid": "", "apiVersion": "v1"}
    peak = before
    t = time.perf_counter()
    for i in range(args.keys):
        ref["uid"] = str(i)
        rec.eventf(ref, None, "Normal", "Started", "Start", "Started container")
        if i % BATCH == BATCH - 1:
            b.wait_idle()
        if i % 100_000 == 99_999:
            peak = max(peak, rss_mb())
    b.wait_idle()
    elapsed = time.perf_counter() - t
    st = b.stats()
    after = rss_mb()
    b.shutdown()
    print(f"cache_len {st['cache_len']:,}, evicted {st['evicted']:,}, dropped {st['dropped_incoming'] + sum(st['dropped_watchers'].values())}, "
          f"{args.keys / elapsed:,.0f} events/s")
    print(f"RSS before {before:.1f} MB, peak {max(peak, after):.1f} MB, after {after:.1f} MB")


if __name__ == "__main__":
    main()
