"""The tuning lab: replay a trace (``simulate``), or replay it under every combination of correlator options
(``sweep``), and compare the load on the API server with the information that reached it.

A trace of a cluster holds events of many sources (``source.component`` and ``source.host``: each kubelet, the
scheduler, each controller), and in a cluster every source has its own correlator with its own caches and spam
buckets. Both replay it so by default (``correlators="per-source"``): each source through a correlator of its
own, the metrics those of the whole API server, which sees all their writes; ``correlators="shared"`` replays
the whole trace through one correlator, as one component would. With one source the two are the same.

``sweep`` runs the replays on native threads with the GIL released (``kubevents._native.replay_grid``), or, with
``executor=``, in chunks on any ``concurrent.futures.Executor`` (a process pool, or a Dask or Ray executor for a
cluster). Each row holds the combination's options and the metrics of its replay; the metrics are those of
``Simulation.metrics`` (see ``kubevents.Simulation``):

==========================  ==================================================================================
``events``                  occurrences in the trace
``writes``                  API writes: ``creates + patches``
``write_reduction``         ``1 - writes / events``: the share saved against one write per occurrence
``spam_skipped``            occurrences the spam filter dropped
``aggregated``              occurrences replaced by their group's "(combined from similar events)" event
``messages``, ``reasons``   distinct (object, reason, message) and (object, reason) in the trace
``messages_kept``           of those, written at least once under their own message (not combined)
``reasons_kept``            distinct (object, reason) written at least once, combined or not
``message_share``           ``messages_kept / messages``; ``reason_share`` likewise
``delayed``                 skipped occurrences that a later write of the same event reported (its count)
``unreported``              skipped occurrences that no later write reported
``mean_delay_s``            mean delay from occurrence to the write reporting it (written ones count as 0)
``max_delay_s``             the longest such delay
``peak_writes``             most writes in any window of ``window`` seconds; ``peak_write_rate`` per second
``p50_write_rate``          the writes per second in the windows of ``window`` seconds from the epoch on
                            (``[k w, (k + 1) w)``), from the trace's first event's window to its last one's,
                            empty ones included: their median; ``p90_write_rate`` and ``p99_write_rate`` the
                            90th and 99th percentiles (nearest rank)
``peak_object_writes``      the same for the busiest object; ``peak_object_write_rate`` per second
``max_count``               the largest ``count`` written on one event
==========================  ==================================================================================

Replayed per source, the counts, delays and distinct values are added up over the sources (a message two
sources report about one object counts twice, once for each), the maxima are the largest, and the peaks and
rates are found again over all the sources' writes in time order.

Memory: a replay without metrics holds the correlator's bounded caches and nothing per event (a 45 MB peak RSS
for the whole process over 1M or 5M events about distinct objects). The metrics are exact, so they keep what
they count: each distinct (object, reason, message) and (object, reason), each object's window of writes, and
each event with skipped occurrences waiting to be reported; about 250-330 bytes per distinct object and
message. Measured (BENCHMARKS.md, "Memory of the replay metrics") with ``simulate(path, metrics=True)`` over
the ``unique`` workload, a new object and message for every event: a 354-377 MB peak at 1M events, 1.29 GB at
5M; over 1M events of the ``mixed`` workload (5000 objects) 66-73 MB. ``per_object=True`` adds totals and a
summary for each object (1.06-1.08 GB at 1M objects). A sweep holds this once per replay running at a time,
besides the trace itself.

Per source, each source's correlator keeps caches of its own, up to 3 x ``lru_cache_size`` entries (about 4.5 MB
for a source whose 4,096-entry caches fill), as each kubelet and controller does; with metrics, the merge of the
sources' metrics keeps each write's time and object (12 bytes a write) and a table of the objects, about 165
bytes a distinct message more than one shared correlator's metrics.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor, Future, as_completed
from datetime import timedelta
from typing import Any, Literal

from kubevents import _partitions
from kubevents._native import (
    DEFAULT_BURST,
    DEFAULT_LRU_CACHE_SIZE,
    DEFAULT_MAX_EVENTS,
    DEFAULT_MAX_INTERVAL,
    DEFAULT_QPS,
    DEFAULT_WINDOW,
    GRID_OPTIONS,
    Simulation,
    _check_grid,
    _count_option,
    replay_grid,
)
from kubevents._native import simulate as _simulate
from kubevents.traces import KubectlTrace, Workload

__all__ = ["DEFAULT_WINDOW", "GRID_OPTIONS", "METRICS", "SweepResult", "combinations", "simulate", "sweep"]

METRICS = (
    "events",
    "writes",
    "creates",
    "patches",
    "write_reduction",
    "spam_skipped",
    "aggregated",
    "messages",
    "messages_kept",
    "message_share",
    "reasons",
    "reasons_kept",
    "reason_share",
    "delayed",
    "unreported",
    "mean_delay_s",
    "max_delay_s",
    "peak_writes",
    "peak_write_rate",
    "p50_write_rate",
    "p90_write_rate",
    "p99_write_rate",
    "peak_object_writes",
    "peak_object_write_rate",
    "max_count",
)
"""Every metric a sweep row can hold, in column order."""

_Grid = Mapping[str, Iterable[float]] | Sequence[Mapping[str, float]]
_Correlators = Literal["per-source", "shared"]


class SweepResult(list[dict[str, Any]]):
    """The rows of a sweep, one dict per combination in grid order; ``to_pandas()`` makes a DataFrame.
    ``correlators`` says how the replays gave correlators to the trace's sources."""

    correlators: str = "per-source"

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame (needs pandas: ``pip install 'kubevents[lab]'``)."""
        try:
            import pandas as pd
        except ImportError as e:
            raise ImportError(f"to_pandas() needs pandas ({e}); install it with: pip install 'kubevents[lab]'") from e
        return pd.DataFrame(list(self))

    def to_arrow(self) -> Any:
        """The rows as a pyarrow Table, one column per grid option and metric (needs pyarrow)."""
        try:
            import pyarrow as pa
        except ImportError as e:
            raise ImportError(f"to_arrow() needs pyarrow ({e}); install it with: pip install 'kubevents[lab]'") from e
        return pa.Table.from_pylist(list(self))

    def to_polars(self) -> Any:
        """The rows as a polars DataFrame (needs polars: ``pip install 'kubevents[polars]'``)."""
        try:
            import polars as pl
        except ImportError as e:
            raise ImportError(
                f"to_polars() needs polars ({e}); install it with: pip install 'kubevents[polars]'"
            ) from e
        return pl.DataFrame(list(self))


def combinations(grid: _Grid) -> list[dict[str, float]]:
    """Every combination of a grid ``{"burst": [10, 25], "qps": [0.01]}`` as a list of option dicts, the last
    option varying fastest. A sequence of dicts is taken as the combinations themselves. Each combination is
    checked as ``replay_grid`` checks it: the options are ``GRID_OPTIONS``, the others keep client-go's
    defaults."""
    if isinstance(grid, Mapping):
        names = list(grid)
        values = []
        for name in names:
            v = grid[name]
            if isinstance(v, (str, bytes)) or not isinstance(v, Iterable):
                raise TypeError(f"grid[{name!r}]: expected a list of values, got {type(v).__name__}")
            values.append(list(v))
        combos = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]
    elif isinstance(grid, (str, bytes)) or not isinstance(grid, Sequence):
        raise TypeError(f"grid: expected a dict of option lists or a list of option dicts, got {type(grid).__name__}")
    else:
        combos = [dict(c) for c in grid]
    _check_grid(combos)
    return combos


def _progress_bar(total: int, enabled: bool) -> Any:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    # delay: short sweeps finish before a bar would appear, so only long runs show one.
    return tqdm(total=total, desc="sweep", unit="replay", delay=1.0)


def _run_chunk(trace: Any, chunk: list[dict[str, float]], window: float, workers: int | None,
               correlators: _Correlators = "per-source") -> list[Any]:
    """Runs one chunk of a sweep (in an executor's worker)."""
    if _partitions.is_partitioned(trace):
        trace = _partitions.read(trace)
    return list(replay_grid(trace, chunk, window=window, workers=workers, correlators=correlators))


def simulate(
    trace: str | os.PathLike[str] | Iterable[Mapping[str, Any]] | Any,
    *,
    lru_cache_size: int = DEFAULT_LRU_CACHE_SIZE,
    burst: int = DEFAULT_BURST,
    qps: float = DEFAULT_QPS,
    max_events: int = DEFAULT_MAX_EVENTS,
    max_interval: int = DEFAULT_MAX_INTERVAL,
    key_func: Callable[[dict[str, Any]], tuple[str, str]] | None = None,
    message_func: Callable[[dict[str, Any]], str] | None = None,
    spam_key_func: Callable[[dict[str, Any]], str] | None = None,
    per_object: bool = False,
    metrics: bool = False,
    window: float | timedelta | None = None,
    correlators: _Correlators = "per-source",
    threads: int | None = None,
    executor: Executor | None = None,
    chunksize: int | None = None,
) -> Simulation:
    """Replays a trace through client-go's correlator on a virtual clock, as ``recordToSink`` would, with a
    sink that never fails, and returns a ``kubevents.Simulation``.

    ``trace`` is a JSON Lines path, an iterable of records, a table (pyarrow, polars; a
    ``kubevents.traces.scan_parquet`` stream is replayed as it is read), or a directory of Parquet partitioned
    by source (``kubevents.traces.partition_by_source``). The options are the correlator's (client-go's
    defaults); custom key functions are called with each event as a dict.

    ``correlators="per-source"`` (the default) replays each event source (``source.component`` and
    ``source.host``) through a correlator of its own, as in a cluster, spreading the sources over ``threads``
    native threads with the GIL released: the results are the same whatever the number of threads, and equal
    to replaying each source's events alone. ``threads`` defaults to one per core for a table, and to one for
    a path or records, which are then read as they replay (their reading is the slower part); given more
    than one, they are read into memory first, as a table. With custom key functions, one thread replays.
    A directory partitioned by source is read and replayed ``threads`` sources at a time (default: one per
    core), so memory holds those sources' records and correlators, not the trace.
    ``correlators="shared"`` replays the whole trace through one correlator, on this thread (a directory is
    then read whole).

    ``executor`` (any ``concurrent.futures.Executor``: a process pool, ``dask.distributed.Client
    .get_executor()``) spreads the sources over its workers, ``chunksize`` sources per task (default:
    about four tasks per CPU of this machine), each task replayed on ``threads`` threads (default 1) there.
    A partitioned directory is read by each worker, its own sources' files alone, where it lives (a path or
    URI the workers can reach); any other trace is split here and each task's part sent along. A task of a
    directory reads and replays its sources ``threads`` at a time, so a worker holds those sources' records
    and correlators alone, whatever ``chunksize`` (which only spreads the work), and this process holds the
    sources' results (with ``metrics``, each write's time and object), never the trace: a day of a
    1,000-node cluster replays so in bounded memory (``kubevents.traces.write_cluster_storm``).

    ``per_object=True`` keeps counts (and metrics) per involved object, ``metrics=True`` the metrics of
    ``kubevents.lab`` (peak write rates over ``window`` seconds, 60 by default), whose memory grows with
    the distinct (object, reason, message) of the trace. Per source, the result also breaks the load down by
    source and by component (``Simulation.by_source()``, ``source_metrics()``, ...).

    Example: ``kubevents.simulate(kubevents.traces.cluster_storm(nodes=20), metrics=True).by_component()``.
    """
    options: dict[str, Any] = {
        "lru_cache_size": lru_cache_size, "burst": burst, "qps": qps, "max_events": max_events,
        "max_interval": max_interval, "key_func": key_func, "message_func": message_func,
        "spam_key_func": spam_key_func, "per_object": per_object, "metrics": metrics, "window": window,
    }
    if executor is not None:
        if correlators != "per-source":
            raise ValueError(f"an executor replays the sources apart: it needs correlators='per-source', "
                             f"got {correlators!r}")
        return _partitions.simulate_on(executor, trace, options, chunksize, threads)
    if chunksize is not None:
        raise ValueError("chunksize applies to a replay on an executor; pass executor= too")
    if _partitions.is_partitioned(trace):
        if correlators == "per-source":
            return _partitions.simulate_here(trace, options, threads)
        trace = _partitions.read(trace)
    return _simulate(trace, correlators=correlators, threads=threads, **options)


def sweep(
    trace: str | os.PathLike[str] | Iterable[Mapping[str, Any]] | Any,
    grid: _Grid,
    *,
    metrics: Sequence[str] = METRICS,
    workers: int | None = None,
    executor: Executor | None = None,
    progress: bool = True,
    window: float = DEFAULT_WINDOW,
    chunksize: int | None = None,
    correlators: _Correlators = "per-source",
) -> SweepResult:
    """Replays ``trace`` once per combination of ``grid`` and returns one row per combination.

    ``trace`` is a JSON Lines path, an iterable of records (read once, then kept in memory), a table
    (pyarrow, polars: see ``kubevents.traces``), read in place and shared by the threads, or a directory of
    Parquet partitioned by source (read whole). ``grid`` maps option names (``GRID_OPTIONS``) to lists of
    values, or is a list of option dicts. A row holds every grid option of its combination, then the
    ``metrics`` asked for (names from ``METRICS``), with peak rates over windows of ``window`` seconds.

    Each replay gives every event source a correlator of its own under the combination's options, as if
    every kubelet and controller of the cluster ran them (``correlators="per-source"``), or replays the
    whole trace through one (``"shared"``); ``SweepResult.correlators`` says which.

    Without ``executor``, the replays run on ``workers`` native threads (default: one per core) with the GIL
    released. With ``executor``, the grid is split into chunks of ``chunksize`` combinations (default: about
    four chunks per CPU of this machine, at most 64 combinations each), each chunk a ``replay_grid`` call
    submitted to the executor, running on ``workers`` threads there (default 1, as executors run several
    chunks at once). The trace travels with each chunk: pass a path the workers can read when they run on
    other machines, or the records themselves (a one-shot iterator is turned into a list first).

    ``progress`` shows a tqdm bar (when tqdm is installed) for sweeps that run longer than a second.
    Custom key functions are not sweepable: the replays run without Python.
    """
    names = list(metrics)
    for m in names:
        if m not in METRICS:
            raise ValueError(f"metrics: unknown metric {m!r}; choose from {', '.join(METRICS)}")
    combos = combinations(grid)
    if workers is not None:
        workers = _count_option(workers, "workers")
    if chunksize is not None:
        chunksize = _count_option(chunksize, "chunksize")
    if correlators not in ("per-source", "shared"):
        raise ValueError(f'correlators must be "per-source" or "shared", got {correlators!r}')
    keys = list(dict.fromkeys(k for c in combos for k in c))
    if executor is None and _partitions.is_partitioned(trace):
        trace = _partitions.read(trace)

    def row(combo: Mapping[str, float], result: Mapping[str, Any]) -> dict[str, Any]:
        r: dict[str, Any] = {k: combo.get(k) for k in keys}
        r.update((m, result[m]) for m in names)
        return r

    bar = _progress_bar(len(combos), progress)
    try:
        if executor is None:
            on_result: Callable[[int, Any], None] | None = (lambda i, m: bar.update(1)) if bar else None
            results: Sequence[Mapping[str, Any]] = replay_grid(trace, combos, window=window, workers=workers,
                                                               on_result=on_result, correlators=correlators)
        else:
            results = _sweep_on(executor, trace, combos, window, workers, chunksize, bar, correlators)
    finally:
        if bar is not None:
            bar.close()
    out = SweepResult(row(c, r) for c, r in zip(combos, results, strict=True))
    out.correlators = correlators
    return out


def _sweep_on(
    executor: Executor,
    trace: Any,
    combos: list[dict[str, float]],
    window: float,
    workers: int | None,
    chunksize: int | None,
    bar: Any,
    correlators: _Correlators,
) -> list[Any]:
    # Paths, workloads and kubectl traces travel small; other one-shot iterables must become lists to travel.
    # Tables (pyarrow, polars) travel as they are: both pickle their buffers.
    if not isinstance(trace, (str, os.PathLike, Sequence, Workload, KubectlTrace)) and not hasattr(
        trace, "__arrow_c_stream__"
    ):
        trace = list(trace)
    if chunksize is None:
        chunksize = min(64, max(1, math.ceil(len(combos) / (4 * (os.cpu_count() or 1)))))
    chunks = [combos[i : i + chunksize] for i in range(0, len(combos), chunksize)]
    futures: dict[Future[list[Any]], int] = {}
    try:
        for chunk in chunks:
            futures[executor.submit(_run_chunk, trace, chunk, window, workers or 1, correlators)] = len(chunk)
        for f in as_completed(futures):
            f.result()  # the first failure ends the sweep
            if bar is not None:
                bar.update(futures[f])
        return [r for f in futures for r in f.result()]
    except BaseException:
        for f in futures:
            f.cancel()
        raise
