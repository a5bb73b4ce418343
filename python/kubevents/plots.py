"""Plots of replays and sweeps, with matplotlib (``pip install 'kubevents[lab]'``).

Each function draws on ``ax`` (a new figure's axes when None) and returns the axes. Functions that replay a
trace take ``simulate``'s correlator options as keyword arguments (``burst=``, ``qps=``, ...).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

try:
    import matplotlib.pyplot as plt
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(f"kubevents.plots needs matplotlib ({e}); install it with: pip install 'kubevents[lab]'") from e

import kubevents
from kubevents.traces import read_jsonl, to_records

__all__ = ["budget_timeline", "heatmap", "writes_over_time"]

_Trace = str | os.PathLike[str] | Iterable[Mapping[str, Any]] | Any


def _records(trace: _Trace) -> list[Mapping[str, Any]]:
    if isinstance(trace, (str, os.PathLike)):
        return list(read_jsonl(trace))
    if hasattr(trace, "__arrow_c_stream__"):
        return list(to_records(trace))
    return list(trace)


def _replay(trace: _Trace, options: dict[str, Any]) -> tuple[list[Mapping[str, Any]], list[Any], int]:
    """The records, the decision on each and the first record's time."""
    records = _records(trace)
    if not records:
        return [], [], 0
    return records, list(kubevents.simulate(records, **options).decisions()), min(r["t_ns"] for r in records)


def _axes(ax: Any) -> Any:
    return plt.subplots(figsize=(8, 4))[1] if ax is None else ax


def _object(r: Mapping[str, Any]) -> str:
    i = r["involved"]
    return f'{i.get("kind", "")} {i.get("namespace", "")}/{i.get("name", "")}'


def writes_over_time(trace: _Trace, *, bin_s: float = 60.0, ax: Any = None, log: bool = False, **options: Any) -> Any:
    """API writes per second over time, one write per occurrence (no correlator) against the writes of a replay
    under ``options``, in bins of ``bin_s`` seconds."""
    if not bin_s > 0:
        raise ValueError(f"bin_s must be > 0, got {bin_s}")
    records, decisions, t0 = _replay(trace, options)
    ax = _axes(ax)
    if not records:
        return ax
    width = int(bin_s * 1e9)
    every: Counter[int] = Counter()
    written: Counter[int] = Counter()
    for r, d in zip(records, decisions, strict=True):
        b = (r["t_ns"] - t0) // width
        every[b] += 1
        if d["action"] != "skip":
            written[b] += 1
    bins = range(max(every) + 1)
    x = [b * bin_s / 60 for b in bins]
    ax.step(x, [every[b] / bin_s for b in bins], where="post", label="one write per event (no correlator)")
    ax.step(x, [written[b] / bin_s for b in bins], where="post", label="writes through the correlator")
    ax.set_xlabel("minutes since the first event")
    ax.set_ylabel(f"API writes per second ({bin_s:g} s bins)")
    if log:
        ax.set_yscale("log")
    ax.legend()
    return ax


def heatmap(rows: Sequence[Mapping[str, Any]], x: str, y: str, value: str = "writes", *, ax: Any = None,
            fmt: str = "{:.3g}", cmap: str = "viridis") -> Any:
    """A metric of a sweep (``value``) over two of its options, one cell per (x, y) pair, each annotated.

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
    ax.set_xticks(range(len(xs)), [f"{v:g}" if isinstance(v, float) else str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [f"{v:g}" if isinstance(v, float) else str(v) for v in ys])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    finite = [v for row in grid for v in row if not math.isnan(v)]
    middle = (min(finite) + max(finite)) / 2 if finite else 0
    for j, row in enumerate(grid):
        for i, v in enumerate(row):
            if not math.isnan(v):
                ax.text(i, j, fmt.format(v), ha="center", va="center", color="white" if v < middle else "black")
    return ax


def budget_timeline(trace: _Trace, *, objects: int = 8, ax: Any = None, **options: Any) -> Any:
    """When each object's spam budget ran out: one lane per object (the ``objects`` with most skipped events),
    a tick per write and a red tick per occurrence the spam filter dropped, in a replay under ``options``."""
    if objects < 1:
        raise ValueError(f"objects must be >= 1, got {objects}")
    records, decisions, t0 = _replay(trace, options)
    ax = _axes(ax)
    if not records:
        return ax
    writes: dict[str, list[float]] = {}
    skips: dict[str, list[float]] = {}
    for r, d in zip(records, decisions, strict=True):
        lane = skips if d["action"] == "skip" else writes
        lane.setdefault(_object(r), []).append((r["t_ns"] - t0) / 60e9)
    top = sorted(skips, key=lambda o: (-len(skips[o]), o))[:objects]
    for n, name in enumerate(top):
        # Writes on top: they are few, and drops would hide them.
        ax.scatter(writes.get(name, []), [n] * len(writes.get(name, [])), marker="|", s=80, color="tab:blue",
                   label="written" if n == 0 else None, zorder=3)
        ax.scatter(skips[name], [n] * len(skips[name]), marker="|", s=80, color="tab:red",
                   label="dropped by the spam filter" if n == 0 else None)
    ax.set_yticks(range(len(top)), top)
    ax.set_xlabel("minutes since the first event")
    ax.set_title("per-object spam budget: writes and drops")
    if top:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return ax
