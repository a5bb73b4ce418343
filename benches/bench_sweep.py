#!/usr/bin/env python3
"""Benchmark of the tuning lab: `kubevents.sweep` of 64 combinations over the 100k-event `mixed` trace on 1 and
2 native threads, and what collecting the metrics costs a single replay.

Usage: python benches/bench_sweep.py [--n 100000] [--repeat 3]

The trace comes from `kubevents.traces.generate` (the same records as the project's generator script) and is
cached in target/traces/. Build with `maturin develop --release` first. Figures go to stdout; copy them into
BENCHMARKS.md with the machine and date.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import time
from pathlib import Path

import kubevents
from kubevents._native import replay_grid
from kubevents.traces import generate, write_jsonl

ROOT = Path(__file__).resolve().parent.parent
GRID = {"burst": [5, 10, 25, 50], "qps": [1 / 300, 0.01, 0.1, 1.0], "max_events": [5, 10, 20, 50]}


def best_of(fn, repeat: int) -> float:
    return timed(fn, repeat)[0]


def timed(fn, repeat: int) -> tuple[float, float]:
    """The best wall time of `repeat` runs, and the CPU time (all threads) of that run."""
    best = (float("inf"), 0.0)
    for _ in range(repeat):
        gc.collect()
        t, cpu = time.perf_counter(), time.process_time()
        fn()
        best = min(best, (time.perf_counter() - t, time.process_time() - cpu))
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()

    path = ROOT / "target" / "traces" / f"mixed-{args.n}.jsonl"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(generate("mixed", args.n, seed=1), path)
    combos = kubevents.lab.combinations(GRID)
    replays = len(combos) * args.n
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, load average {os.getloadavg()}")
    print(f"trace: {path.name}; grid: {len(combos)} combinations; {replays:,} replayed events per sweep")

    load = best_of(lambda: replay_grid(str(path), [], workers=1), args.repeat)
    print(f"reading and parsing the trace alone: {load:.3f} s")
    base = None
    for workers in (1, 2):
        wall, cpu = timed(lambda: kubevents.sweep(str(path), GRID, workers=workers, progress=False), args.repeat)
        rate = replays / wall
        base = base or wall
        # Events per CPU-second is the per-core rate even when other processes take part of a core.
        print(f"workers={workers}: {wall:.2f} s wall, {cpu:.2f} s CPU, {rate / 1e6:.2f} M events/s, "
              f"{replays / cpu / 1e6:.2f} M events per CPU-second, speed-up {base / wall:.2f}x")

    plain = best_of(lambda: kubevents.simulate(str(path)), args.repeat)
    metered = best_of(lambda: kubevents.simulate(str(path), metrics=True), args.repeat)
    print(f"simulate from the file: {plain * 1e9 / args.n:.0f} ns/event without metrics, "
          f"{metered * 1e9 / args.n:.0f} ns/event with metrics=True")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
