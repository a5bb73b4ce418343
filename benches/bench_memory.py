"""Peak memory (RSS) of one replay, for BENCHMARKS.md. Run each measurement in a fresh process:

    python /work/shared/workloads.py unique -n 1000000 -o unique-1m.jsonl
    python benches/bench_memory.py unique-1m.jsonl [--metrics] [--per-object]
    python benches/bench_memory.py --kubectl-count 1000000     # a one-event kubectl dump with that count

Prints one JSON line: the trace, the options, events replayed, wall seconds and the process's peak RSS in MiB.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import kubevents
from kubevents.traces import from_kubectl


def kubectl_dump(count: int) -> dict:
    """One stored BackOff event counted ``count`` times over a day."""
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web-0.1", "namespace": "web"},
             "involvedObject": {"kind": "Pod", "namespace": "web", "name": "web-0", "apiVersion": "v1"},
             "reason": "BackOff", "message": "Back-off restarting failed container", "type": "Warning",
             "source": {"component": "kubelet", "host": "node-1"}, "firstTimestamp": "2024-01-01T00:00:00Z",
             "lastTimestamp": "2024-01-02T00:00:00Z", "count": count}
    return {"apiVersion": "v1", "kind": "List", "items": [event]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", nargs="?", help="a JSON Lines trace")
    p.add_argument("--kubectl-count", type=int, help="replay a one-event kubectl dump with this count instead")
    p.add_argument("--metrics", action="store_true")
    p.add_argument("--per-object", action="store_true")
    args = p.parse_args()
    start = time.perf_counter()
    if args.kubectl_count is not None:
        dump = kubectl_dump(args.kubectl_count)
        trace, name = from_kubectl(dump), f"kubectl dump, count {args.kubectl_count} ({len(json.dumps(dump))} bytes)"
    elif args.trace:
        trace, name = args.trace, args.trace
    else:
        p.error("give a trace or --kubectl-count")
    sim = kubevents.simulate(trace, metrics=args.metrics, per_object=args.per_object)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"trace": name, "metrics": args.metrics, "per_object": args.per_object,
                      "events": sim.totals["events"], "wall_s": round(wall, 2), "peak_rss_mib": round(peak)}))


if __name__ == "__main__":
    main()
