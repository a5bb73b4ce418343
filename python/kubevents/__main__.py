"""``python -m kubevents``: replay an event trace through client-go's correlator and report what reaches
the API server.

Without ``--trace`` (a JSON Lines trace) or ``--kubectl`` (a ``kubectl get events -A -o json`` dump) it replays a
built-in hour of a kubelet during an incident (``kubevents.traces.kubelet_storm``).

``python -m kubevents sweep --trace FILE --grid burst=10,25,50 --grid qps=0.0033,0.01 [--csv out.csv]`` replays
the trace under every combination of the grid instead (``python -m kubevents sweep --help``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

import kubevents
from kubevents._cli import add_trace_options, trace_of


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m kubevents",
        description="Replay an event trace through client-go's EventCorrelator on a virtual clock.",
    )
    add_trace_options(p)
    # Left out, an option keeps the correlator's own default.
    p.add_argument("--burst", type=int, help="spam filter burst per source+object (default 25)")
    p.add_argument("--qps", type=float, help="spam filter refill, tokens/s (default 1/300)")
    p.add_argument("--max-events", type=int, help="distinct messages that trigger aggregation (default 10)")
    p.add_argument("--max-interval", type=int,
                   help="longest gap in seconds between similar events of one group (default 600)")
    p.add_argument("--cache-size", type=int, help="entries in each LRU cache (default 4096)")
    p.add_argument("--correlators", choices=("per-source", "shared"), default="per-source",
                   help="one correlator per event source, as in a cluster (default), or one for the whole trace")
    p.add_argument("--top", type=int, default=5, help="objects with most writes to list (default 5)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    return p


def report(sim: kubevents.Simulation, top: int) -> dict[str, Any]:
    t = sim.totals
    writes = t["creates"] + t["patches"]
    saved = 100.0 * (1 - writes / t["events"]) if t["events"] else 0.0
    return {
        "events": t["events"],
        "creates": t["creates"],
        "patches": t["patches"],
        "skipped_by_spam_filter": t["skips"],
        "aggregated": t["aggregated"],
        "api_writes": writes,
        "api_writes_saved_percent": round(saved, 1),
        "correlators": sim.correlators,
        "components": sim.by_component(),
        "top_objects": sim.top_objects(top),
    }


def _table(r: Mapping[str, Any]) -> str:
    rows = [
        ("events in", r["events"]),
        ("creates", r["creates"]),
        ("patches", r["patches"]),
        ("skipped by the spam filter", r["skipped_by_spam_filter"]),
        ("aggregated", r["aggregated"]),
        ("API writes", r["api_writes"]),
        ("API writes saved", f'{r["api_writes_saved_percent"]:.1f} %'),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v:>10}" for k, v in rows]
    lines += ["", f"API writes by component ({r['correlators']} correlators):"]
    for c in r["components"]:
        lines.append(f'  {c["source_component"]:<32} {c["sources"]:>5} sources {c["events"]:>9} events '
                     f'{c["writes"]:>8} writes')
    if r["top_objects"]:
        lines += ["", "objects with most API writes:"]
        head = f'  {"object":<48} {"events":>7} {"writes":>7} {"creates":>8} {"patches":>8} {"skips":>7}'
        lines.append(head)
        for o in r["top_objects"]:
            name = f'{o["kind"]} {o["namespace"]}/{o["name"]}'
            lines.append(f'  {name:<48} {o["events"]:>7} {o["writes"]:>7} {o["creates"]:>8} {o["patches"]:>8} '
                         f'{o["skips"]:>7}')
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    # Subcommand: python -m kubevents sweep ... (kubevents/_sweep_cli.py).
    if (sys.argv[1:] if argv is None else argv)[:1] == ["sweep"]:
        from kubevents import _sweep_cli

        return _sweep_cli.main((sys.argv[1:] if argv is None else argv)[1:])
    args = _parser().parse_args(argv)
    try:
        trace, source = trace_of(args)
        given: dict[str, Any] = {"burst": args.burst, "qps": args.qps, "max_events": args.max_events,
                                 "max_interval": args.max_interval, "lru_cache_size": args.cache_size}
        options = {k: v for k, v in given.items() if v is not None}
        sim = kubevents.simulate(trace, per_object=True, correlators=args.correlators, **options)
    except (OSError, TypeError, ValueError, ImportError) as e:
        print(f"kubevents: {e}", file=sys.stderr)
        return 2
    r = report(sim, args.top)
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        print(f"trace: {source}")
        print(_table(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
