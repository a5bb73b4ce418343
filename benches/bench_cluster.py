#!/usr/bin/env python3
"""Benchmark of a cluster's replay, one correlator per source: `kubevents.traces.cluster_storm(nodes)` (the
built-in storm on every node, the scheduler and controllers), replayed from an Arrow table on 1 and on 2
threads, and from Parquet partitioned by source on a process pool; then one shared correlator against one per
source, and each node replayed alone against the per-source replay.

Usage: python benches/bench_cluster.py [--nodes 200] [--repeat 3] [--threads-only] [--check-alone]

With `--dataset DIR` (and `--minutes`, e.g. `--nodes 1000 --minutes 1440` for a day), the trace is written
into DIR by `kubevents.traces.write_cluster_storm` on a process pool of `--processes` (timed, unless DIR holds
it already) and replayed from there on process pools of 1 and 2 workers (`--metrics`: also with metrics);
the table of the whole trace is never made.

The trace is cached under target/traces/ as Parquet (one file, and partitioned by source). Each measurement
runs in a child process of its own, so that its peak RSS (`ru_maxrss`) is its own; the table is read before
the clock starts. On a shared machine, each row also gives the share of the machine's CPU that other
processes used during its best run (from /proc/stat, less the child's own CPU time). Build with `pip install .` (release) first; copy the figures into BENCHMARKS.md with the
machine, the load and the date.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Peak RSS: ru_maxrss of the child itself (the driver), and RUSAGE_CHILDREN's, the largest of its pool's workers.
PRELUDE = r"""
import json, multiprocessing, os, resource, sys, time
from concurrent.futures import ProcessPoolExecutor
import pyarrow.parquet as pq
import kubevents

def busy():
    # Seconds of CPU the whole machine spent busy (all processes), and this process's own (children too).
    with open("/proc/stat") as f:
        user, nice, system, idle, iowait, irq, softirq, steal = map(int, f.readline().split()[1:9])
    own = sum(getattr(resource.getrusage(w), a) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
              for a in ("ru_utime", "ru_stime"))
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK"), own

def others(b0, o0, t):
    b1, o1 = busy()
    return max(0.0, (b1 - b0) - (o1 - o0)) / (t * os.cpu_count())

def pool(n):
    return ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn"))

def rss():
    return {"rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "worker_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}
"""

CHILD = PRELUDE + r"""
path, mode, threads, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
metrics = sys.argv[5:] == ["metrics"]
trace = pq.read_table(path) if mode not in ("partitioned", "here") else path
best, sim = None, None
for _ in range(repeat):
    (b0, o0), t = busy(), time.perf_counter()
    if mode == "partitioned":
        with pool(threads) as ex:
            sim = kubevents.simulate(trace, executor=ex, metrics=metrics)
    elif mode == "here":
        sim = kubevents.simulate(path, threads=threads, metrics=metrics)
    else:
        sim = kubevents.simulate(trace, threads=threads, correlators=mode, metrics=metrics)
    t = time.perf_counter() - t
    if best is None or t < best[0]:
        best = (t, others(b0, o0, t))
print(json.dumps({"seconds": best[0], "others": best[1], "totals": sim.totals, "components": sim.by_component(),
                  "metrics": sim.metrics if metrics else None, **rss()}))
"""

GENERATE = PRELUDE + r"""
from kubevents import traces

root, nodes, minutes, processes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
(b0, o0), t = busy(), time.perf_counter()
with pool(processes) as ex:
    events = traces.write_cluster_storm(root, nodes, minutes=minutes, executor=ex)
t = time.perf_counter() - t
print(json.dumps({"seconds": t, "others": others(b0, o0, t), "events": events, **rss()}))
"""


def trace_files(nodes: int) -> tuple[Path, Path]:
    from kubevents import traces

    d = ROOT / "target" / "traces"
    d.mkdir(parents=True, exist_ok=True)
    one, parts = d / f"cluster-{nodes}.parquet", d / f"cluster-{nodes}-by-source"
    if not one.exists():
        table = traces.cluster_storm(nodes=nodes)
        traces.to_parquet(table, one)
    if not parts.exists():
        traces.partition_by_source(one, parts)
    return one, parts


def run(code: str, *argv: object) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *map(str, argv)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def child(path: Path, mode: str, threads: int, repeat: int, *extra: str) -> dict:
    return run(CHILD, path, mode, threads, repeat, *extra)


def about_machine() -> str:
    return (f"python {platform.python_version()}, {os.cpu_count()} CPUs ({platform.processor() or platform.machine()})"
            f", load average {os.getloadavg()}")


def dataset(args: argparse.Namespace) -> None:
    """The streamed trace: written by write_cluster_storm, replayed from its files on process pools."""
    root = Path(args.dataset)
    print(about_machine())
    if not (root.exists() and any(root.rglob("*.parquet"))):
        g = run(GENERATE, root, args.nodes, args.minutes, args.processes)
        size = sum(f.stat().st_size for f in root.rglob("*.parquet"))
        print(f"write_cluster_storm(nodes={args.nodes}, minutes={args.minutes}), process pool of {args.processes}: "
              f"{g['events']:,} events in {g['seconds']:.1f} s ({g['events'] / g['seconds'] / 1e6:.2f} M/s), "
              f"{size / 1e9:.2f} GB on disk; peak RSS {g['rss_mb']:.0f} MB (a worker's {g['worker_rss_mb']:.0f} MB); "
              f"other processes' CPU share {100 * g['others']:.0f} %; load average after {os.getloadavg()}\n")
    print("| replay of the dataset | workers or threads | metrics | seconds | events/s | peak RSS (a worker's) "
          "| other processes' CPU share |")
    print("|---|---:|---|---:|---:|---:|---:|")
    results = {}
    for metrics in (False, True) if args.metrics else (False,):
        for mode, n in (("partitioned", 1), ("partitioned", 2), ("here", 1), ("here", 2)):
            r = child(root, mode, n, args.repeat, *(["metrics"] if metrics else []))
            results[(metrics, mode, n)] = r
            events = r["totals"]["events"]
            label = "process pool (spawned)" if mode == "partitioned" else "this process, threads"
            rss = f"{r['rss_mb']:.0f} MB" + (f" ({r['worker_rss_mb']:.0f} MB)" if mode == "partitioned" else "")
            print(f"| {label} | {n} | {'yes' if metrics else 'no'} | {r['seconds']:.1f} "
                  f"| {events / r['seconds'] / 1e6:.2f} M/s | {rss} | {100 * r['others']:.0f} % |")
        first = results[(metrics, "partitioned", 1)]
        for mode in ("partitioned", "here"):
            one, two = results[(metrics, mode, 1)], results[(metrics, mode, 2)]
            assert one["totals"] == two["totals"] == first["totals"] and one["metrics"] == two["metrics"]
            print(f"\n{mode}, {'with' if metrics else 'without'} metrics, 2 against 1: "
                  f"{one['seconds'] / two['seconds']:.2f}x")
        print(f"totals (all equal): {first['totals']}")
        if metrics:
            print(f"metrics: {first['metrics']}")
    print(f"load average after: {os.getloadavg()}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=200)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads-only", action="store_true", help="only the per-source replays on 1 and 2 threads")
    p.add_argument("--check-alone", action="store_true",
                   help="also replay each kubelet's records alone and compare with the per-source replay")
    p.add_argument("--dataset", metavar="DIR", help="write the trace with write_cluster_storm into DIR (unless it "
                   "holds it already) and replay it from there on process pools of 1 and 2 workers")
    p.add_argument("--minutes", type=int, default=60, help="with --dataset: the trace's length")
    p.add_argument("--processes", type=int, default=2, help="with --dataset: the writing process pool's size")
    p.add_argument("--metrics", action="store_true", help="with --dataset: also replay with metrics=True")
    args = p.parse_args()
    if args.dataset:
        dataset(args)
        return
    one, parts = trace_files(args.nodes)
    import pyarrow.parquet as pq

    events = pq.ParquetFile(one).metadata.num_rows
    print(about_machine())
    print(f"cluster_storm(nodes={args.nodes}): {events:,} events; best of {args.repeat}\n")
    print("| replay | threads | seconds | events/s | peak RSS (a worker's) | other processes' CPU share |")
    print("|---|---:|---:|---:|---:|---:|")
    results = {}
    runs = (("per-source", 1), ("per-source", 2), ("shared", 1), ("partitioned", 2))
    for mode, threads in runs[:2] if args.threads_only else runs:
        r = child(parts if mode == "partitioned" else one, mode, threads, args.repeat)
        results[(mode, threads)] = r
        label = {"per-source": "per source, Arrow table", "shared": "one shared correlator, Arrow table",
                 "partitioned": "per source, partitioned Parquet, process pool of 2"}[mode]
        rss = f"{r['rss_mb']:.0f} MB" + (f" ({r['worker_rss_mb']:.0f} MB)" if mode == "partitioned" else "")
        print(f"| {label} | {threads} | {r['seconds']:.2f} | {events / r['seconds'] / 1e6:.2f} M/s "
              f"| {rss} | {100 * r['others']:.0f} % |")
    one_thread, two = results[("per-source", 1)], results[("per-source", 2)]
    assert two["totals"] == one_thread["totals"]
    print(f"\nspeed-up on 2 threads: {one_thread['seconds'] / two['seconds']:.2f}x "
          f"(load average after: {os.getloadavg()})")
    if args.threads_only:
        return
    assert results[("partitioned", 2)]["totals"] == one_thread["totals"]
    for mode in ("shared", "per-source"):
        t = results[(mode, 1)]["totals"]
        print(f"{mode}: {t['creates'] + t['patches']:,} writes ({t['creates']:,} creates, {t['patches']:,} patches)")
    print("\nper component (per source):")
    for c in one_thread["components"]:
        print(f"  {c['source_component']:<24} {c['sources']:>4} sources {c['events']:>10,} events "
              f"{c['writes']:>8,} writes")
    if args.check_alone:
        import pyarrow.compute as pc

        import kubevents

        table = pq.read_table(one)
        sim = kubevents.simulate(table)
        want = {(r["source_component"], r["source_host"]): r for r in sim.by_source()}
        t = time.perf_counter()
        for (component, host), row in want.items():
            mask = pc.and_(pc.equal(table["source_component"], component), pc.equal(table["source_host"], host))
            alone = kubevents.simulate(table.filter(mask), correlators="shared").totals
            assert {k: row[k] for k in alone} == alone, (component, host)
        print(f"\neach of the {len(want)} sources replayed alone equals its per-source replay "
              f"({time.perf_counter() - t:.1f} s)")
    print(f"benchmark process peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
