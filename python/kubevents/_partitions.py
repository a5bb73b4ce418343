"""A trace split by event source, on disk and over an executor's workers (``kubevents.simulate(...,
executor=...)``, ``kubevents.traces.partition_by_source``).

On disk, a trace partitioned by source is a Parquet dataset in the Hive layout that Spark, Dask, polars and
pyarrow read and write: ``ROOT/source_component=<component>/source_host=<host>/part-0.parquet``, the values
URL-encoded (``%2F`` for a slash) and an empty one written ``__HIVE_DEFAULT_PARTITION__``. The files leave out
the two source columns, which their directories give. A dataset partitioned by component alone, or by host
alone, works too (each directory then holds whole sources); the files of one directory (``part-0.parquet``,
``part-1.parquet``, ...) are read in the order of their names. Paths may be local or any URI pyarrow reads
(``s3://bucket/trace``).
"""

from __future__ import annotations

import heapq
import math
import os
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future
from typing import Any, TypeGuard, TypeVar

from kubevents._native import Simulation, _count_option, _merge_sources, _replay_sources, _split_sources
from kubevents._tables import _pyarrow

SOURCE_KEYS = ("source_component", "source_host")
_NULL = "__HIVE_DEFAULT_PARTITION__"
_T = TypeVar("_T")


def filesystem(root: str | os.PathLike[str]) -> tuple[Any, str]:
    """The pyarrow filesystem of ``root`` (a local path or a URI) and the path within it."""
    _pyarrow()
    import pyarrow.fs as pafs

    text = os.fspath(root)
    if "://" not in text:
        return pafs.LocalFileSystem(), os.path.abspath(text)
    fs, path = pafs.FileSystem.from_uri(text)
    return fs, path


def is_partitioned(trace: object) -> TypeGuard[str | os.PathLike[str]]:
    """Whether ``trace`` names a directory (a Parquet dataset) rather than a file."""
    if not isinstance(trace, (str, os.PathLike)):
        return False
    text = os.fspath(trace)
    if "://" not in text:
        return os.path.isdir(text)
    import pyarrow.fs as pafs

    fs, path = filesystem(text)
    return bool(fs.get_file_info(path).type == pafs.FileType.Directory)


def partition_by_source(trace: Any, root: str | os.PathLike[str], *, compression: str = "zstd") -> int:
    """Writes a trace (anything ``simulate`` reads) as Parquet partitioned by source under ``root`` (the Hive
    layout of ``kubevents._partitions``), each source's records in trace order; returns the number of sources.
    ``root`` must not hold a trace already. ``simulate(root, executor=...)`` then reads each source's files on
    the worker that replays it.

    Example: ``partition_by_source(kubevents.traces.cluster_storm(nodes=50), "cluster-trace/")``.
    """
    pa = _pyarrow()
    fs, base = empty_root(root)
    sources = _split_sources(_parquet_read(trace))
    for component, host, part in sources:
        write_source(fs, base, component, host, pa.table(part), compression)
    return len(sources)


def empty_root(root: str | os.PathLike[str]) -> tuple[Any, str]:
    """The filesystem and path of ``root``, which must hold no Parquet files (else ``ValueError``)."""
    fs, base = filesystem(root)
    if _files(fs, base):
        raise ValueError(f"{os.fspath(root)}: holds Parquet files already; partition into an empty directory")
    return fs, base


def write_source(fs: Any, base: str, component: str, host: str, table: Any, compression: str) -> None:
    """Writes the records of one source (a table with or without the source columns) as its
    ``part-0.parquet`` under ``base``."""
    import pyarrow.parquet as pq

    table = table.drop_columns([k for k in SOURCE_KEYS if k in table.column_names])
    directory = "/".join([base.rstrip("/"), *(f"{k}={_encode(v)}" for k, v in zip(SOURCE_KEYS, (component, host),
                                                                                  strict=True))])
    fs.create_dir(directory, recursive=True)
    pq.write_table(table, f"{directory}/part-0.parquet", filesystem=fs, compression=compression)


def _parquet_read(trace: Any) -> Any:
    """A Parquet file's path as its table (other paths are JSON Lines, which the core reads)."""
    if isinstance(trace, (str, os.PathLike)) and os.fspath(trace).endswith(".parquet"):
        from kubevents._tables import read_parquet

        return read_parquet(trace)
    return trace


def _encode(value: str) -> str:
    return urllib.parse.quote(value, safe="") if value else _NULL


def _files(fs: Any, base: str) -> list[tuple[str, int]]:
    """The Parquet files under ``base`` (path, size), sorted by path."""
    import pyarrow.fs as pafs

    info = fs.get_file_info(base)
    if info.type == pafs.FileType.NotFound:
        return []
    selector = pafs.FileSelector(base, recursive=True)
    return sorted((f.path, f.size or 0) for f in fs.get_file_info(selector)
                  if f.type == pafs.FileType.File and f.path.endswith(".parquet"))


def _keys(base: str, path: str) -> tuple[tuple[str, str], ...]:
    """The source keys of a file's directories, as (key, value) pairs."""
    parts = path[len(base):].strip("/").split("/")[:-1]
    found = []
    for part in parts:
        key, sep, value = part.partition("=")
        if sep and key in SOURCE_KEYS:
            found.append((key, "" if value == _NULL else urllib.parse.unquote(value)))
    return tuple(found)


def groups(root: str | os.PathLike[str]) -> tuple[str, list[list[str]], list[int]]:
    """The Parquet files of a dataset grouped so that no source spans two groups (by the source keys of their
    directories; without any, one group), each group's files in name order; with the root and each group's
    size in bytes."""
    fs, base = filesystem(root)
    files = _files(fs, base)
    if not files:
        raise ValueError(f"{os.fspath(root)}: no Parquet files (*.parquet) under it")
    by: dict[tuple[tuple[str, str], ...], tuple[list[str], list[int]]] = {}
    for path, size in files:
        paths, sizes = by.setdefault(_keys(base, path), ([], []))
        paths.append(path)
        sizes.append(size)
    return base, [paths for paths, _ in by.values()], [sum(sizes) for _, sizes in by.values()]


def _dataset(root: str | os.PathLike[str], base: str, paths: Sequence[str]) -> Any:
    """The files as one pyarrow dataset, with the source columns their directories give."""
    pa = _pyarrow()
    import pyarrow.dataset as ds

    fs, _ = filesystem(root)
    present = {k for p in paths for k, _ in _keys(base, p)}
    keys = [k for k in SOURCE_KEYS if k in present]
    partitioning = None
    if keys:
        schema = pa.schema([(k, pa.string()) for k in keys])
        partitioning = ds.HivePartitioning(schema, null_fallback=_NULL)
    return ds.dataset(list(paths), format="parquet", filesystem=fs, partitioning=partitioning,
                      partition_base_dir=base)


def read(root: str | os.PathLike[str], paths: Sequence[str] | None = None) -> Any:
    """A partitioned dataset (or the files ``paths`` of it) as a stream of record batches in file order, for
    ``simulate``: read as it replays, never whole."""
    if paths is None:
        _, all_groups, _ = groups(root)
        paths = [p for g in all_groups for p in g]
    _, base = filesystem(root)
    return _dataset(root, base, paths).scanner(use_threads=False).to_reader()


def _replay_files(root: str | os.PathLike[str], sources: list[list[str]], options: Mapping[str, Any]) -> list[bytes]:
    """An executor's task, or a local replay: replays some sources of a partitioned dataset (each source's
    files), read where they live, as many sources at a time as ``options["threads"]``: memory holds only those
    sources' records and correlators, whatever the number of sources."""
    at_once = options["threads"]
    return [_replay_sources(read(root, [p for files in sources[i : i + at_once] for p in files]), **options)
            for i in range(0, len(sources), at_once)]


def _replay_table(table: Any, options: Mapping[str, Any]) -> list[bytes]:
    """An executor's task: replays the sources of a part of a trace sent along."""
    return [_replay_sources(table, **options)]


def _tasks(sizes: Sequence[int], chunksize: int | None) -> list[list[int]]:
    """Groups of item indexes, ``chunksize`` items each (default: about four groups per CPU of this machine),
    of even total size: the largest item first, each to the group with the least so far."""
    n = len(sizes)
    if chunksize is None:
        chunksize = max(1, math.ceil(n / (4 * (os.cpu_count() or 1))))
    count = max(1, math.ceil(n / chunksize))
    tasks: list[list[int]] = [[] for _ in range(count)]
    open_tasks = [(0, t) for t in range(count)]  # (load, task) of the tasks not full yet, a heap
    for i in sorted(range(n), key=lambda i: (-sizes[i], i)):
        load, t = heapq.heappop(open_tasks)
        tasks[t].append(i)
        if len(tasks[t]) < chunksize:
            heapq.heappush(open_tasks, (load + sizes[i], t))
    return [sorted(t) for t in tasks if t]


def gather(futures: list[Future[_T]]) -> list[_T]:
    """The results in order; the first failure cancels the rest and is raised."""
    try:
        return [f.result() for f in futures]
    except BaseException:
        for f in futures:
            f.cancel()
        raise


def simulate_on(executor: Executor, trace: Any, options: Mapping[str, Any], chunksize: int | None,
                workers: int | None) -> Simulation:
    """``simulate`` with the sources spread over ``executor``'s workers (see ``kubevents.simulate``)."""
    if chunksize is not None and (isinstance(chunksize, bool) or not isinstance(chunksize, int) or chunksize < 1):
        raise ValueError(f"chunksize must be an int >= 1, got {chunksize!r}")
    task_options = {**options, "threads": workers or 1}
    submit: Callable[..., Future[list[bytes]]] = executor.submit
    futures: list[Future[list[bytes]]] = []
    if is_partitioned(trace):
        root = os.fspath(trace)
        _, file_groups, sizes = groups(root)
        for task in _tasks(sizes, chunksize):
            futures.append(submit(_replay_files, root, [file_groups[g] for g in task], task_options))
        # The dataset has no order across its files: decisions() would have none to follow.
        decisions_trace = None
    else:
        pa = _pyarrow()
        trace = _parquet_read(trace)
        split = _split_sources(trace)
        tables = [pa.table(t) for _, _, t in split]
        for task in _tasks([t.num_rows for t in tables], chunksize):
            part = pa.concat_tables([tables[i] for i in task], promote_options="default")
            futures.append(submit(_replay_table, part, task_options))
        decisions_trace = trace if _replayable(trace) else None
    return _merge_sources([part for parts in gather(futures) for part in parts], decisions_trace, **options)


def simulate_here(root: str | os.PathLike[str], options: Mapping[str, Any], threads: int | None) -> Simulation:
    """``simulate`` of a partitioned directory in this process, one correlator per source: the sources read
    and replayed ``threads`` at a time (default: one per CPU), each on a thread of its own."""
    at_once = (os.cpu_count() or 1) if threads is None else _count_option(threads, "threads")
    _, file_groups, _ = groups(root)
    parts = _replay_files(root, file_groups, {**options, "threads": at_once})
    return _merge_sources(parts, _Records(root), **options)


class _Records:
    """The records of a partitioned dataset in file order, read a batch at a time whenever iterated: the trace
    that ``Simulation.decisions()`` replays again."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = root

    def __iter__(self) -> Iterator[dict[str, Any]]:
        from kubevents._tables import to_records

        for batch in read(self.root):
            yield from to_records(batch)


def _replayable(trace: Any) -> bool:
    """Whether ``trace`` can be read again (not a one-shot iterator or stream)."""
    if isinstance(trace, (str, os.PathLike)):
        return True
    if hasattr(trace, "__arrow_c_stream__"):
        return not hasattr(trace, "read_next_batch")
    return not isinstance(trace, Iterator)
