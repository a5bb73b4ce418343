#!/usr/bin/env python3
"""Benchmarks of kubevents.pleg from Python: a whole GenericPLEG.relist() of a large node through the bulk
input, beside the other input forms, and serial vs parallel status inspections.

Usage: python benches/bench_pleg.py [--pods 10000] [--repeat 20]

The node: --pods pods of 1 sandbox + 4 containers; 1 % of the containers flip between running and exited
from one listing to the next, so every relist sends ~400 events and inspects ~400 pods (the runtime's
get_pod_status builds a small dict). Figures go to stdout; copy them into BENCHMARKS.md with the machine
and date.
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import time

from kubevents import FakeClock
from kubevents.pleg import GenericPLEG, PodCache, PodList

CONTAINERS = 4
CHANGE_EVERY = 100


def node_tuples(pods: int, flipped: bool) -> list[tuple]:
    out = []
    for p in range(pods):
        cs = []
        for c in range(CONTAINERS):
            changing = (p * CONTAINERS + c) % CHANGE_EVERY == 0
            cs.append((f"{p * 8 + c + 1:064x}", "exited" if changing and flipped else "running"))
        out.append((f"8f9c2a7e-1d3b-4c5a-9e6f-{p:012}", f"web-{p}", "default", cs, [(f"{p * 8:064x}", "running")]))
    return out


def as_dicts(tuples: list[tuple]) -> list[dict]:
    return [
        {
            "id": uid,
            "name": name,
            "namespace": ns,
            "containers": [{"id": i, "state": s} for i, s in cs],
            "sandboxes": [{"id": i, "state": s} for i, s in ss],
        }
        for uid, name, ns, cs, ss in tuples
    ]


class Runtime:
    """Alternates two listings; ``make`` turns a prepared listing into what get_pods() returns."""

    def __init__(self, listings, make=lambda x: x, inspect_delay: float = 0.0) -> None:
        self.listings = listings
        self.make = make
        self.flip = 0
        self.inspect_delay = inspect_delay

    def get_pods(self):
        self.flip ^= 1
        return self.make(self.listings[self.flip])

    def get_pod_status(self, pod):
        if self.inspect_delay:
            time.sleep(self.inspect_delay)
        return {"id": pod["id"], "ips": ["10.0.0.1"], "container_statuses": []}


def time_relists(runtime, repeat: int, **kw) -> tuple[float, int]:
    pleg = GenericPLEG(runtime, cache=PodCache(), clock=FakeClock(0), channel_capacity=100_000, **kw)
    pleg.relist()
    pleg.watch().drain()
    times = []
    events = 0
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        pleg.relist()
        times.append(time.perf_counter() - t)
        events = len(pleg.watch().drain())
    return statistics.median(times), events


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    print(f"# {platform.python_implementation()} {platform.python_version()} on {platform.machine()}")
    a, b = node_tuples(args.pods, False), node_tuples(args.pods, True)
    print(f"node: {args.pods} pods x (1 sandbox + {CONTAINERS} containers), 1 % of containers change per relist")

    t0 = time.perf_counter()
    lists = [PodList(a), PodList(b)]
    print(f"PodList(tuples) conversion: {(time.perf_counter() - t0) / 2 * 1e3:.2f} ms per listing")

    cases = [
        ("relist, get_pods() returns a prepared PodList (bulk)", Runtime(lists)),
        ("relist, get_pods() builds PodList(tuples)", Runtime([a, b], PodList)),
        ("relist, get_pods() returns a list of tuples", Runtime([a, b])),
        ("relist, get_pods() returns a list of dicts", Runtime([as_dicts(a), as_dicts(b)])),
    ]
    for name, rt in cases:
        median, events = time_relists(rt, args.repeat)
        print(f"{name}: {median * 1e3:.2f} ms median, {events} events per relist")

    # The shape of kubernetes#93886 (360 pods): every pod new, so every pod is inspected in one relist, and
    # each inspection is slow (a sleep, which releases the GIL as a runtime call would).
    few = [
        (f"pod-{p}", f"p{p}", "default", [(f"c{p}-0", "running"), (f"c{p}-1", "running")], [(f"s{p}", "running")])
        for p in range(360)
    ]
    delay = 0.002
    for conc in (1, 8, 32):
        rt = Runtime([[], few], inspect_delay=delay)
        rt.flip = 1  # the first timed relist lists the pods, so every pod is new and inspected
        pleg = GenericPLEG(rt, cache=PodCache(), clock=FakeClock(0), channel_capacity=100_000, inspect_concurrency=conc)
        pleg.relist()  # empty listing
        t = time.perf_counter()
        pleg.relist()
        took = time.perf_counter() - t
        print(
            f"360 new pods, {delay * 1e3:.0f} ms per inspection, inspect_concurrency={conc}: "
            f"{took * 1e3:.0f} ms per relist, {len(pleg.watch().drain())} events"
        )


if __name__ == "__main__":
    main()
