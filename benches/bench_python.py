#!/usr/bin/env python3
"""Benchmarks of kubevents' Python surface: `simulate` throughput, `Correlator.correlate` per call beside a
no-op pyo3 method (the floor), and RSS growth of a long replay.

Usage: python benches/bench_python.py [--n 100000] [--rss-events 10000000] [--workloads ../shared/workloads.py]

Traces come from the project's workload generator (default ../shared/workloads.py) and are cached in
target/traces/. Figures go to stdout; copy them into BENCHMARKS.md with the machine and date.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
import statistics
import time
from pathlib import Path

import kubevents

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ["unique", "identical", "similar", "mixed", "storm"]


def load_generator(path: Path):
    spec = importlib.util.spec_from_file_location("workloads", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def trace_file(gen, workload: str, n: int) -> Path:
    path = ROOT / "target" / "traces" / f"{workload}-{n}.jsonl"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as f:
            for rec in gen.generate(workload, n):
                f.write(json.dumps(rec, separators=(",", ":")) + "\n")
    return path


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def per_call_ns(fn, args_list, batch: int = 1000) -> float:
    """Median over batches of the per-call time of fn(*args), in ns."""
    samples = []
    for i in range(0, len(args_list) - batch + 1, batch):
        chunk = args_list[i : i + batch]
        t = time.perf_counter_ns()
        for a in chunk:
            fn(a)
        samples.append((time.perf_counter_ns() - t) / batch)
    return statistics.median(samples)


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--rss-events", type=int, default=10_000_000)
    p.add_argument("--workloads", type=Path, default=ROOT.parent / "shared" / "workloads.py")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    gen = load_generator(args.workloads)
    print(f"# {platform.node()} {platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d')}")

    print("\n## simulate (one core; GIL released during the replay)")
    print("| workload | from JSON Lines file: events/s | from a list of record dicts: events/s |")
    print("|---|---:|---:|")
    for w in WORKLOADS:
        path = trace_file(gen, w, args.n)
        records = list(gen.generate(w, args.n))
        t_file = best_of(lambda: kubevents.simulate(path), args.repeat)
        t_list = best_of(lambda: kubevents.simulate(records), args.repeat)
        print(f"| {w} | {args.n / t_file / 1e6:.2f} M | {args.n / t_list / 1e6:.2f} M |")

    print("\n## Correlator.correlate called from Python (median ns per call, batches of 1000)")
    clock = kubevents.FakeClock(0)
    floor = per_call_ns(lambda _: clock.now_ns(), list(range(100_000)))
    print(f"no-op pyo3 method (FakeClock.now_ns): {floor:.0f} ns")
    print("| workload | correlate ns/call |")
    print("|---|---:|")
    for w in WORKLOADS:
        events = []
        for r in gen.generate(w, min(args.n, 100_000)):
            i = r["involved"]
            ref = {"kind": i["kind"], "namespace": i["namespace"], "name": i["name"], "uid": i["uid"],
                   "apiVersion": i["api_version"], "fieldPath": i["field_path"]}
            clock.set(r["t_ns"] / 1e9)
            events.append(kubevents.make_event(ref, r["type"], r["reason"], r["message"],
                                               source={"component": r["source_component"],
                                                       "host": r["source_host"]}, clock=clock))
        c = kubevents.Correlator(clock=clock)
        print(f"| {w} | {per_call_ns(c.correlate, events):.0f} |")

    print(f"\n## RSS over a replay of {args.rss_events:,} unique events (records streamed from a generator)")
    gc.collect()
    before = rss_mb()
    t = time.perf_counter()
    sim = kubevents.simulate(gen.generate("unique", args.rss_events))
    elapsed = time.perf_counter() - t
    after = rss_mb()
    print(f"totals: {sim.totals}")
    print(f"RSS before {before:.1f} MB, after {after:.1f} MB, growth {after - before:.1f} MB "
          f"({args.rss_events / elapsed / 1e6:.2f} M events/s incl. Python generation)")


if __name__ == "__main__":
    main()
