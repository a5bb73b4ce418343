"""Type stubs for the native module ``kubevents._native`` (Rust, pyo3)."""

from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from os import PathLike
from typing import Any, Protocol, Self, TypedDict, final

__all__ = [
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
    # Tuning lab.
    "replay_grid",
]

DEFAULT_QPS: float
"""client-go's default spam refill rate, ``float32(1/300)`` widened to a float."""

class _SupportsNow(Protocol):
    """Any clock: an object whose ``now()`` returns a datetime (naive = UTC) or epoch seconds."""

    def now(self) -> datetime | float | int: ...

_ClockLike = RealClock | FakeClock | IntervalClock | _SupportsNow
_TimeLike = datetime | float | int
_DurationLike = timedelta | float | int

_Event = dict[str, Any]
"""A core/v1 Event in the Kubernetes JSON shape (camelCase keys, RFC 3339 timestamps)."""

_Record = Mapping[str, Any]
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

@final
class Decisions(Iterator[_Decision]):
    """The decisions of a replay, computed in batches with the GIL released."""

    def __iter__(self) -> Decisions: ...
    def __next__(self) -> _Decision: ...

@final
class Simulation:
    """The result of ``simulate``."""

    @property
    def totals(self) -> _Totals:
        """Counts of the replay; ``creates + patches + skips == events``."""
    def top_objects(self, n: int = 10) -> list[_Object_Totals]:
        """The ``n`` objects with the most API writes; needs ``simulate(..., per_object=True)``."""
    def decisions(self) -> Decisions:
        """Replays the trace again and yields one decision per input event."""
    # Tuning lab: replay metrics (``simulate(..., metrics=True)``).
    @property
    def metrics(self) -> _Metrics:
        """The metrics of the replay (defined in ``kubevents.lab``); needs ``metrics=True``."""
    def object_metrics(self, n: int | None = None) -> list[_ObjectMetrics]:
        """Each object's metrics, most API writes first; needs ``metrics=True, per_object=True``."""
    def to_pandas(self, objects: bool = False) -> Any:
        """The metrics as a pandas DataFrame: one row, or one row per object with ``objects=True``."""

def simulate(
    trace: str | PathLike[str] | Iterable[_Record],
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
) -> Simulation:
    """Replays a trace (a JSON Lines path or an iterable of records) as ``recordToSink`` would, on a
    virtual clock, with a sink that never fails. ``metrics=True`` also collects ``Simulation.metrics``, with
    peak write rates over windows of ``window`` seconds (default 60)."""

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
    peak_object_writes: int
    peak_object_write_rate: float

class _ObjectMetrics(_ReplayMetrics):
    kind: str
    namespace: str
    name: str

def replay_grid(
    trace: str | PathLike[str] | Iterable[_Record],
    grid: Iterable[Mapping[str, float]],
    *,
    window: _DurationLike | None = None,
    workers: int | None = None,
    on_result: Callable[[int, _Metrics], object] | None = None,
) -> list[_Metrics]:
    """Replays one trace under each entry of ``grid`` (dicts of ``simulate`` options) on ``workers`` native
    threads with the GIL released; the metrics of each replay, in grid order. ``kubevents.sweep`` builds on it."""
