"""Capture a cluster's Events as a trace for the tuning lab: every occurrence the API server counts while the
capture runs, at the time the event gives it.

``capture("incident.parquet", duration=600)`` (or ``python -m kubevents capture --duration 10m
incident.parquet``) lists the Events and watches them through the official ``kubernetes`` client
(``pip install 'kubevents[capture]'``), in every namespace or in those given, and writes a trace that
``kubevents.simulate`` and ``kubevents.sweep`` replay: JSON Lines (``.jsonl``) or Parquet (``.parquet``, with
pyarrow), in the format of ``kubevents.traces``.

What is an occurrence: an Event the watch reports for the first time is one (or its ``count``, when it was
counted up before the watch saw it, e.g. while a watch was being restarted); an Event whose count goes up is
as many as it went up by (a core/v1 ``count`` from 4 to 7 is three; an events.k8s.io/v1 ``series.count``
likewise). Each is a record at the time the event gives for it: its ``lastTimestamp`` (``series
.lastObservedTime``, else ``eventTime``), the first occurrence of a new Event at its ``firstTimestamp``
(``eventTime``). Events that were there when the capture started give their later occurrences only. Both
event APIs serve the same Event objects (an event written through events.k8s.io/v1 is listed by core/v1
with its ``series`` and ``eventTime``), so one API is watched: core/v1 by default, which every cluster serves,
or events.k8s.io/v1 (``api=``); the records are the same. As in ``traces.from_kubectl``, the message of a
"(combined from similar events)" event is its group's latest one, without the prefix, and the source is
``source`` (``deprecatedSource``), else the reporting controller and instance.

A capture holds no occurrence twice: it keeps the highest count it saw of each Event, so a stale view or a
list after a watch restart adds only what is new. The server ends a watch now and then (its timeout, a
restart): the capture watches again from the last ``resourceVersion``, and when that one is too old (410 Gone,
``Expired``) lists again and carries on. Connection errors are retried with a back-off (1 s doubling to 30 s).
A refusal (401, 403, 404: e.g. RBAC without ``list`` and ``watch`` on ``events``) stops the capture with
``CaptureError``.

Records are written in time order: they wait ``REORDER_WINDOW`` seconds (of event time) in memory, so that
records that arrive a little out of order (from two namespaces' watches, or after a restart) are put in
order; a JSON Lines file is flushed after every batch, a Parquet file is complete once the capture ends.
A capture ends when ``duration`` seconds have passed, when ``stop`` (a ``threading.Event``) is set, or on
Ctrl-C; in every case what was captured is written and the file closed. Ctrl-C is raised again
(``KeyboardInterrupt``) after that; ``Capture.stats`` then holds the counts.

Example::

    from kubevents.capture import capture
    stats = capture("incident.jsonl", duration=600, namespaces=["shop", "search"], progress=True)
    print(stats.occurrences, kubevents.simulate("incident.jsonl").totals)
"""

from __future__ import annotations

import heapq
import importlib
import itertools
import json
import logging
import os
import queue
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, TextIO

from kubevents.traces import _occurrence_record, _occurrences

__all__ = [
    "APIS", "REORDER_WINDOW", "Capture", "CaptureError", "CaptureStats", "capture", "format_duration", "parse_duration",
]

_log = logging.getLogger(__name__)

APIS = ("core/v1", "events.k8s.io/v1")
"""The APIs a capture can watch: both serve the same Event objects."""

REORDER_WINDOW = 10.0
"""Seconds of event time a record waits before it is written, so that records are written in time order."""

# Seconds a watch request asks the server to keep it open; the client waits this much longer for data.
_WATCH_TIMEOUT = 300
_READ_MARGIN = 30
_CONNECT_TIMEOUT = 10
# Items per page of a list (client-go's pager, kubectl).
_PAGE = 500
# Retries of connection errors: 1 s, doubling up to 30 s.
_BACKOFF = (1.0, 30.0)
# Seconds between progress updates on a terminal, and between progress lines elsewhere.
_PROGRESS_TTY = 0.5
_PROGRESS_LINES = 10.0
# Records buffered for a Parquet row group.
_ROW_GROUP = 10_000
# Statuses that a retry will not change: the capture stops.
_FATAL = (400, 401, 403, 404, 405)


class CaptureError(RuntimeError):
    """The API server refused the capture's list or watch (``status``: the HTTP status)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class CaptureStats:
    """The counts of a capture (``Capture.stats``, updated as it runs)."""

    events: int = 0
    """Event objects that were created, or counted up, while the capture ran."""
    occurrences: int = 0
    """Records captured: the occurrences those events counted (all written once the capture ends)."""
    existing: int = 0
    """Event objects that were there when the capture started."""
    skipped: int = 0
    """Reports of events that could not be read as records (a field of the wrong type, no time); logged."""
    restarts: int = 0
    """Watches opened again after the server ended one, a 410 Gone (then listed again) or a connection error."""
    elapsed: float = 0.0
    """Seconds since the capture started."""

    def summary(self) -> str:
        """One line: ``37 occurrences of 12 events in 1m23s (4 events were there before; 1 watch restart)``."""
        notes = [f"{self.existing} events were there before"]
        if self.restarts:
            notes.append(f"{self.restarts} watch restart{'s' if self.restarts != 1 else ''}")
        if self.skipped:
            notes.append(f"{self.skipped} unreadable events skipped")
        return (f"{self.occurrences} occurrences of {self.events} events in {format_duration(self.elapsed)} "
                f"({'; '.join(notes)})")


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds of a duration written as Go and kubectl write them (``"10m"``, ``"1h30m"``, ``"90s"``,
    ``"1.5h"``, ``"500ms"``) or as a plain number of seconds; ``ValueError`` unless it is more than zero."""
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        parts = _DURATION.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise ValueError(f"not a duration: {text!r} (expected e.g. 90s, 10m, 1h30m)") from None
        seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"a duration must be more than zero, got {text!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """``83.4`` as ``"1m23s"``, ``3725`` as ``"1h2m5s"``."""
    s = int(seconds)
    h, m, s = s // 3600, s // 60 % 60, s % 60
    return (f"{h}h" if h else "") + (f"{m}m" if h or m else "") + f"{s}s"


# --- Occurrences from the watch -----------------------------------------------------------------------------

class _Counts:
    """The highest count seen of each Event object, and the records of the occurrences a report adds."""

    def __init__(self, stats: CaptureStats) -> None:
        self._seen: dict[tuple[str, str, str], int] = {}
        self._captured: set[tuple[str, str, str]] = set()
        self._stats = stats

    def report(self, item: dict[str, Any], existing: bool = False) -> list[dict[str, Any]]:
        """The records of the new occurrences of ``item`` (an Event as the server serves it, either shape).
        With ``existing`` (the first list), an Event not seen before was there before the capture: its count so
        far is noted, not captured."""
        meta = item.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""), str(meta.get("uid") or ""))
        try:
            event = _occurrences(item, f"event {key[0]}/{key[1]}")
        except (TypeError, ValueError) as e:
            self._stats.skipped += 1
            _log.warning("kubevents capture: skipped an event that is not a trace record: %s", e)
            return []
        count, first, last = event[6:]
        seen = self._seen.get(key)
        if seen is None and existing:
            self._seen[key] = count
            self._stats.existing += 1
            return []
        if seen is not None and count <= seen:
            return []
        self._seen[key] = count
        times = [first] + [last] * (count - 1) if seen is None else [last] * (count - seen)
        if key not in self._captured:
            self._captured.add(key)
            self._stats.events += 1
        self._stats.occurrences += len(times)
        return [_occurrence_record(event, t) for t in times]


class _Reorder:
    """Records held until ``REORDER_WINDOW`` seconds of event time have passed after them, to go out in order."""

    def __init__(self, window: float = REORDER_WINDOW) -> None:
        self._heap: list[tuple[int, int, dict[str, Any]]] = []
        self._seq = itertools.count()  # ties keep the order of arrival
        self._window = int(window * 1e9)
        self._newest: int | None = None

    def push(self, records: Iterable[dict[str, Any]]) -> None:
        for r in records:
            heapq.heappush(self._heap, (r["t_ns"], next(self._seq), r))
            self._newest = r["t_ns"] if self._newest is None else max(self._newest, r["t_ns"])

    def ready(self) -> list[dict[str, Any]]:
        """The records older than the newest one by more than the window, in time order."""
        out = []
        while self._heap and self._newest is not None and self._heap[0][0] < self._newest - self._window:
            out.append(heapq.heappop(self._heap)[2])
        return out

    def rest(self) -> list[dict[str, Any]]:
        """Every record still held, in time order."""
        out = [heapq.heappop(self._heap)[2] for _ in range(len(self._heap))]
        return out


# --- Trace files ----------------------------------------------------------------------------------------------

class _JsonLinesWriter:
    def __init__(self, path: str) -> None:
        self._file = open(path, "w", encoding="utf-8")

    def write(self, records: list[dict[str, Any]]) -> None:
        if records:
            self._file.writelines(json.dumps(r, separators=(",", ":")) + "\n" for r in records)
            self._file.flush()

    def close(self) -> None:
        self._file.close()


class _ParquetWriter:
    def __init__(self, path: str) -> None:
        from kubevents._tables import _pyarrow, to_arrow

        _pyarrow()  # its ImportError says what to install
        import pyarrow.parquet as pq

        self._to_arrow = to_arrow
        self._schema = to_arrow([]).schema
        self._writer = pq.ParquetWriter(path, self._schema, compression="zstd")
        self._pending: list[dict[str, Any]] = []

    def write(self, records: list[dict[str, Any]]) -> None:
        self._pending.extend(records)
        if len(self._pending) >= _ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._writer.write_table(self._to_arrow(self._pending))
            self._pending = []

    def close(self) -> None:
        try:
            self._flush()
        finally:
            self._writer.close()


_WRITERS: dict[str, Callable[[str], _JsonLinesWriter | _ParquetWriter]] = {
    ".jsonl": _JsonLinesWriter, ".ndjson": _JsonLinesWriter, ".parquet": _ParquetWriter,
}


def _writer_for(path: str) -> Callable[[str], _JsonLinesWriter | _ParquetWriter]:
    make = _WRITERS.get(os.path.splitext(path)[1].lower())
    if make is None:
        raise ValueError(f"{path}: the trace format comes from the file's extension: .jsonl (JSON Lines) or "
                         ".parquet (Parquet, with pyarrow)")
    return make


def _kubernetes() -> Any:
    """The official client (untyped here: its annotations differ between the versions kubevents allows)."""
    try:
        return importlib.import_module("kubernetes")
    except ImportError:
        raise ImportError("a capture needs the kubernetes client: pip install 'kubevents[capture]'") from None


# --- Watches --------------------------------------------------------------------------------------------------

class _Gone(Exception):
    """The watch's resourceVersion is too old (410): list again."""


class _Retry(Exception):
    """A failure that a later attempt may not meet: watch again after a back-off."""


def _lines(response: Any) -> Iterator[bytes]:
    """The lines of a streamed response, as they arrive."""
    pending = b""
    for chunk in response.stream(None):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        yield from (line for line in lines if line.strip())
    if pending.strip():
        yield pending


def _refusal(where: str, status: int, body: Any) -> str:
    """``<where>: 403 Forbidden: <the Status' message>``, from an error answer's body (a ``Status`` or text)."""
    try:
        reason, message = HTTPStatus(status).phrase, ""
    except ValueError:
        reason, message = "", ""
    if isinstance(body, bytes):
        body = body.decode(errors="replace")
    try:
        parsed = json.loads(body) if isinstance(body, str) else body
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        reason, message = str(parsed.get("reason") or reason), str(parsed.get("message") or "")
    elif isinstance(body, str):
        message = body.strip()
    return f"{where}: {status} {reason}: {message}"


class _Watch(threading.Thread):
    """Lists and watches the Events one call returns (one namespace, or all), putting what it sees on the
    capture's queue: ``("list", self, items, first)`` after each list, ``("event", self, item)`` for each
    event created or updated, ``("restart", self, why)`` before it watches again after a 410 or an error, and
    ``("error", self, exception)`` when it gives up."""

    def __init__(self, call: Callable[..., Any], where: str, out: queue.Queue[tuple[Any, ...]],
                 stopping: threading.Event) -> None:
        super().__init__(name=f"kubevents-capture {where}", daemon=True)
        self.where = where
        self._call = call
        self._out = out
        self._stopping = stopping
        self._lock = threading.Lock()
        self._response: Any = None

    def stop(self) -> None:
        """Ends the watch request in flight (the thread then ends)."""
        with self._lock:
            response = self._response
        if response is not None:
            try:
                response.shutdown()  # urllib3 >= 2.3: unblocks the read
            except (AttributeError, RuntimeError):
                pass  # an older urllib3, or the response is done: the thread ends at the watch's timeout

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:  # handed to the capture's thread, which raises it
            if not self._stopping.is_set():
                self._out.put(("error", self, e))

    def _run(self) -> None:
        from urllib3.exceptions import HTTPError

        ApiException = _kubernetes().client.exceptions.ApiException  # noqa: N806

        first, version, delay = True, None, _BACKOFF[0]
        while not self._stopping.is_set():
            why = ""
            try:
                if version is None:
                    items, version = self._list()
                    self._out.put(("list", self, items, first))
                    first = False
                version = self._watch(version)
                delay = _BACKOFF[0]
                continue  # the server ended the watch (its timeout): watch on from where it ended
            except _Gone:
                version, why = None, "410 Gone"
            except ApiException as e:
                if e.status == 410:
                    version, why = None, "410 Gone"
                elif e.status in _FATAL:
                    raise CaptureError(_refusal(self.where, e.status, e.body), e.status) from None
                else:
                    why = f"{e.status} {e.reason}"
            except (_Retry, HTTPError, OSError, ValueError) as e:
                if first:
                    raise CaptureError(f"{self.where}: cannot list the events: {e}") from None
                why = str(e) or type(e).__name__
            if self._stopping.is_set():
                return
            self._out.put(("restart", self, why))
            if version is None:  # as client-go's reflector: list again at once
                _log.info("kubevents capture: %s: %s, listing again", self.where, why)
                continue
            _log.info("kubevents capture: %s: watching again in %.0f s (%s)", self.where, delay, why)
            if self._stopping.wait(delay):
                return
            delay = min(delay * 2, _BACKOFF[1])

    def _list(self) -> tuple[list[dict[str, Any]], str]:
        """Every Event, in pages: the items and the list's resourceVersion."""
        items: list[dict[str, Any]] = []
        token = None
        while True:
            options: dict[str, Any] = {"limit": _PAGE}
            if token:
                options["_continue"] = token
            response = self._call(**options, _preload_content=False,
                                  _request_timeout=(_CONNECT_TIMEOUT, _WATCH_TIMEOUT))
            body = json.loads(response.data)
            items.extend(body.get("items") or [])
            metadata = body.get("metadata") or {}
            token = metadata.get("continue")
            if not token:
                return items, str(metadata.get("resourceVersion") or "")

    def _watch(self, version: str) -> str:
        """Watches from ``version`` until the server ends the watch; returns the last resourceVersion seen."""
        response = self._call(watch=True, resource_version=version, allow_watch_bookmarks=True,
                              timeout_seconds=_WATCH_TIMEOUT, _preload_content=False,
                              _request_timeout=(_CONNECT_TIMEOUT, _WATCH_TIMEOUT + _READ_MARGIN))
        with self._lock:
            self._response = response
        try:
            if self._stopping.is_set():
                return version
            for line in _lines(response):
                change = json.loads(line)
                kind, obj = change.get("type"), change.get("object") or {}
                if kind == "ERROR":
                    code = obj.get("code")
                    if code == 410:
                        raise _Gone
                    if code in _FATAL:
                        raise CaptureError(_refusal(f"{self.where}: watch", code, obj), code)
                    raise _Retry(f"the watch failed: {code} {obj.get('reason')}: {obj.get('message')}")
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                if kind in ("ADDED", "MODIFIED"):
                    self._out.put(("event", self, obj))
            return version
        finally:
            with self._lock:
                self._response = None
            response.release_conn()


# --- Progress -------------------------------------------------------------------------------------------------

class _Progress:
    """The progress line: updated in place on a terminal, else a line when the counts changed (at most every
    ``_PROGRESS_LINES`` seconds)."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream
        self._tty = bool(stream is not None and stream.isatty())
        self._last = float("-inf")
        self._shown: tuple[int, int] | None = None

    def say(self, text: str) -> None:
        if self._stream is not None:
            self._stream.write(text + "\n")
            self._stream.flush()

    def update(self, stats: CaptureStats, final: bool = False) -> None:
        if self._stream is None:
            return
        now = time.monotonic()
        counts = (stats.events, stats.occurrences)
        if self._tty:
            if final or now - self._last >= _PROGRESS_TTY:
                self._stream.write(f"\r{_progress_text(stats)}\x1b[K" + ("\n" if final else ""))
                self._stream.flush()
                self._last = now
        elif counts != self._shown and (final or now - self._last >= _PROGRESS_LINES):
            self.say(_progress_text(stats))
            self._last, self._shown = now, counts


def _progress_text(stats: CaptureStats) -> str:
    return (f"kubevents capture: {stats.events} events, {stats.occurrences} occurrences, "
            f"{format_duration(stats.elapsed)} elapsed")


# --- The capture ----------------------------------------------------------------------------------------------

class Capture:
    """A capture of a cluster's Events to a trace file (see the module docs); ``run()`` runs it, ``stats``
    holds its counts as it runs and once it ended, ``watching`` is set once it is under way.

    * ``path``: the trace to write, ``.jsonl`` (JSON Lines) or ``.parquet``; it is overwritten.
    * ``duration``: seconds to capture (None: until ``stop`` is set or Ctrl-C).
    * ``namespaces``: the namespaces to watch (None or empty: all of them, in one watch).
    * ``api``: ``"core/v1"`` (default) or ``"events.k8s.io/v1"``, the API to list and watch.
    * ``api_client``: a ``kubernetes.client.ApiClient`` to use; else one from ``kubeconfig`` (a path) and
      ``context``, or, in a pod, the pod's service account (``KUBERNETES_SERVICE_HOST``), else the default
      kubeconfig (``KUBECONFIG``, ``~/.kube/config``).
    * ``progress``: a text stream for the progress line, or True for stderr.
    * ``stop``: a ``threading.Event`` that ends the capture when set.

    Bad arguments raise ``ValueError``/``TypeError`` here, before anything is contacted.
    """

    def __init__(self, path: str | os.PathLike[str], *, duration: float | None = None,
                 namespaces: Iterable[str] | None = None, api: str = "core/v1", api_client: Any = None,
                 kubeconfig: str | os.PathLike[str] | None = None, context: str | None = None,
                 progress: bool | TextIO = False, stop: threading.Event | None = None) -> None:
        self.path = os.fspath(path)
        self._make_writer = _writer_for(self.path)
        if duration is not None:
            if isinstance(duration, bool) or not isinstance(duration, (int, float)):
                raise TypeError(f"duration: expected seconds (a number) or None, got {type(duration).__name__}")
            if not 0 < duration < float("inf"):
                raise ValueError(f"duration: expected seconds > 0, got {duration!r}")
        self.duration = duration
        if isinstance(namespaces, str):
            raise TypeError("namespaces: expected a list of namespaces, got a str")
        self.namespaces = list(dict.fromkeys(namespaces or []))
        for ns in self.namespaces:
            if not isinstance(ns, str) or not ns or "/" in ns:
                raise ValueError(f"namespaces: {ns!r} is not a namespace")
        if api not in APIS:
            raise ValueError(f"api: expected one of {', '.join(APIS)}, got {api!r}")
        self.api = api
        self._api_client = api_client
        self._kubeconfig = None if kubeconfig is None else os.fspath(kubeconfig)
        self._context = context
        self._progress = _Progress(sys.stderr if progress is True else (progress or None))
        self._stop = stop if stop is not None else threading.Event()
        self.stats = CaptureStats()
        self.watching = threading.Event()
        """Set once every watch has listed the Events there: what happens from then on is captured."""

    @property
    def scope(self) -> str:
        """What is watched: ``core/v1 Events in all namespaces``."""
        where = "all namespaces" if not self.namespaces else \
            ("namespace " if len(self.namespaces) == 1 else "namespaces ") + ", ".join(self.namespaces)
        return f"{self.api} Events in {where}"

    def run(self) -> CaptureStats:
        """Captures until the duration ends, ``stop`` is set or Ctrl-C (raised again once the file is closed);
        returns the stats. Raises ``CaptureError`` when the server refuses the list or the watch (what was
        captured until then is written)."""
        client, own_client = self._client()
        try:
            return self._run(client)
        finally:
            if own_client:
                client.close()

    def _client(self) -> tuple[Any, bool]:
        if self._api_client is not None:
            return self._api_client, False
        kubernetes = _kubernetes()
        try:
            if self._kubeconfig is None and self._context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
                configuration = kubernetes.client.Configuration()
                kubernetes.config.load_incluster_config(client_configuration=configuration)
                return kubernetes.client.ApiClient(configuration), True
            return kubernetes.config.new_client_from_config(config_file=self._kubeconfig, context=self._context), True
        except kubernetes.config.ConfigException as e:
            raise CaptureError(f"no cluster to capture from: {e}") from None

    def _calls(self, client: Any) -> list[tuple[str, Callable[..., Any]]]:
        k8s = _kubernetes().client
        api = k8s.CoreV1Api(client) if self.api == "core/v1" else k8s.EventsV1Api(client)
        if not self.namespaces:
            return [("all namespaces", api.list_event_for_all_namespaces)]

        def namespaced(ns: str) -> Callable[..., Any]:
            return lambda **options: api.list_namespaced_event(ns, **options)

        return [(f"namespace {ns}", namespaced(ns)) for ns in self.namespaces]

    def _run(self, client: Any) -> CaptureStats:
        stats, counts, reorder = self.stats, _Counts(self.stats), _Reorder()
        out: queue.Queue[tuple[Any, ...]] = queue.Queue()
        stopping = threading.Event()
        watches = [_Watch(call, where, out, stopping) for where, call in self._calls(client)]
        writer = self._make_writer(self.path)
        start = time.monotonic()
        deadline = None if self.duration is None else start + self.duration
        waiting = set(watches)  # those whose first list has not come yet

        def handle(message: tuple[Any, ...]) -> None:
            kind, watch, *rest = message
            if kind == "error":
                raise rest[0]
            if kind == "restart":
                stats.restarts += 1
            elif kind == "list":
                items, first = rest
                for item in items:
                    reorder.push(counts.report(item, existing=first))
                if first:
                    waiting.discard(watch)
                    if not waiting:
                        self.watching.set()
                        self._progress.say(f"kubevents capture: capturing {self.scope} to {self.path}"
                                           + (f" for {format_duration(self.duration)}" if self.duration else "")
                                           + " (Ctrl-C to stop)")
            else:
                reorder.push(counts.report(rest[0]))

        try:
            for w in watches:
                w.start()
            while not self._stop.is_set():
                now = time.monotonic()
                stats.elapsed = now - start
                if deadline is not None and now >= deadline:
                    break
                try:
                    message = out.get(timeout=min(0.2, deadline - now) if deadline is not None else 0.2)
                except queue.Empty:
                    pass
                else:
                    handle(message)
                writer.write(reorder.ready())
                self._progress.update(stats)
        finally:
            stopping.set()
            for w in watches:
                w.stop()
            for w in watches:
                w.join(1.0)
            # What the watches had delivered is captured too.
            while True:
                try:
                    message = out.get_nowait()
                except queue.Empty:
                    break
                if message[0] in ("list", "event"):
                    handle(message)
            try:
                writer.write(reorder.rest())
            finally:
                writer.close()
                stats.elapsed = time.monotonic() - start
                self._progress.update(stats, final=True)
        return stats


def capture(path: str | os.PathLike[str], *, duration: float | None = None, namespaces: Iterable[str] | None = None,
            api: str = "core/v1", api_client: Any = None, kubeconfig: str | os.PathLike[str] | None = None,
            context: str | None = None, progress: bool | TextIO = False,
            stop: threading.Event | None = None) -> CaptureStats:
    """Captures a cluster's Events to the trace ``path`` (``.jsonl`` or ``.parquet``) and returns the counts;
    the arguments are :class:`Capture`'s, the behaviour is in the module docs.

    ``capture("incident.jsonl", duration=600)`` captures ten minutes of every namespace's Events with the
    default kubeconfig; ``kubevents.simulate("incident.jsonl")`` replays them."""
    return Capture(path, duration=duration, namespaces=namespaces, api=api, api_client=api_client,
                   kubeconfig=kubeconfig, context=context, progress=progress, stop=stop).run()
