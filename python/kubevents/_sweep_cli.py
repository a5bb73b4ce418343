"""``python -m kubevents sweep``: replay one trace under a grid of correlator options and print a table of the
metrics of each combination (and write them to CSV)."""

from __future__ import annotations

import argparse
import csv
import os

import kubevents
from kubevents._cli import USER_ERRORS, add_trace_options, emit, fail, parse_rate, trace_of
from kubevents._format import option_label
from kubevents.lab import DEFAULT_WINDOW, GRID_OPTIONS, METRICS

# The columns of the printed table; --csv writes every metric asked for.
TABLE = ("writes", "write_reduction", "spam_skipped", "aggregated", "message_share", "reason_share", "unreported",
         "mean_delay_s", "peak_write_rate")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m kubevents sweep",
        description="Replay a trace under every combination of correlator options and compare the metrics.",
    )
    add_trace_options(p)
    p.add_argument("--grid", metavar="OPTION=V1,V2,...", action="append", default=[], required=True,
                   help=f"values of one option ({', '.join(GRID_OPTIONS)}); repeat for more options. "
                        "qps takes fractions too: qps=1/300,0.01")
    p.add_argument("--metrics", metavar="M1,M2,...", help="metrics to keep (default: all; see kubevents.lab)")
    p.add_argument("--csv", metavar="FILE", help="also write the rows to a CSV file")
    p.add_argument("--workers", type=int, help="native threads (default: one per core)")
    p.add_argument("--correlators", choices=("per-source", "shared"), default="per-source",
                   help="one correlator per event source (default) or one for the whole trace")
    p.add_argument("--window", type=float, default=DEFAULT_WINDOW,
                   help=f"window of the peak write rates, seconds (default {DEFAULT_WINDOW:g})")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _number(option: str, text: str) -> float:
    try:
        if option == "qps":
            return parse_rate(text)
        return int(text)
    except ValueError as e:
        reason = str(e) if option == "qps" else f"{text!r} is not an int"
        raise ValueError(f"--grid {option}: {reason}") from None


def parse_grid(specs: list[str]) -> dict[str, list[float]]:
    """``["burst=10,25", "qps=1/300,0.01"]`` as a grid dict."""
    grid: dict[str, list[float]] = {}
    for spec in specs:
        option, sep, values = spec.partition("=")
        option = option.strip().replace("-", "_")
        if not sep or not values.strip():
            raise ValueError(f"--grid {spec!r}: expected OPTION=V1,V2,...")
        if option not in GRID_OPTIONS:
            raise ValueError(f"--grid {spec!r}: unknown option {option!r}; choose from {', '.join(GRID_OPTIONS)}")
        if option in grid:
            raise ValueError(f"--grid {option} is given twice")
        grid[option] = [_number(option, v.strip()) for v in values.split(",")]
    return grid


def _cell(v: object) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _check_writable(path: str) -> None:
    """Raises ``OSError`` now if ``path`` cannot be written, rather than after the sweep; leaves no new file."""
    existed = os.path.lexists(path)
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as e:
        raise OSError(f"--csv {path}: {e.strerror or e}") from None
    if not existed:
        os.remove(path)


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        grid = parse_grid(args.grid)
        metrics = [m.strip() for m in args.metrics.split(",")] if args.metrics else list(METRICS)
        if args.csv:
            _check_writable(args.csv)
        trace, _ = trace_of(args)
        rows = kubevents.sweep(trace, grid, metrics=metrics, workers=args.workers, window=args.window,
                               progress=not args.no_progress, correlators=args.correlators)
        if args.csv:
            # Before the table: a reader of stdout that stops early (| head) must not cost the file.
            with open(args.csv, "w", newline="", encoding="utf-8") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else list(grid) + metrics)
                w.writeheader()
                w.writerows(rows)
    except USER_ERRORS as e:
        return fail(e)
    columns = list(grid) + [m for m in (TABLE if not args.metrics else metrics) if m in metrics]
    # Options as people write them (qps 1/300, not 0.003333), metrics to four digits.
    table = [[option_label(r[c]) if c in grid else _cell(r[c]) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in table)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) for row in table]
    return emit("\n".join(lines))
