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
) -> Simulation:
    """Replays a trace (a JSON Lines path or an iterable of records) as ``recordToSink`` would, on a
    virtual clock, with a sink that never fails."""

# --- PLEG (kubevents.pleg) ---

from collections.abc import Awaitable

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

_ContainerLike = Mapping[str, str] | tuple[str, str]
"""A container or sandbox: ``{"id", "state"}`` or ``(id, state)``; state is created/running/exited/unknown."""

_PodLike = Mapping[str, Any] | tuple[str, str, str, Iterable[_ContainerLike], Iterable[_ContainerLike]] | Pod
"""A runtime pod: a dict (``id``, ``name``, ``namespace``, ``containers``, ``sandboxes``), a
``(id, name, namespace, containers, sandboxes)`` tuple, or a ``Pod``."""

_Status = dict[str, Any]
"""A pod status dict; the PLEG reads ``ips``, ``sandbox_statuses`` and ``timestamp`` and keeps the rest."""

class _Runtime(Protocol):
    """What ``GenericPLEG`` relists: ``get_pods()`` and ``get_pod_status(pod)`` (pod given as a dict)."""

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
    """The kubelet's pod status cache. ``evented=True`` rejects ``set`` calls older than the stored entry."""

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
        ``TimeoutError`` after ``timeout``."""
    def get_newer_than_async(self, uid: str, t: _TimeLike) -> Awaitable[tuple[_Status | None, BaseException | None]]:
        """The awaitable form of ``get_newer_than``."""

@final
class EventChannel:
    """The bounded event channel: sends never block, iteration blocks with the GIL released."""

    def __new__(cls, capacity: int = 1000) -> Self: ...
    def recv(self, timeout: _DurationLike | None = None) -> PodLifecycleEvent | None:
        """The next event; None after ``timeout`` or when closed and empty."""
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
    running_pods: int
    running_containers: dict[str, int]

@final
class GenericPLEG:
    """GenericPLEG: relists ``runtime`` and sends the differences as pod lifecycle events on ``watch()``.

    ``relist_period`` and ``relist_threshold`` default to the kubelet's 1 s and 180 s (None); the relist
    loop runs on ``clock``. ``inspect_concurrency`` and ``inspect_timeout`` go beyond the kubelet.
    ``pod_sync_on_reinspect`` selects Kubernetes v1.36's ("Era C") reinspection: ``PodSync`` after a
    reinspection that found no container event, requests kept until their pod is reconciled.
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
    ) -> Self: ...
    def relist(self) -> None:
        """One relist; raises what ``get_pods()`` raised, or afterwards a malformed status or failing condition."""
    def watch(self) -> EventChannel:
        """The event channel."""
    def start(self) -> None:
        """Relists now and ``relist_period`` after each relist, on the clock, in a background thread."""
    def stop(self) -> None:
        """Stops the loop, waiting for a relist in progress."""
    @property
    def running(self) -> bool:
        """Whether the loop runs."""
    @property
    def next_relist_at(self) -> datetime | None:
        """When the loop's next relist is due; None while relisting or stopped."""
    def healthy(self) -> tuple[bool, str | None]:
        """``(True, None)`` or ``(False, message)`` with the kubelet's message."""
    def set_pod_watch_condition(self, uid: str, key: str, condition: Callable[[_Status], object]) -> None:
        """A condition on the pod's fresh status; when true it is removed and one ConditionMet is sent."""
    def watch_conditions(self, uid: str) -> dict[str, int] | None:
        """The pod's conditions as ``{key: version}``; None when the pod has no entry."""
    def pods_to_reinspect(self) -> list[str]:
        """Pods whose inspection failed, inspected again at the next relist."""
    def request_reinspect(self, uid: str) -> None:
        """Inspects the pod at the next relist even if it did not change (``RequestReinspect``)."""
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
        """Counters: relists, durations on the clock (seconds), events sent and dropped, inspections."""

class _EventedStats(TypedDict):
    events_received: int
    events_ignored: int
    events_rejected: int
    events_sent: int
    stream_failures: int
    fell_back: bool
    running_pods: int

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
        """No longer in use; the loops end."""
    @property
    def in_use(self) -> bool:
        """Whether it is started (the generic PLEG then stores status timestamps)."""
    def process_events(self, events: Iterable[Mapping[str, Any]]) -> int:
        """Processes CRI event dicts; returns the number of lifecycle events sent."""
    def healthy(self) -> tuple[bool, str | None]:
        """``(True, None)`` unless the event channel is full."""
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
        """Counters: events received, ignored, rejected, sent; stream failures; whether it fell back; the
        running-pod count moved by each event's sandbox state (``kubelet_running_pods``)."""
