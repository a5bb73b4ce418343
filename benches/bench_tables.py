#!/usr/bin/env python3
"""Benchmark of replays by trace format, side by side in one run: a JSON Lines file, Python record dicts, an
in-memory Arrow table (pyarrow and polars), and a Parquet file (decoding included), read whole
(`read_parquet`) and streamed (`scan_parquet`, decoded ahead while the replay runs, so on two CPUs); then a
sweep of 64 combinations over the `mixed` table on 2 threads.

Usage: python benches/bench_tables.py [--n 1000000] [--repeat 3] [--workloads storm,identical,mixed,unique]
           [--one-cpu]

Traces come from `kubevents.traces.generate` (the records of the project's generator script), cached under
target/traces/ as JSON Lines and Parquet. `--one-cpu` pins the process to one CPU for the replays (the figures
"on one core"); the streamed Parquet file and the sweep always get two. Build with `pip install .` (release)
first; copy the figures into BENCHMARKS.md with the machine and date.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import time
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

import kubevents
from kubevents import traces

ROOT = Path(__file__).resolve().parent.parent
GRID = {"burst": [5, 10, 25, 50], "qps": [1 / 300, 0.01, 0.1, 1.0], "max_events": [5, 10, 20, 50]}


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def trace_files(workload: str, n: int) -> tuple[Path, Path]:
    d = ROOT / "target" / "traces"
    d.mkdir(parents=True, exist_ok=True)
    jsonl, parquet = d / f"{workload}-{n}.jsonl", d / f"{workload}-{n}.parquet"
    if not jsonl.exists():
        traces.write_jsonl(traces.generate(workload, n, seed=1), jsonl)
    if not parquet.exists():
        traces.to_parquet(jsonl, parquet)
    return jsonl, parquet


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workloads", default="storm,identical,mixed,unique")
    p.add_argument("--one-cpu", action="store_true")
    args = p.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, load average {os.getloadavg()}")
    print(f"{args.n:,} events per trace, best of {args.repeat}; replays on "
          f"{'one CPU' if args.one_cpu else f'{len(cpus)} CPUs'}\n")
    print("| workload | JSON Lines file | record dicts | Arrow table | polars DataFrame | Parquet file "
          "| Parquet file, streamed (2 CPUs) |")
    print("|---|---|---|---|---|---|---|")
    mixed_table = None
    for w in args.workloads.split(","):
        jsonl, parquet = trace_files(w, args.n)
        table = pq.read_table(parquet)
        frame = pl.from_arrow(table)
        records = list(traces.read_jsonl(jsonl))
        if w == "mixed":
            mixed_table = table
        if args.one_cpu:
            os.sched_setaffinity(0, cpus[:1])
        want = kubevents.simulate(table).totals
        assert kubevents.simulate(jsonl).totals == want
        rates = []
        for source in (lambda: str(jsonl), lambda: records, lambda: table, lambda: frame,
                       lambda: traces.read_parquet(parquet)):
            rates.append(args.n / best(lambda s=source: kubevents.simulate(s()), args.repeat) / 1e6)
        os.sched_setaffinity(0, cpus[:2])
        assert kubevents.simulate(traces.scan_parquet(parquet)).totals == want
        rates.append(args.n / best(lambda: kubevents.simulate(traces.scan_parquet(parquet)), args.repeat) / 1e6)
        os.sched_setaffinity(0, cpus)
        del records
        print(f"| {w} | " + " | ".join(f"{r:.2f} M/s" for r in rates) + " |")
    if mixed_table is not None:
        combos = kubevents.lab.combinations(GRID)
        os.sched_setaffinity(0, cpus[:2])
        t = best(lambda: kubevents.sweep(mixed_table, GRID, workers=2, progress=False), 1)
        os.sched_setaffinity(0, cpus)
        print(f"\nsweep of {len(combos)} combinations over the {args.n:,}-event mixed table on 2 threads: {t:.1f} s "
              f"({len(combos) * args.n / t / 1e6:.2f} M replayed events/s)")


if __name__ == "__main__":
    main()
