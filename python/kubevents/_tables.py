"""Traces as Arrow tables and Parquet files (``kubevents.traces.to_arrow``, ``to_parquet``, ``read_parquet``,
``scan_parquet``).

A trace table has one row per record and the record's fields as columns, the involved object's flattened:

==============================  ==================================================================
column                          type
==============================  ==================================================================
``t_ns``                        int64 ns since the Unix epoch, or a timestamp of any unit; no nulls
``source_component``            string (utf8, large_utf8, utf8_view, or a dictionary of one)
``source_host``                 string
``involved.kind``               string
``involved.namespace``          string
``involved.name``               string
``involved.uid``                string
``involved.api_version``        string
``involved.resource_version``   string
``involved.field_path``         string
``type``                        string
``reason``                      string
``message``                     string
``annotations``                 map<string, string>
==============================  ==================================================================

``t_ns`` and at least one ``involved.*`` column are required (as a record needs ``t_ns`` and ``involved``);
a missing string column or a null string reads as empty, as a missing key does in a record. Another column
name or type raises ``ValueError``/``TypeError`` naming the column, so a misspelt column is caught. Any object
with the Arrow PyCapsule interface (``__arrow_c_stream__``) is a table: a pyarrow ``Table`` or
``RecordBatchReader``, a polars ``DataFrame``, pandas through ``pyarrow.Table.from_pandas``.

pyarrow is needed only by the functions here (the ``lab`` extra); ``simulate`` reads tables without it.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from kubevents._native import TRACE_COLUMNS

if TYPE_CHECKING:
    import pyarrow

COLUMNS: tuple[str, ...] = tuple(TRACE_COLUMNS)


def _pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError:
        raise ImportError(
            "Arrow tables and Parquet traces need pyarrow: pip install 'kubevents[lab]' (or pyarrow)"
        ) from None
    return pyarrow


def to_arrow(trace: Iterable[Mapping[str, Any]] | str | os.PathLike[str] | Any) -> pyarrow.Table:
    """A trace as a pyarrow ``Table`` with the columns above: from records (dicts, e.g. ``generate(...)`` or
    ``from_kubectl(...)``), from a JSON Lines or Parquet file, or from any Arrow table (returned as a pyarrow
    table, its columns' names and types checked).

    Records and files are read and checked as ``simulate`` reads them (a bad record raises naming its index
    or line, and the field); the columns are laid out in Rust, without a Python object per value.
    """
    pa = _pyarrow()
    if isinstance(trace, (str, os.PathLike)) and os.fspath(trace).endswith(".parquet"):
        return read_parquet(trace)
    if hasattr(trace, "__arrow_c_stream__"):
        table = pa.table(trace)
        _check(table)
        return table
    from kubevents._native import _records_table

    return pa.table(_records_table(trace))


def _check(table: Any, *, data: bool = False) -> None:
    """The columns' names and types; with ``data`` the values too (a replay checks them before it starts)."""
    from kubevents._native import _check_table

    _check_table(table, data=data)


def to_parquet(trace: Any, path: str | os.PathLike[str], *, compression: str = "zstd") -> int:
    """Writes a trace (anything ``to_arrow`` takes) to a Parquet file; returns the number of rows."""
    import pyarrow.parquet as pq

    table = to_arrow(trace)
    pq.write_table(table, os.fspath(path), compression=compression)
    return int(table.num_rows)


@contextlib.contextmanager
def _about(path: str) -> Iterator[None]:
    """Errors raised inside name the file ``path``: pyarrow's do not always (a missing file's is its bare name),
    nor do the column checks."""
    try:
        yield
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path) from None
    except (TypeError, ValueError) as e:
        if path in str(e):
            raise
        raise (TypeError if isinstance(e, TypeError) else ValueError)(f"{path}: {e}") from None


def read_parquet(path: str | os.PathLike[str]) -> pyarrow.Table:
    """A Parquet trace as a pyarrow ``Table``, ready for ``simulate`` and ``sweep``: its columns' names and types
    are checked here (errors name the file), its values when it is replayed."""
    _pyarrow()
    import pyarrow.parquet as pq

    path = os.fspath(path)
    with _about(path):
        table = pq.read_table(path)
        _check(table)
    return table


def scan_parquet(path: str | os.PathLike[str], *, batch_size: int = 8192) -> pyarrow.RecordBatchReader:
    """A Parquet trace as a stream of record batches of up to ``batch_size`` rows, decoded as they are read:
    ``simulate`` reads a stream ahead on a thread of its own while it replays, so decoding overlaps the replay
    where ``read_parquet`` decodes the whole file first. Its columns' names and types are checked here, its
    values when it is replayed. A stream is read once (the ``Simulation`` keeps its batches for
    ``decisions()``); ``sweep`` reads it whole, as it would ``read_parquet``'s table."""
    pa = _pyarrow()
    import pyarrow.parquet as pq

    path = os.fspath(path)
    with _about(path):
        file = pq.ParquetFile(path)
        schema = file.schema_arrow
        _check(schema.empty_table())
    # Decoded on the replay's reader thread alone: the replay itself keeps one core busy, and pyarrow's own
    # threads would compete with it there.
    batches = file.iter_batches(batch_size=batch_size, use_threads=False)
    return pa.RecordBatchReader.from_batches(schema, batches)


def to_records(table: Any) -> list[dict[str, Any]]:
    """The rows of a trace table as records (dicts in the JSON Lines shape, ``involved`` nested), e.g. to look
    at them or to plot them; empty strings and absent annotations are left out, as a record may leave them."""
    pa = _pyarrow()
    _check(table, data=True)
    out = []
    for row in pa.table(table).to_pylist():
        r: dict[str, Any] = {"t_ns": row["t_ns"], "involved": {}}
        for key, value in row.items():
            if key == "t_ns" or not value:
                continue
            if key.startswith("involved."):
                r["involved"][key.split(".", 1)[1]] = value
            elif key == "annotations":
                r[key] = dict(value)
            else:
                r[key] = value
        out.append(r)
    return out
