"""Plots of replays and sweeps, with matplotlib (``pip install 'kubevents[lab]'``).

Each function draws on ``ax`` (when None, on a new figure with matplotlib's constrained layout, so that labels,
legends and colorbars fit inside it when it is saved at its default size) and returns the axes. Functions that
replay a trace take ``simulate``'s correlator options as keyword arguments (``burst=``, ``qps=``, ...) and name
them in the title. Option values are written as people write them (qps ``1/300``, not ``0.00333333``) and counts
as integers.
"""

from __future__ import annotations

import math
import os
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

try:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogFormatter
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(f"kubevents.plots needs matplotlib ({e}); install it with: pip install 'kubevents[lab]'") from e

import kubevents
from kubevents._format import option_label, value_label
from kubevents.traces import read_jsonl, to_records

__all__ = ["budget_timeline", "heatmap", "writes_over_time"]

_Trace = str | os.PathLike[str] | Iterable[Mapping[str, Any]] | Any

# Bin widths writes_over_time chooses from, in seconds: round numbers at every scale from 1 ms to a day.
_BINS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800,
         3600, 7200, 10800, 21600, 43200, 86400)


def _records(trace: _Trace) -> list[Mapping[str, Any]]:
    if isinstance(trace, (str, os.PathLike)):
        return list(read_jsonl(trace))
    if hasattr(trace, "__arrow_c_stream__"):
        return list(to_records(trace))
    return list(trace)


def _replay(trace: _Trace, options: dict[str, Any], plot: str) -> tuple[list[Mapping[str, Any]], list[Any], int]:
    """The records, the decision on each and the first record's time; an empty trace is worth a warning."""
    records = _records(trace)
    if not records:
        warnings.warn(f"{plot}: the trace is empty; nothing to draw", stacklevel=3)
        return [], [], 0
    return records, list(kubevents.simulate(records, **options).decisions()), min(r["t_ns"] for r in records)


def _axes(ax: Any, size: tuple[float, float] = (8, 4)) -> Any:
    return plt.subplots(figsize=size, layout="constrained")[1] if ax is None else ax


def _options(options: Mapping[str, Any]) -> str:
    """The correlator options of a replay, for a title."""
    if not options:
        return "client-go's defaults"
    return ", ".join(f"{k}={option_label(v)}" for k, v in options.items())


def _time_unit(span_s: float) -> tuple[float, str]:
    """Seconds per unit, and the unit's name, for a time axis spanning ``span_s`` seconds."""
    if span_s <= 120:
        return 1.0, "seconds"
    if span_s <= 2 * 3600:
        return 60.0, "minutes"
    return 3600.0, "hours"


class _PlainLog(LogFormatter):
    """Log-scale tick labels as plain numbers: 0.4 rather than 4×10^-1 or 4e-01."""

    def _num_to_string(self, x: float, vmin: float, vmax: float) -> str:
        return f"{x:g}"


def _object(r: Mapping[str, Any]) -> str:
    i = r["involved"]
    return f'{i.get("kind", "")} {i.get("namespace", "")}/{i.get("name", "")}'


def writes_over_time(trace: _Trace, *, bin_s: float | None = None, ax: Any = None, log: bool = False,
                     **options: Any) -> Any:
    """API writes per second over time, one write per occurrence (no correlator) against the writes of a replay
    under ``options``, in bins of ``bin_s`` seconds.

    Left out, ``bin_s`` is chosen from the trace's span (about 60 bins of a round width: 0.5 s for a 20-second
    trace, 60 s for an hour); a ``bin_s`` that leaves fewer than two bins draws them with a warning."""
    if bin_s is not None and not bin_s > 0:
        raise ValueError(f"bin_s must be > 0, got {bin_s}")
    records, decisions, t0 = _replay(trace, options, "writes_over_time")
    ax = _axes(ax)
    if not records:
        return ax
    span_s = (max(r["t_ns"] for r in records) - t0) / 1e9
    if bin_s is None:
        bin_s = next((b for b in _BINS if b * 60 >= span_s), _BINS[-1])
    elif span_s < bin_s:
        warnings.warn(f"writes_over_time: the trace spans {span_s:.3g} s, less than two bins of {bin_s:g} s; "
                      "pass a smaller bin_s, or none to have it chosen from the span", stacklevel=2)
    width = int(bin_s * 1e9)
    every: Counter[int] = Counter()
    written: Counter[int] = Counter()
    for r, d in zip(records, decisions, strict=True):
        b = (r["t_ns"] - t0) // width
        every[b] += 1
        if d["action"] != "skip":
            written[b] += 1
    bins = range(max(every) + 1)
    unit_s, unit = _time_unit((len(bins)) * bin_s)
    edges = [b * bin_s / unit_s for b in range(len(bins) + 1)]
    ax.stairs([every[b] / bin_s for b in bins], edges, label="one write per event (no correlator)")
    ax.stairs([written[b] / bin_s for b in bins], edges, label="writes through the correlator")
    ax.set_xlabel(f"{unit} since the first event")
    ax.set_ylabel(f"API writes per second ({bin_s:g} s bins)")
    ax.set_title(f"API writes without and with the correlator ({_options(options)})")
    if log:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(_PlainLog())
        ax.yaxis.set_minor_formatter(_PlainLog(minor_thresholds=(2, 0.5)))
    ax.legend()
    return ax


def heatmap(rows: Sequence[Mapping[str, Any]], x: str, y: str, value: str = "writes", *, ax: Any = None,
            fmt: str | None = None, cmap: str = "viridis", title: str | None = None) -> Any:
    """A metric of a sweep (``value``) over two of its options, one cell per (x, y) pair, each annotated with
    its value (``fmt``, e.g. ``"{:.2f}"``; by default counts as integers and other values to three digits).
    The title says what is compared unless ``title`` is given.

    Every pair must occur once: filter the rows first when the sweep varied other options too."""
    cells: dict[tuple[Any, Any], float] = {}
    for r in rows:
        for k in (x, y, value):
            if k not in r:
                raise ValueError(f"heatmap: a row has no {k!r}")
        key = (r[x], r[y])
        if key in cells:
            raise ValueError(f"heatmap: {x}={key[0]!r}, {y}={key[1]!r} occurs more than once; filter the rows so "
                             f"that only {x} and {y} vary")
        cells[key] = r[value]
    xs = sorted({k[0] for k in cells})
    ys = sorted({k[1] for k in cells})
    grid = [[cells.get((a, b), math.nan) for a in xs] for b in ys]
    ax = _axes(ax)
    image = ax.imshow(grid, origin="lower", aspect="auto", cmap=cmap)
    ax.figure.colorbar(image, ax=ax, label=value)
    ax.set_xticks(range(len(xs)), [option_label(v) for v in xs])
    ax.set_yticks(range(len(ys)), [option_label(v) for v in ys])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(f"{value} for each {x} and {y}" if title is None else title)
    finite = [v for row in grid for v in row if not math.isnan(v)]
    middle = (min(finite) + max(finite)) / 2 if finite else 0
    for j, row in enumerate(grid):
        for i, v in enumerate(row):
            if not math.isnan(v):
                label = value_label(v) if fmt is None else fmt.format(v)
                ax.text(i, j, label, ha="center", va="center", color="white" if v < middle else "black")
    return ax


def budget_timeline(trace: _Trace, *, objects: int = 8, ax: Any = None, **options: Any) -> Any:
    """When each object's spam budget ran out: one lane per object (the ``objects`` with most skipped events,
    the most at the top), a tick per write and a red tick per occurrence the spam filter dropped, in a replay
    under ``options``."""
    if objects < 1:
        raise ValueError(f"objects must be >= 1, got {objects}")
    records, decisions, t0 = _replay(trace, options, "budget_timeline")
    writes: dict[str, list[int]] = {}
    skips: dict[str, list[int]] = {}
    for r, d in zip(records, decisions, strict=True):
        lane = skips if d["action"] == "skip" else writes
        lane.setdefault(_object(r), []).append(r["t_ns"] - t0)
    top = sorted(skips, key=lambda o: (-len(skips[o]), o))[:objects]
    # A lane's height in inches, so that many lanes keep their labels apart.
    ax = _axes(ax, (8, max(3.0, 1.6 + 0.4 * len(top))))
    if not records:
        return ax
    unit_s, unit = _time_unit((max(r["t_ns"] for r in records) - t0) / 1e9)
    for n, name in enumerate(top):
        # Writes on top: they are few, and drops would hide them.
        ax.scatter([t / 1e9 / unit_s for t in writes.get(name, [])], [n] * len(writes.get(name, [])), marker="|",
                   s=80, color="tab:blue", label="written" if n == 0 else None, zorder=3)
        ax.scatter([t / 1e9 / unit_s for t in skips[name]], [n] * len(skips[name]), marker="|", s=80,
                   color="tab:red", label="dropped by the spam filter" if n == 0 else None)
    ax.set_yticks(range(len(top)), top)
    ax.set_ylim(len(top) - 0.5, -0.5)  # the object with most drops at the top
    ax.set_xlabel(f"{unit} since the first event")
    ax.set_ylabel("object (most drops first)")
    ax.set_title(f"Writes and spam filter drops per object\n({_options(options)})", pad=24 if top else None)
    if top:
        # Between the title and the lanes, where it hides nothing.
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, frameon=False)
    else:
        ax.text(0.5, 0.5, "the spam filter dropped nothing", ha="center", va="center", transform=ax.transAxes)
    return ax
