"""``python -m kubevents``: replay an event trace through client-go's correlator and report what reaches
the API server.

Without ``--trace`` (a JSON Lines trace) or ``--kubectl`` (a ``kubectl get events -A -o json`` dump) it replays a
built-in hour of a kubelet during an incident (``kubevents.traces.kubelet_storm``).

``python -m kubevents sweep --trace FILE --grid burst=10,25,50 --grid qps=1/300,0.01 [--csv out.csv]`` replays
the trace under every combination of the grid instead (``python -m kubevents sweep --help``).

``python -m kubevents capture --duration 10m FILE.jsonl`` captures a cluster's Events as a trace
(``python -m kubevents capture --help``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

import kubevents
from kubevents._cli import USER_ERRORS, add_trace_options, count, emit, fail, rate, trace_of
from kubevents._native import DEFAULT_BURST, DEFAULT_LRU_CACHE_SIZE, DEFAULT_MAX_EVENTS, DEFAULT_MAX_INTERVAL

_COMMANDS = """\
commands:
  sweep    replay the trace under every combination of a grid of options and
           compare the metrics (python -m kubevents sweep --help), e.g.
           python -m kubevents sweep --grid burst=10,25 --grid qps=1/300,0.01
  capture  watch a cluster's Events for a while and write them as a trace to
           replay (python -m kubevents capture --help), e.g.
           python -m kubevents capture --duration 10m events.jsonl
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m kubevents",
        description="Replay an event trace through client-go's EventCorrelator on a virtual clock.",
        epilog=_COMMANDS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_trace_options(p)
    # Left out, an option keeps the correlator's own default.
    p.add_argument("--burst", type=int, help=f"spam filter burst per source+object (default {DEFAULT_BURST})")
    p.add_argument("--qps", type=rate, metavar="RATE",
                   help="spam filter refill, tokens/s, a number or a fraction (default 1/300)")
    p.add_argument("--max-events", type=int,
                   help=f"distinct messages that trigger aggregation (default {DEFAULT_MAX_EVENTS})")
    p.add_argument("--max-interval", type=int,
                   help=f"longest gap in seconds between similar events of one group (default {DEFAULT_MAX_INTERVAL})")
    p.add_argument("--cache-size", type=int, help=f"entries in each LRU cache (default {DEFAULT_LRU_CACHE_SIZE})")
    p.add_argument("--correlators", choices=("per-source", "shared"), default="per-source",
                   help="one correlator per event source, as in a cluster (default), or one for the whole trace")
    p.add_argument("--top", type=count, default=5, metavar="N", help="objects with most writes to list (default 5)")
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
        # No more objects than events: a huge --top asks for all of them.
        "top_objects": sim.top_objects(min(top, t["events"])),
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
    args_given = sys.argv[1:] if argv is None else argv
    try:
        # Subcommand: python -m kubevents sweep ... (kubevents/_sweep_cli.py).
        if args_given[:1] == ["sweep"]:
            from kubevents import _sweep_cli

            return _sweep_cli.main(args_given[1:])
        # python -m kubevents capture ... (kubevents/_capture_cli.py).
        if args_given[:1] == ["capture"]:
            from kubevents import _capture_cli

            return _capture_cli.main(args_given[1:])
        return _replay(_parser().parse_args(args_given))
    except KeyboardInterrupt:
        print("kubevents: interrupted", file=sys.stderr)
        return 130


def _replay(args: argparse.Namespace) -> int:
    try:
        trace, source = trace_of(args)
        given: dict[str, Any] = {"burst": args.burst, "qps": args.qps, "max_events": args.max_events,
                                 "max_interval": args.max_interval, "lru_cache_size": args.cache_size}
        options = {k: v for k, v in given.items() if v is not None}
        sim = kubevents.simulate(trace, per_object=True, correlators=args.correlators, **options)
        r = report(sim, args.top)
    except USER_ERRORS as e:
        return fail(e)
    return emit(json.dumps(r, indent=2) if args.json else f"trace: {source}\n{_table(r)}")


if __name__ == "__main__":
    sys.exit(main())
