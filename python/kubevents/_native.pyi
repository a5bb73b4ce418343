"""Type stubs for the native module ``kubevents._native`` (Rust, pyo3)."""

import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from os import PathLike
from typing import Any, Literal, Protocol, Self, TypeAlias, TypedDict, final

__all__ = [
    "__version__",
    "DEFAULT_QPS",
    "CorrelateResult",
    "Correlator",
    "Decisions",
    "FakeClock",
    "IntervalClock",
    "RealClock",
    "Simulation",
    "make_event",
    "simulate",
    # -- recording pipeline --
    "Broadcaster",
    "Recorder",
    "Watcher",
    "object_reference",
    "register_kind",
    # Tuning lab.
    "replay_grid",
    "_check_grid",
]

__version__: str
"""The package's version (Cargo.toml's, as in the distribution's metadata)."""

# The core's option defaults and bounds: the Python code reads them here rather than copying them.

__all__ += [
    "CHANNEL_CAPACITY",
    "DEFAULT_BURST",
    "DEFAULT_CATCH_UP_WAIT",
    "DEFAULT_FULL_CHANNEL",
    "DEFAULT_LRU_CACHE_SIZE",
    "DEFAULT_MAX_EVENTS",
    "DEFAULT_MAX_INTERVAL",
    "DEFAULT_MAX_TRIES",
    "DEFAULT_QUEUE_LENGTH",
    "DEFAULT_REQUEST_TIMEOUT",
    "DEFAULT_SLEEP_DURATION",
    "DEFAULT_WINDOW",
    "DEFAULT_WORKERS",
    "EVENTED_CACHE_UPDATE_PERIOD",
    "EVENTED_MAX_STREAM_RETRIES",
    "EVENTED_RELIST_PERIOD",
    "EVENTED_RELIST_THRESHOLD",
    "GRID_OPTIONS",
    "INSPECT_CONCURRENCY",
    "MAX_REQUEST_TIMEOUT",
    "MAX_WORKERS",
    "RELIST_PERIOD",
    "RELIST_THRESHOLD",
    "_count_option",
    "_request_timeout",
    "_seconds_option",
]

DEFAULT_LRU_CACHE_SIZE: int
"""client-go's ``maxLruCacheEntries``: the bound of each of the correlator's caches."""
DEFAULT_BURST: int
"""client-go's ``defaultSpamBurst``: events per source and object before the spam filter's rate applies."""
DEFAULT_QPS: float
"""client-go's default spam refill rate, ``float32(1/300)`` widened to a float."""
DEFAULT_MAX_EVENTS: int
"""client-go's ``defaultAggregateMaxEvents``: distinct messages of a group before they are combined."""
DEFAULT_MAX_INTERVAL: int
"""client-go's ``defaultAggregateIntervalInSeconds``."""
GRID_OPTIONS: tuple[str, ...]
"""The correlator's options as ``simulate`` names them: the ones a sweep's grid may vary."""
DEFAULT_MAX_TRIES: int
"""client-go's ``maxTriesPerEvent``: tries of a failing write, the first included."""
DEFAULT_SLEEP_DURATION: float
"""client-go's ``defaultSleepDuration``, seconds between tries (the first sleep is randomised)."""
DEFAULT_QUEUE_LENGTH: int
"""client-go's ``maxQueuedEvents``: a broadcaster's incoming queue."""
DEFAULT_FULL_CHANNEL: Literal["drop", "wait"]
"""What a broadcaster's full incoming queue does by default (client-go's ``DropIfChannelFull``)."""
DEFAULT_CATCH_UP_WAIT: float
"""Seconds a recorder call may wait for fast watchers that fell behind."""
DEFAULT_WORKERS: int
"""A sink's delivery workers by default: one, as client-go's single sink goroutine."""
MAX_WORKERS: int
"""The most delivery workers a sink may have."""
DEFAULT_REQUEST_TIMEOUT: float
"""Seconds the client sinks give each request unless told otherwise (the official clients wait forever)."""
MAX_REQUEST_TIMEOUT: float
"""The longest request timeout the client sinks take, in seconds."""
DEFAULT_WINDOW: float
"""Seconds of the windows of the lab's peak write rates."""
RELIST_PERIOD: float
"""The kubelet's ``genericPlegRelistPeriod``, seconds."""
RELIST_THRESHOLD: float
"""The kubelet's ``genericPlegRelistThreshold``, seconds without a relist before the PLEG is unhealthy."""
CHANNEL_CAPACITY: int
"""The kubelet's ``plegChannelCapacity``."""
INSPECT_CONCURRENCY: int
"""Inspections of one relist at once: the kubelet's serial loop."""
EVENTED_RELIST_PERIOD: float
"""The generic PLEG's relist period while EventedPLEG is in use, seconds."""
EVENTED_RELIST_THRESHOLD: float
"""The generic PLEG's relist threshold while EventedPLEG is in use, seconds."""
EVENTED_MAX_STREAM_RETRIES: int
"""Failed CRI event streams before EventedPLEG falls back to relisting."""
EVENTED_CACHE_UPDATE_PERIOD: float
"""Seconds between EventedPLEG's global cache updates."""

def _request_timeout(value: _DurationLike) -> float:
    """The client sinks' ``request_timeout`` checked (more than 0, at most ``MAX_REQUEST_TIMEOUT``), in
    seconds."""

def _count_option(value: int, name: str) -> int:
    """An option ``name`` that counts something, checked: at least 1."""

def _seconds_option(value: _DurationLike, name: str, *, positive: bool) -> float:
    """A duration option ``name`` in seconds, checked: at least 0, or more than 0 when ``positive``."""

class _SupportsNow(Protocol):
    """Any clock: an object whose ``now()`` returns a datetime (naive = UTC) or epoch seconds."""

    def now(self) -> datetime | float | int: ...

_ClockLike: TypeAlias = RealClock | FakeClock | IntervalClock | _SupportsNow
_TimeLike: TypeAlias = datetime | float | int
_DurationLike: TypeAlias = timedelta | float | int

_Event: TypeAlias = dict[str, Any]
"""A core/v1 Event in the Kubernetes JSON shape (camelCase keys, RFC 3339 timestamps)."""

_Record: TypeAlias = Mapping[str, Any]
"""A trace record (see ``kubevents.traces``)."""

@final
class RealClock:
    """The system clock."""

    def __new__(cls) -> Self: ...
    def now(self) -> datetime:
        """The current time, an aware UTC datetime."""

@final
class FakeClock:
    """A clock that moves only when told to; nanosecond resolution inside.

    ``start`` is a datetime (naive = UTC) or epoch seconds; None starts at the current time.
    """

    def __new__(cls, start: _TimeLike | None = None) -> Self: ...
    def now(self) -> datetime:
        """The clock's time, an aware UTC datetime (microsecond precision)."""
    def now_ns(self) -> int:
        """The clock's time in nanoseconds since the Unix epoch."""
    def step(self, seconds: _DurationLike) -> datetime:
        """Moves the clock by seconds or a timedelta (negative moves it back); returns the new time."""
    def set(self, t: _TimeLike) -> None:
        """Sets the clock to a datetime or epoch seconds."""

@final
class IntervalClock:
    """client-go's ``SimpleIntervalClock``: every ``now()`` first advances by ``interval``."""

    def __new__(cls, start: _TimeLike, interval: _DurationLike) -> Self: ...
    def now(self) -> datetime:
        """Advances by the interval and returns the new time."""
    def peek(self) -> datetime:
        """The last time handed out, without advancing."""

@final
class CorrelateResult:
    """What ``Correlator.correlate`` decided for one event."""

    @property
    def event(self) -> _Event | None:
        """The event to write, or None when skipped. Write it as a patch when ``event["count"] > 1``."""
    @property
    def patch(self) -> bytes | None:
        """The strategic merge patch for a repeat (``{"count":N,"lastTimestamp":...,"message":...}``)."""
    @property
    def skip(self) -> bool:
        """True when the spam filter rejected the event."""
    @property
    def aggregated(self) -> bool:
        """True when the event was replaced by its group's "(combined from similar events)" event."""

@final
class Correlator:
    """client-go's ``EventCorrelator``: aggregate, then count (and build a patch), then spam-filter.

    A zero option selects client-go's default; negative options raise ``ValueError``. ``qps`` is stored
    as a float32, as in client-go. ``key_func(event) -> (aggregate_key, local_key)``,
    ``message_func(event) -> str`` and ``spam_key_func(event) -> str`` replace the native key functions.
    Thread-safe; the GIL is released while the native code runs.
    """

    def __new__(
        cls,
        *,
        clock: _ClockLike | None = None,
        lru_cache_size: int = 4096,
        burst: int = 25,
        qps: float = ...,
        max_events: int = 10,
        max_interval: int = 600,
        key_func: Callable[[_Event], tuple[str, str]] | None = None,
        message_func: Callable[[_Event], str] | None = None,
        spam_key_func: Callable[[_Event], str] | None = None,
    ) -> Self: ...
    def correlate(self, event: Mapping[str, Any]) -> CorrelateResult:
        """Aggregates, counts and spam-filters one event. Reads the clock twice."""
    def update_state(self, event: Mapping[str, Any]) -> None:
        """Records the API server's answer for a write (name, resourceVersion, count, firstTimestamp)."""

def make_event(
    obj_ref: Mapping[str, Any],
    type: str,
    reason: str,
    message: str,
    *,
    source: str | Mapping[str, str],
    clock: _ClockLike | None = None,
    annotations: Mapping[str, str] | None = None,
) -> _Event:
    """The event client-go's recorder builds (``makeEvent``) for an ObjectReference dict at ``clock.now()``.

    ``source`` is a component name or ``{"component": ..., "host": ...}``.
    """

class _Totals(TypedDict):
    events: int
    creates: int
    patches: int
    skips: int
    aggregated: int

class _Object_Totals(TypedDict):
    kind: str
    namespace: str
    name: str
    events: int
    writes: int
    creates: int
    patches: int
    skips: int

class _Decision(TypedDict):
    index: int
    action: str
    name: str | None
    count: int | None
    message: str | None
    patch: str | None
    source_component: str
    source_host: str

class _Counts(TypedDict):
    events: int
    writes: int
    creates: int
    patches: int
    skips: int
    aggregated: int

class _SourceTotals(_Counts):
    source_component: str
    source_host: str

class _ComponentTotals(_Counts):
    source_component: str
    sources: int

@final
class Decisions(Iterator[_Decision]):
    """The decisions of a replay, computed in batches with the GIL released."""

    def __iter__(self) -> Decisions: ...
    def __next__(self) -> _Decision: ...
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The decisions not iterated yet as an Arrow C stream (``pyarrow.table(sim.decisions())``)."""

__all__ += ["TRACE_COLUMNS", "ArrowTable", "_check_table", "_merge_sources", "_records_table", "_replay_sources",
            "_split_sources"]

TRACE_COLUMNS: list[str]
"""The columns of a trace table (``kubevents.traces.TABLE_COLUMNS``)."""

@final
class ArrowTable:
    """Record batches made by kubevents, for ``pyarrow.table(t)`` or ``polars.DataFrame(t)``."""

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...
    def __len__(self) -> int: ...

class _ArrowStream(Protocol):
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...

def _records_table(trace: str | PathLike[str] | Iterable[_Record]) -> ArrowTable: ...
def _check_table(table: _ArrowStream, *, data: bool) -> None: ...

@final
class Simulation:
    """The result of ``simulate``."""

    @property
    def totals(self) -> _Totals:
        """Counts of the replay; ``creates + patches + skips == events``."""
    @property
    def correlators(self) -> Literal["per-source", "shared"]:
        """One correlator per event source (as in a cluster) or one for the whole trace."""
    def top_objects(self, n: int = 10) -> list[_Object_Totals]:
        """The ``n`` objects with the most API writes; needs ``simulate(..., per_object=True)``."""
    def by_source(self, n: int | None = None) -> list[_SourceTotals]:
        """Each source's counts, most API writes first (``n`` of them, or all)."""
    def by_component(self, n: int | None = None) -> list[_ComponentTotals]:
        """Each component's counts (its sources added up), most API writes first."""
    def to_arrow(self, objects: bool = False, by: Literal["source", "component"] | None = None) -> ArrowTable:
        """The metrics as an Arrow table: one row, or one per object (``objects=True``), source or component
        (``by=``)."""
    def decisions(self) -> Decisions:
        """Replays the trace again and yields one decision per input event."""
    # Tuning lab: replay metrics (``simulate(..., metrics=True)``).
    @property
    def metrics(self) -> _Metrics:
        """The metrics of the replay (defined in ``kubevents.lab``); needs ``metrics=True``."""
    def object_metrics(self, n: int | None = None) -> list[_ObjectMetrics]:
        """Each object's metrics, most API writes first; needs ``metrics=True, per_object=True``."""
    def source_metrics(self, n: int | None = None) -> list[_SourceMetrics]:
        """Each source's metrics, most API writes first; needs ``metrics=True`` and one correlator per source."""
    def component_metrics(self, n: int | None = None) -> list[_ComponentMetrics]:
        """Each component's metrics (its sources' writes together); needs ``metrics=True``, per source."""
    def to_pandas(self, objects: bool = False, by: Literal["source", "component"] | None = None) -> Any:
        """The metrics as a pandas DataFrame: one row, or one per object (``objects=True``), source or
        component (``by=``)."""

def simulate(
    trace: str | PathLike[str] | Iterable[_Record] | _ArrowStream,
    *,
    lru_cache_size: int = 4096,
    burst: int = 25,
    qps: float = ...,
    max_events: int = 10,
    max_interval: int = 600,
    key_func: Callable[[_Event], tuple[str, str]] | None = None,
    message_func: Callable[[_Event], str] | None = None,
    spam_key_func: Callable[[_Event], str] | None = None,
    per_object: bool = False,
    metrics: bool = False,
    window: _DurationLike | None = None,
    correlators: Literal["per-source", "shared"] | None = None,
    threads: int | None = None,
) -> Simulation:
    """Replays a trace (a JSON Lines path, an iterable of records or a table) as ``recordToSink`` would, on
    a virtual clock, with a sink that never fails, one correlator per event source (``correlators="shared"``:
    one for all) on ``threads`` threads. ``kubevents.simulate`` adds executors and partitioned Parquet."""

def _replay_sources(trace: str | PathLike[str] | Iterable[_Record] | _ArrowStream, **options: Any) -> bytes:
    """The replays of each source of a trace under ``simulate``'s options (``threads`` too), encoded for
    ``_merge_sources``."""

def _merge_sources(
    parts: Iterable[bytes],
    trace: str | PathLike[str] | Iterable[_Record] | _ArrowStream | None = None,
    **options: Any,
) -> Simulation:
    """A ``Simulation`` of sources replayed apart by ``_replay_sources`` under ``simulate``'s options."""

def _split_sources(
    trace: str | PathLike[str] | Iterable[_Record] | _ArrowStream,
) -> list[tuple[str, str, ArrowTable]]:
    """The records of each source of a trace as a table of their own, in trace order."""

# -- recording pipeline --

class _Sink(Protocol):
    """An event sink: ``create(event) -> dict`` and ``patch(event, patch) -> dict``, plain or ``async def``."""

    def create(self, event: _Event, /) -> Any: ...
    def patch(self, event: _Event, patch: bytes, /) -> Any: ...

class _LastError(TypedDict):
    type: str
    status: int | None
    message: str

class _SinkHealth(TypedDict):
    """A sink's health: its class, whether its last write succeeded, since when it fails, its last success
    (RFC 3339 on the broadcaster's clock), its last error, failed writes, and events given up by reason."""

    sink: str
    up: bool
    failing_since: str | None
    last_success: str | None
    last_error: _LastError | None
    failed_writes: int
    given_up: dict[str, int]

class _Stats(TypedDict):
    received: int
    dropped_incoming: int
    dropped_after_shutdown: int
    dropped_watchers: dict[str, int]
    aggregated: int
    deduplicated: int
    skipped: int
    created: int
    patched: int
    create_errors: int
    patch_errors: int
    retries: int
    abandoned: int
    handler_errors: int
    recorder_waits: int
    pending: int
    sinks: dict[str, _SinkHealth]

@final
class Watcher:
    """A started watcher of a ``Broadcaster`` or an ``EventsBroadcaster``."""

    @property
    def name(self) -> str:
        """The watcher's name in the broadcaster's ``stats()["dropped_watchers"]``."""
    @property
    def dropped(self) -> int:
        """Events this watcher lost because its queue was full."""
    def stop(self) -> None:
        """Stops the watcher: it gets no more events, and what it had queued is discarded (as in client-go)."""

@final
class Recorder:
    """client-go's ``EventRecorder``: builds events for objects and queues them. A call never waits for a slow
    watcher; when a fast one (a no-op sink, a logger) has fallen more than half a queue behind, it waits for
    it, without the GIL, for at most the broadcaster's ``catch_up_wait`` (5 ms by default; never on a thread
    running an asyncio loop, nor on a broadcaster's own threads).

    ``obj`` is a manifest dict, an ObjectReference dict, a mapping with ``metadata`` (kopf bodies), an
    official client model (``V1Pod`` ...), or an object of a class given to ``register_kind``. ``type`` must
    be ``"Normal"`` or ``"Warning"`` (else ``ValueError``; client-go logs and drops instead).
    """

    @property
    def source(self) -> dict[str, str]:
        """The event source: ``{"component": ..., "host": ...}``."""
    def event(self, obj: Any, type: str, reason: str, message: str, *, field_path: str | None = None) -> None:
        """Records an event for ``obj`` with ``message`` as given."""
    def eventf(
        self, obj: Any, type: str, reason: str, fmt: str, *args: Any, field_path: str | None = None
    ) -> None:
        """Records an event whose message is ``fmt % args`` (``fmt`` as it is when no args are given)."""
    def annotated_eventf(
        self,
        obj: Any,
        annotations: Mapping[str, str] | None,
        type: str,
        reason: str,
        fmt: str,
        *args: Any,
        field_path: str | None = None,
    ) -> None:
        """``eventf`` with annotations on the event."""
    def past_eventf(
        self,
        obj: Any,
        timestamp: _TimeLike,
        type: str,
        reason: str,
        fmt: str,
        *args: Any,
        field_path: str | None = None,
    ) -> None:
        """``eventf`` for something that happened at ``timestamp``, which becomes the event's first and last
        timestamp."""

@final
class Broadcaster:
    """client-go's ``EventBroadcaster``: recorders queue events; watchers log them, call back, or correlate
    them and write them to sinks with client-go's retries. Every drop is counted in ``stats()``.

    Use it as a context manager (``with`` or ``async with``) to shut it down on exit.

    ``sleep_duration`` (seconds or a timedelta) is ``DEFAULT_SLEEP_DURATION`` when None. ``catch_up_wait``
    (seconds or a timedelta, ``DEFAULT_CATCH_UP_WAIT`` when None) is how long a recorder call may wait, without
    the GIL, for fast watchers whose queue it left more than half full; 0 never waits, and full queues drop as
    in client-go.

    ``name`` labels its metrics (``kubevents.metrics``) and its log lines; by default ``Broadcaster-<n>``, n
    counting the unnamed broadcasters made in this process. A failing sink logs at most one line per
    ``log_interval`` seconds (30 by default) while it fails (see "What an operator sees in an outage").
    """

    def __new__(
        cls,
        *,
        clock: _ClockLike | None = None,
        sleep_duration: _DurationLike | None = None,
        max_tries: int = 12,
        queue_length: int = 1000,
        full_channel: Literal["drop", "wait"] = "drop",
        lru_cache_size: int = 4096,
        burst: int = 25,
        qps: float = ...,
        max_events: int = 10,
        max_interval: int = 600,
        key_func: Callable[[_Event], tuple[str, str]] | None = None,
        message_func: Callable[[_Event], str] | None = None,
        spam_key_func: Callable[[_Event], str] | None = None,
        catch_up_wait: _DurationLike | None = None,
        name: str | None = None,
        log_interval: _DurationLike | None = None,
    ) -> Self: ...
    @property
    def name(self) -> str:
        """The name that labels this broadcaster's metrics (``kubevents.metrics``)."""
    def new_recorder(self, component: str, host: str | None = None) -> Recorder:
        """A recorder whose events have source ``component`` (and ``host``)."""
    def start_recording_to_sink(self, sink: _Sink, *, workers: int = 1) -> Watcher:
        """Correlates every later event with a fresh correlator and writes it to ``sink`` with client-go's
        retries; up to ``workers`` writes at once (at most ``MAX_WORKERS``), the writes of one event in order."""
    def start_logging(self, logger: logging.Logger | Callable[[str], object] | None = None) -> Watcher:
        """Logs every later event as client-go's ``StartLogging`` does: at INFO on a ``logging.Logger``
        (default: the ``kubevents`` logger), or by calling ``logger(line)``."""
    def start_structured_logging(self, logger: logging.Logger | Callable[[str], object] | None = None) -> Watcher:
        """Logs every later event as client-go's ``StartStructuredLogging`` does (``Event occurred
        object="ns/name" fieldPath=... kind=... apiVersion=... type=... reason=... message=...``)."""
    def start_event_watcher(self, callback: Callable[[_Event], object]) -> Watcher:
        """Calls ``callback(event)`` for every later event, in order."""
    def shutdown(self, timeout: _DurationLike | None = None) -> _Stats:
        """Stops accepting events and delivers what is queued; returns the final stats, or raises
        ``TimeoutError`` when ``timeout`` passes first. Ctrl-C interrupts the wait; a ``KeyboardInterrupt``
        or ``SystemExit`` raised in a sink or callback is raised again here. ``RuntimeError`` when called on
        the asyncio loop of an async sink (use ``aclose()``)."""
    def aclose(self, timeout: _DurationLike | None = None) -> Awaitable[_Stats]:
        """``shutdown()`` for a coroutine: runs it off the loop, which goes on running async sinks."""
    def wait_idle(self, timeout: _DurationLike | None = None) -> bool:
        """Waits until nothing can happen without the clock moving; False if ``timeout`` passed first.
        Interrupted by Ctrl-C; ``RuntimeError`` on the asyncio loop of an async sink."""
    def stats(self) -> _Stats:
        """The counters."""
    def _exit_flush(self, timeout: float) -> tuple[str, int, int]: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> None: ...
    def __aenter__(self) -> Awaitable[Self]: ...
    def __aexit__(self, *exc: object) -> Awaitable[_Stats]: ...

def register_kind(kind: str, api_version: str, *, cls: type | None = None) -> None:
    """Makes a custom kind known: objects of ``kind`` without an ``apiVersion`` get ``api_version``, and
    objects of class ``cls`` (when given) get both."""

def object_reference(obj: Any, *, field_path: str | None = None) -> dict[str, str]:
    """The object reference kubevents puts in an event for ``obj``."""

__all__ += ["RecorderCheck"]

@final
class RecorderCheck:
    """The checks of ``Recorder``'s methods: each raises what the ``Recorder`` method of its name raises for the
    same arguments, and returns ``(message, object_reference)`` instead of recording. Used by
    ``kubevents.testing.FakeRecorder``."""

    def __new__(cls) -> Self: ...
    def event(
        self, obj: Any, type: str, reason: str, message: str, *, field_path: str | None = None
    ) -> tuple[str, dict[str, str]]:
        """``Recorder.event``'s checks."""
    def eventf(
        self, obj: Any, type: str, reason: str, fmt: str, *args: Any, field_path: str | None = None
    ) -> tuple[str, dict[str, str]]:
        """``Recorder.eventf``'s checks; the message is ``fmt % args``."""
    def annotated_eventf(
        self,
        obj: Any,
        annotations: Mapping[str, str] | None,
        type: str,
        reason: str,
        fmt: str,
        *args: Any,
        field_path: str | None = None,
    ) -> tuple[str, dict[str, str]]:
        """``Recorder.annotated_eventf``'s checks (the annotations must be a dict of str)."""
    def past_eventf(
        self,
        obj: Any,
        timestamp: _TimeLike,
        type: str,
        reason: str,
        fmt: str,
        *args: Any,
        field_path: str | None = None,
    ) -> tuple[str, dict[str, str]]:
        """``Recorder.past_eventf``'s checks (the timestamp must be a datetime or epoch seconds in range)."""

# -- events.k8s.io/v1 recording --

__all__ += [
    "DEFAULT_EVENTS_V1_CACHE_SIZE",
    "EventsBroadcaster",
    "EventsRecorder",
    "EventsRecorderCheck",
    "series_patch",
    "truncate_note",
]

DEFAULT_EVENTS_V1_CACHE_SIZE: int
"""The default bound of the events.k8s.io/v1 series cache (client-go's is unbounded)."""

_EventV1: TypeAlias = dict[str, Any]
"""An events.k8s.io/v1 Event in the Kubernetes JSON shape (camelCase keys, RFC 3339 timestamps)."""

class _EventsStats(TypedDict):
    received: int
    dropped_incoming: int
    dropped_after_shutdown: int
    dropped_watchers: dict[str, int]
    created: int
    patched: int
    create_errors: int
    patch_errors: int
    retries: int
    abandoned: int
    handler_errors: int
    recorder_waits: int
    pending: int
    observed: int
    first_occurrences: int
    series_started: int
    counted: int
    refresh_writes: int
    finish_writes: int
    forgotten: int
    evicted: int
    evicted_writes: int
    shutdown_writes: int
    writes_ok: int
    write_errors: int
    finish_rounds: int
    refresh_rounds: int
    pending_retries: int
    cache_len: int
    truncated_notes: int
    last_error: str | None
    sinks: dict[str, _SinkHealth]

class _SinkV1(Protocol):
    """A sink of events.k8s.io/v1 events: ``create(event)`` and ``patch(event, patch_bytes)``, plain or
    ``async def``, each returning the stored event (or None: written as sent)."""

    def create(self, event: _EventV1, /) -> Any: ...
    def patch(self, event: _EventV1, patch: bytes, /) -> Any: ...

@final
class EventsBroadcaster:
    """client-go's ``tools/events`` ``EventBroadcaster``: events.k8s.io/v1 events grouped into series and
    written to a sink with client-go's retries; a peer of ``Broadcaster`` on the same pipeline (watchers,
    drops counted, sink health, outage lines, shutdown and exit flush).

    Retries are at most ``max_tries`` attempts in all, ``sleep_duration`` seconds (jittered up to +25 %) apart
    on ``clock``; as in client-go, a 404 on a series patch turns into a create, and a 409 on the create of a
    series is retried. ``cache_size`` bounds the series cache. ``queue_length`` bounds the incoming queue and
    each watcher's (client-go: 1000); beyond it events are dropped and counted. ``catch_up_wait``, ``name``
    and ``log_interval`` are ``Broadcaster``'s. ``seed`` fixes the retry jitter (for reproducible tests).

    A ``KeyboardInterrupt`` or ``SystemExit`` raised in the sink abandons that event and is raised again by
    the next ``shutdown()`` or ``wait_idle()``. A broadcaster that is recording or has watchers and is not
    shut down is flushed at exit (``kubevents.set_exit_timeout``). One created before ``os.fork()`` raises
    ``RuntimeError`` in the child.
    """

    def __new__(
        cls,
        *,
        clock: _ClockLike | None = None,
        sleep_duration: _DurationLike | None = None,
        max_tries: int = 12,
        cache_size: int = 4096,
        queue_length: int = 1000,
        catch_up_wait: _DurationLike | None = None,
        name: str | None = None,
        log_interval: _DurationLike | None = None,
        seed: int | None = None,
    ) -> Self: ...
    @property
    def name(self) -> str:
        """The name that labels this broadcaster's metrics (``kubevents.metrics``) and its log lines."""
    def new_recorder(self, reporting_controller: str, reporting_instance: str | None = None) -> EventsRecorder:
        """A recorder for ``reporting_controller``; the instance defaults to ``<controller>-<hostname>``."""
    def start_recording_to_sink(self, sink: _SinkV1) -> Watcher:
        """Every later event goes through the series cache to ``sink``; async methods run on the loop running
        now. Once per broadcaster."""
    def start_event_watcher(self, callback: Callable[[_EventV1], object]) -> Watcher:
        """Calls ``callback(event)`` for every later event, in order, on a thread of the broadcaster."""
    def start_structured_logging(self, logger: logging.Logger | Callable[[str], object] | None = None) -> Watcher:
        """Logs every later event as client-go's ``StartStructuredLogging`` does (``Event occurred
        object="ns/name" kind=... apiVersion=... type=... reason=... action=... note=...``)."""
    def wait_idle(self, timeout: _DurationLike | None = None) -> bool:
        """Waits until every event recorded so far and everything due at the clock's present (retries,
        rounds) has been handled; False if ``timeout`` passed first. Interrupted by Ctrl-C; raises a
        ``KeyboardInterrupt`` or ``SystemExit`` the sink raised; ``RuntimeError`` from the sink or on the
        asyncio loop of an async sink."""
    def shutdown(self, timeout: _DurationLike | None = None) -> _EventsStats:
        """Writes what is queued, gives every pending retry one last attempt and every live series its final
        count; returns the final stats, or raises ``TimeoutError`` (the rest finishes in the background)."""
    def aclose(self, timeout: _DurationLike | None = None) -> Awaitable[_EventsStats]:
        """``shutdown()`` for a coroutine: runs it off the loop, which goes on running an async sink."""
    def stats(self) -> _EventsStats:
        """The counters, as ``Broadcaster.stats()``'s where both APIs have them, then the series cache's;
        never waits for a sink call."""
    def _exit_flush(self, timeout: float) -> tuple[str, int, int]: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> None: ...
    def __aenter__(self) -> Awaitable[Self]: ...
    def __aexit__(self, *exc: object) -> Awaitable[_EventsStats]: ...

@final
class EventsRecorder:
    """client-go's ``tools/events`` ``EventRecorder`` for one reporting controller and instance (made by
    ``EventsBroadcaster.new_recorder``); ``eventf`` never blocks. ``type`` must be ``"Normal"`` or
    ``"Warning"``; ``regarding`` and ``related`` are objects as ``Recorder`` takes them."""

    @property
    def reporting_controller(self) -> str: ...
    @property
    def reporting_instance(self) -> str: ...
    def eventf(
        self, regarding: Any, related: Any, type: str, reason: str, action: str, note: str, *args: Any
    ) -> None:
        """Records an event about ``regarding`` (and ``related``): ``note % args`` when args are given."""
    def annotated_eventf(
        self,
        regarding: Any,
        related: Any,
        annotations: Mapping[str, str] | None,
        type: str,
        reason: str,
        action: str,
        note: str,
        *args: Any,
    ) -> None:
        """``eventf`` with annotations on the event's metadata."""

@final
class EventsRecorderCheck:
    """The checks of ``EventsRecorder``'s methods, for ``kubevents.testing.FakeEventsRecorder``: each raises
    what the ``EventsRecorder`` method of its name raises, and returns the note and the event it would record."""

    def __new__(cls) -> Self: ...
    def eventf(
        self, regarding: Any, related: Any, type: str, reason: str, action: str, note: str, *args: Any
    ) -> tuple[str, _EventV1]: ...
    def annotated_eventf(
        self,
        regarding: Any,
        related: Any,
        annotations: Mapping[str, str] | None,
        type: str,
        reason: str,
        action: str,
        note: str,
        *args: Any,
    ) -> tuple[str, _EventV1]: ...

def truncate_note(note: str) -> str:
    """``note`` cut to the API server's 1024-byte limit at a UTF-8 boundary with a ``" ..."`` suffix, or
    unchanged."""

def series_patch(event: Mapping[str, Any]) -> bytes:
    """The strategic merge patch sent for a series: ``{"series":{"count":…,"lastObservedTime":…}}``."""

# --- PLEG (kubevents.pleg) ---

__all__ += [
    "EventChannel",
    "EventedPLEG",
    "GenericPLEG",
    "Pod",
    "PodCache",
    "PodLifecycleEvent",
    "PodList",
    "diff",
]

_ContainerLike: TypeAlias = Mapping[str, str] | tuple[str, str]
"""A container or sandbox: ``{"id", "state"}`` or ``(id, state)``; state is created/running/exited/unknown."""

_PodLike: TypeAlias = Mapping[str, Any] | tuple[str, str, str, Iterable[_ContainerLike], Iterable[_ContainerLike]] | Pod
"""A runtime pod: a dict (``id``, ``name``, ``namespace``, ``containers``, ``sandboxes``), a
``(id, name, namespace, containers, sandboxes)`` tuple, or a ``Pod``."""

_Status: TypeAlias = dict[str, Any]
"""A pod status dict; the PLEG reads ``ips``, ``sandbox_statuses`` and ``timestamp`` and keeps the rest."""

class _Runtime(Protocol):
    """What ``GenericPLEG`` relists: ``get_pods()`` and ``get_pod_status(pod)`` (pod given as a dict).

    With ``on_demand_relist=True`` it also needs ``get_pod(uid)``: one pod in a form ``get_pods()`` may list
    it, or None when the runtime has nothing of the pod (a protocol cannot mark a method optional).
    """

    def get_pods(self) -> Iterable[_PodLike] | PodList: ...
    def get_pod_status(self, pod: dict[str, Any]) -> _Status | tuple[_Status | None, BaseException | None]: ...

class _RuntimeService(Protocol):
    """The CRI event stream: ``get_container_events()`` yields CRI event dicts until it ends or fails."""

    def get_container_events(self) -> Iterable[Mapping[str, Any]]: ...

@final
class Pod:
    """A runtime pod, checked and converted once."""

    def __new__(
        cls,
        id: str,
        name: str = "",
        namespace: str = "",
        containers: Iterable[_ContainerLike] | None = None,
        sandboxes: Iterable[_ContainerLike] | None = None,
    ) -> Self: ...
    @property
    def id(self) -> str:
        """The pod UID."""
    @property
    def name(self) -> str:
        """The pod name."""
    @property
    def namespace(self) -> str:
        """The pod namespace."""
    @property
    def containers(self) -> list[dict[str, str]]:
        """The containers as ``{"id", "state"}`` dicts."""
    @property
    def sandboxes(self) -> list[dict[str, str]]:
        """The sandboxes as ``{"id", "state"}`` dicts."""
    def to_dict(self) -> dict[str, Any]:
        """The pod as a dict."""

@final
class PodList:
    """A whole runtime listing converted in one call: what ``get_pods()`` may return for large nodes."""

    def __new__(cls, pods: Iterable[_PodLike]) -> Self: ...
    def __len__(self) -> int: ...
    def to_list(self) -> list[dict[str, Any]]:
        """The pods as dicts."""

@final
class PodLifecycleEvent:
    """``PodLifecycleEvent``: ``id`` is the pod UID, ``type`` one of ContainerStarted, ContainerDied,
    ContainerRemoved, ContainerChanged, PodSync, ConditionMet; ``data`` the container id or None."""

    def __new__(cls, id: str, type: str, data: str | None = None) -> Self: ...
    @property
    def id(self) -> str:
        """The pod UID."""
    @property
    def type(self) -> str:
        """The event type."""
    @property
    def data(self) -> str | None:
        """The container id, None for PodSync and ConditionMet."""
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...

def diff(old_pod: _PodLike | None, new_pod: _PodLike | None) -> list[PodLifecycleEvent]:
    """The lifecycle events between two listings of one pod, in the kubelet's order (``ContainerChanged``
    included). An unknown state raises ``ValueError``."""

@final
class PodCache:
    """The kubelet's pod status cache. ``evented=True`` rejects ``set`` calls older than the stored entry.

    Made before ``os.fork()``, it raises ``RuntimeError`` when used in the child (as do ``EventChannel``,
    ``GenericPLEG`` and ``EventedPLEG``).
    """

    def __new__(cls, *, evented: bool = False) -> Self: ...
    @property
    def evented(self) -> bool:
        """Whether the EventedPLEG rule is on."""
    def get(self, uid: str) -> tuple[_Status | None, BaseException | None]:
        """``(status, error)``; a miss gives ``({"id": uid}, None)``."""
    def set(
        self, uid: str, status: _Status | None, error: BaseException | None = None, timestamp: _TimeLike | None = None
    ) -> bool:
        """Stores status and error modified at ``timestamp`` (None: Go's zero time); False when rejected."""
    def delete(self, uid: str) -> None:
        """Removes the entry without waking waiters."""
    def update_time(self, timestamp: _TimeLike) -> None:
        """Sets the global timestamp and wakes the waiters it satisfies."""
    def set_observed_time(self, uid: str, timestamp: _TimeLike) -> None:
        """``SetObservedTime``: the pod is fresh as of ``timestamp``, its status unchanged; wakes that pod's
        waiters as ``update_time`` would."""
    def observed_time(self, uid: str) -> datetime | None:
        """The pod's latest ``set_observed_time``, None if it has none."""
    @property
    def timestamp(self) -> datetime | None:
        """The global timestamp, None before the first ``update_time``."""
    def __len__(self) -> int: ...
    @property
    def waiters(self) -> int:
        """Number of pending ``get_newer_than`` waiters."""
    def get_newer_than(
        self, uid: str, t: _TimeLike, timeout: _DurationLike | None = None
    ) -> tuple[_Status | None, BaseException | None]:
        """Blocks (GIL released) until the pod's data or the global timestamp is newer than ``t``; raises
        ``TimeoutError`` after ``timeout``. Ctrl-C interrupts the wait."""
    def get_newer_than_async(self, uid: str, t: _TimeLike) -> Awaitable[tuple[_Status | None, BaseException | None]]:
        """The awaitable form of ``get_newer_than``."""

@final
class EventChannel:
    """The bounded event channel: sends never block, iteration blocks with the GIL released."""

    def __new__(cls, capacity: int = 1000) -> Self: ...
    def recv(self, timeout: _DurationLike | None = None) -> PodLifecycleEvent | None:
        """The next event; None after ``timeout`` or when closed and empty. Ctrl-C interrupts the wait."""
    def try_recv(self) -> PodLifecycleEvent | None:
        """The next buffered event, or None."""
    def drain(self) -> list[PodLifecycleEvent]:
        """Every buffered event, oldest first."""
    def __len__(self) -> int: ...
    @property
    def capacity(self) -> int:
        """How many events it holds."""
    @property
    def dropped(self) -> int:
        """Events dropped because it was full."""
    def close(self) -> None:
        """Ends iteration after the buffered events; later sends are dropped."""
    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
    def __iter__(self) -> Self: ...
    def __next__(self) -> PodLifecycleEvent: ...
    def __aiter__(self) -> Self: ...
    def __anext__(self) -> Awaitable[PodLifecycleEvent]: ...
    def _on_ready(self, callback: Callable[[], object]) -> None:
        """Calls ``callback()`` once when an event is buffered or the channel closes."""

class _Histogram(TypedDict):
    """Cumulative counts per upper bound (seconds; Prometheus' default buckets), the count (``+Inf``) and the
    sum in seconds."""

    buckets: list[tuple[float, int]]
    count: int
    sum: float

class _PlegStats(TypedDict):
    relists: int
    relist_failures: int
    relist_duration_total: float
    relist_duration_last: float
    events_sent: int
    events_dropped: int
    inspections: int
    inspection_errors: int
    inspection_timeouts: int
    reinspections: int
    pod_relists: int
    pod_relist_failures: int
    relist_requests_queued: int
    relist_requests_skipped: int
    relist_requests_dropped: int
    running_pods: int
    running_containers: dict[str, int]
    relist_duration_seconds: _Histogram
    relist_interval_seconds: _Histogram
    last_seen: float | None

@final
class GenericPLEG:
    """GenericPLEG: relists ``runtime`` and sends the differences as pod lifecycle events on ``watch()``.

    ``relist_period`` and ``relist_threshold`` default to the kubelet's 1 s and 180 s (None); the relist
    loop runs on ``clock``. ``inspect_concurrency`` and ``inspect_timeout`` go beyond the kubelet.
    ``pod_sync_on_reinspect`` selects Kubernetes v1.36's ("Era C") reinspection: ``PodSync`` after a
    reinspection that found no container event, requests kept until their pod is reconciled.
    ``on_demand_relist`` (needs ``pod_sync_on_reinspect`` and a runtime with ``get_pod(uid)``) adds Era C's
    per-pod relist: ``request_relist(uid)`` queues the pod and the loop relists it between global relists.
    """

    def __new__(
        cls,
        runtime: _Runtime,
        *,
        cache: PodCache,
        clock: _ClockLike | None = None,
        relist_period: _DurationLike | None = None,
        relist_threshold: _DurationLike | None = None,
        channel_capacity: int = 1000,
        inspect_concurrency: int = 1,
        inspect_timeout: _DurationLike | None = None,
        pod_sync_on_reinspect: bool = False,
        on_demand_relist: bool = False,
    ) -> Self: ...
    def relist(self) -> None:
        """One relist; raises what ``get_pods()`` raised, or afterwards a malformed status or failing condition.
        A ``KeyboardInterrupt`` or ``SystemExit`` from the runtime or a condition, or Ctrl-C while it waits for
        the loop's relist or inspection threads, stops the relist and is raised."""
    def watch(self) -> EventChannel:
        """The event channel."""
    def start(self) -> None:
        """Relists now and ``relist_period`` after each relist, on the clock, in a background thread; with
        ``on_demand_relist``, serves relist requests in between. ``RuntimeError`` while a loop told to stop
        has not ended yet."""
    def stop(self, timeout: _DurationLike | None = None) -> None:
        """Stops the loop, waiting for a relist in progress: ``TimeoutError`` after ``timeout`` (the loop then
        ends when the runtime call returns); Ctrl-C interrupts the wait. Raises, once, the
        ``KeyboardInterrupt`` or ``SystemExit`` that stopped the loop."""
    @property
    def running(self) -> bool:
        """Whether the loop runs (started, not stopped, not ended by a ``KeyboardInterrupt`` or ``SystemExit``)."""
    @property
    def next_relist_at(self) -> datetime | None:
        """When the loop's next relist is due; None while relisting or stopped."""
    def healthy(self) -> tuple[bool, str | None]:
        """``(True, None)`` or ``(False, message)`` with the kubelet's message. Raises, once, the
        ``KeyboardInterrupt`` or ``SystemExit`` that stopped the loop."""
    def set_pod_watch_condition(self, uid: str, key: str, condition: Callable[[_Status], object]) -> None:
        """A condition on the pod's fresh status; when true it is removed and one ConditionMet is sent."""
    def watch_conditions(self, uid: str) -> dict[str, int] | None:
        """The pod's conditions as ``{key: version}``; None when the pod has no entry."""
    def pods_to_reinspect(self) -> list[str]:
        """Pods whose inspection failed, inspected again at the next relist."""
    def request_reinspect(self, uid: str) -> None:
        """Inspects the pod at the next relist even if it did not change (``RequestReinspect``)."""
    def request_relist(self, uid: str) -> bool:
        """``RequestRelist``: queues an on-demand relist of the pod; False when the option is off (nothing
        happens) or the queue of 200 is full (dropped and counted)."""
    def loop_iteration(self) -> Literal["relist", "relist_pod", "skipped"] | None:
        """One pass of the relist loop on this thread (the loop must not be started): the global relist if
        due, else one queued request (``"skipped"`` when a later global relist served it); None if idle."""
    def update(self, relist_period: _DurationLike, relist_threshold: _DurationLike) -> None:
        """A new period and threshold, used from the loop's next wait."""
    @property
    def relist_period(self) -> float:
        """Seconds between the end of one relist and the start of the next."""
    @property
    def relist_threshold(self) -> float:
        """Seconds without a successful relist before ``healthy()`` fails."""
    @property
    def relist_time(self) -> datetime | None:
        """When the last successful relist started."""
    @property
    def cache(self) -> PodCache:
        """The pod status cache."""
    @property
    def last_error(self) -> str | None:
        """The last error of a relist run by the loop."""
    def stats(self) -> _PlegStats:
        """Counters: relists, durations on the clock (seconds), events sent and dropped, inspections,
        on-demand pod relists and relist requests; the kubelet's relist duration and interval histograms and
        ``last_seen`` (the last successful relist's start, epoch seconds)."""
    def _exit_flush(self, timeout: float) -> tuple[str, int, int]: ...

class _EventedStats(TypedDict):
    events_received: int
    events_ignored: int
    events_rejected: int
    events_sent: int
    stream_failures: int
    stream_connections: int
    fell_back: bool
    running_pods: int
    connection_latency_seconds: _Histogram

@final
class EventedPLEG:
    """EventedPLEG: CRI container events into the shared cache and channel of ``generic``.

    Defaults (None) are the kubelet's: relist 300 s / threshold 600 s while in use, back to 1 s / 180 s
    after ``max_stream_retries`` stream failures, a global cache tick every 2 s.
    """

    def __new__(
        cls,
        generic: GenericPLEG,
        *,
        runtime_service: _RuntimeService | None = None,
        max_stream_retries: int = 5,
        relist_period: _DurationLike | None = None,
        relist_threshold: _DurationLike | None = None,
        fallback_relist_period: _DurationLike | None = None,
        fallback_relist_threshold: _DurationLike | None = None,
        cache_update_period: _DurationLike | None = None,
    ) -> Self: ...
    def start(self) -> None:
        """Marks evented in use; starts the cache tick and, with a runtime service, the event stream."""
    def stop(self) -> None:
        """No longer in use; the loops end (without waiting). Raises, once, the ``KeyboardInterrupt`` or
        ``SystemExit`` that stopped the event stream."""
    @property
    def in_use(self) -> bool:
        """Whether it is started (the generic PLEG then stores status timestamps)."""
    def process_events(self, events: Iterable[Mapping[str, Any]]) -> int:
        """Processes CRI event dicts; returns the number of lifecycle events sent."""
    def healthy(self) -> tuple[bool, str | None]:
        """``(True, None)`` unless the event channel is full. Raises, once, the ``KeyboardInterrupt`` or
        ``SystemExit`` that stopped the event stream."""
    def watch(self) -> EventChannel:
        """The shared event channel."""
    def relist(self) -> None:
        """A relist of the generic PLEG."""
    def set_pod_watch_condition(self, uid: str, key: str, condition: Callable[[_Status], object]) -> None:
        """Forwarded to the generic PLEG."""
    @property
    def generic(self) -> GenericPLEG:
        """The generic PLEG."""
    @property
    def last_error(self) -> str | None:
        """The last stream error."""
    def stats(self) -> _EventedStats:
        """Counters: events received, ignored, rejected, sent; stream failures and connections; whether it fell
        back; the running-pod count moved by each event's sandbox state (``kubelet_running_pods``); the
        histogram of event latencies (from ``created_at``)."""
    def _exit_flush(self, timeout: float) -> tuple[str, int, int]: ...

# --- Tuning lab ---------------------------------------------------------------------------------------------

class _ReplayMetrics(TypedDict):
    events: int
    writes: int
    creates: int
    patches: int
    write_reduction: float
    spam_skipped: int
    aggregated: int
    messages: int
    messages_kept: int
    message_share: float
    reasons: int
    reasons_kept: int
    reason_share: float
    delayed: int
    unreported: int
    mean_delay_s: float
    max_delay_s: float
    peak_writes: int
    peak_write_rate: float
    max_count: int

class _Metrics(_ReplayMetrics):
    p50_write_rate: float
    p90_write_rate: float
    p99_write_rate: float
    peak_object_writes: int
    peak_object_write_rate: float

class _SourceMetrics(_Metrics):
    source_component: str
    source_host: str

class _ComponentMetrics(_Metrics):
    source_component: str
    sources: int

class _ObjectMetrics(_ReplayMetrics):
    kind: str
    namespace: str
    name: str

def replay_grid(
    trace: str | PathLike[str] | Iterable[_Record] | _ArrowStream,
    grid: Iterable[Mapping[str, float]],
    *,
    window: _DurationLike | None = None,
    workers: int | None = None,
    on_result: Callable[[int, _Metrics], object] | None = None,
    correlators: Literal["per-source", "shared"] | None = None,
) -> list[_Metrics]:
    """Replays one trace under each entry of ``grid`` (dicts of ``simulate`` options), with one correlator per
    source or one shared, on ``workers`` native threads with the GIL released; the metrics of each replay, in
    grid order. ``kubevents.sweep`` builds on it."""

def _check_grid(grid: Iterable[Mapping[str, float]]) -> None:
    """Checks every entry of ``grid`` as ``replay_grid`` does, without replaying anything."""

__all__ += ["_after_fork_in_child", "_close_gate", "_interruptible_waits"]

def _close_gate(timeout: float) -> int:
    """Exit hook: stops kubevents' threads from taking the GIL; waits up to ``timeout`` for those inside."""

def _after_fork_in_child() -> None:
    """Fork hook: the objects made before the fork refuse to be used in the child."""

def _interruptible_waits() -> int:
    """How many threads are in a wait that Ctrl-C interrupts: a SIGINT sent from now on raises
    ``KeyboardInterrupt`` out of such a wait. For tests, to send Ctrl-C once the wait has begun."""

__all__ += ["_live_components"]

class _LiveComponent(TypedDict):
    kind: Literal["Broadcaster", "GenericPLEG", "EventedPLEG"]
    name: str
    stats: dict[str, Any]

def _live_components() -> list[_LiveComponent]:
    """The live broadcasters and PLEGs with their counters now, for ``kubevents.metrics``."""
