"""events.k8s.io/v1 recording: client-go's ``tools/events`` broadcaster, recorder and series.

Events of one kind about one object (same type, action, reason, reporting controller and instance,
``regarding`` including its resourceVersion, and ``related``; not the note) form a series: the first
occurrence is created, the second patches the first event with ``series {count: 2, lastObservedTime}``,
later ones only count in a cache. Every 30 minutes each live series is written; every 6 minutes series
quiet for 6 minutes are written a last time and forgotten, as are single events older than 6 minutes.

Example::

    >>> import kubevents
    >>> from kubevents.sinks import MemorySink
    >>> clock = kubevents.FakeClock(1_700_000_000)
    >>> sink = MemorySink()
    >>> b = kubevents.EventsBroadcaster(sink, clock=clock)
    >>> b.start_recording_to_sink()
    >>> rec = b.new_recorder("my-controller", "my-controller-1")
    >>> pod = {"kind": "Pod", "namespace": "web", "name": "api-0", "uid": "u1", "apiVersion": "v1"}
    >>> for _ in range(3):
    ...     rec.eventf(pod, None, "Warning", "BackOff", "Restarting", "Back-off restarting %s", "api")
    >>> b.wait_idle()
    True
    >>> [(verb, e.get("series")) for verb, e in sink.writes]  # the third occurrence is only counted
    [('create', None), ('patch', {'count': 2, 'lastObservedTime': '2023-11-14T22:13:20.000000Z'})]
    >>> b.shutdown()["shutdown_writes"]  # the final count
    1
    >>> sink.writes[-1][1]["series"]["count"]
    3

Where kubevents deliberately differs from client-go (released 1.36-level ``tools/events``):

* The series cache is an LRU of ``cache_size`` entries (client-go: an unbounded map). A live series pushed
  out is written first if its count has changed since its last write.
* ``shutdown`` writes the final count of every live series whose count the server has not seen, after one
  last attempt for each event waiting for a retry (client-go writes nothing on shutdown).
* Timers, retry sleeps and ``eventTime`` all read the broadcaster's clock (client-go reads the wall clock
  for several of them); retries wait on that clock without holding up other events. A series'
  ``lastObservedTime`` is the ``eventTime`` of its latest occurrence (client-go: the time its goroutine
  got to it).
* A note longer than the API's 1024-byte limit is cut at a UTF-8 boundary with a ``" ..."`` suffix and
  counted in ``stats()["truncated_notes"]`` (client-go sends it and the server rejects the event).
* One engine thread records all events (client-go: a goroutine per event); a caller never blocks, and
  events beyond 1000 waiting for that thread are dropped and counted.
* An invalid event type or an object that has no reference raises ``ValueError``/``TypeError`` (client-go
  logs and drops the event); ``note`` is %-formatted only when arguments are given.
* As for core/v1 in kubevents, 429 and 5xx answers are retried (client-go's REST client retries them below
  ``recordEvent``; the Python clients do not).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import socket
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from kubevents import _lifecycle
from kubevents._native import DEFAULT_EVENTS_V1_CACHE_SIZE, EventsV1Engine
from kubevents.sinks import DEFAULT_REQUEST_TIMEOUT, _check_path_segment, _request_timeout_arg
from kubevents.sinks import STRATEGIC_MERGE_PATCH as _STRATEGIC_MERGE

__all__ = ["AsyncEventsV1Sink", "EventsBroadcaster", "EventsRecorder", "EventsV1Sink"]

_logger = logging.getLogger("kubevents")

EventV1 = dict[str, Any]
"""An events.k8s.io/v1 Event in the Kubernetes JSON shape (camelCase keys, RFC 3339 timestamps)."""

_VALID_TYPES = ("Normal", "Warning")
_WATCHER_QUEUE = 1000


def _format(text: str, args: tuple[Any, ...], name: str = "note") -> str:
    """``text % args``, or ``text`` as it is without args (as the recorders format)."""
    if not isinstance(text, str):
        raise TypeError(f"{name}: expected str, got {type(text).__name__}")
    return text % args if args else text


def _checked_args(
    type: str, reason: str, action: str, annotations: Mapping[str, str] | None, note: str, args: tuple[Any, ...]
) -> tuple[dict[str, str] | None, str]:
    """The checks of a recorder call made before the engine's (which checks the rest): the str arguments, in
    the order the core/v1 recorder checks its own, the note formatted, the type's value, then the annotations
    as a dict. Shared with ``kubevents.testing.FakeEventsRecorder``."""
    for name, value in (("type", type), ("reason", reason), ("action", action)):
        if not isinstance(value, str):
            raise TypeError(f"{name}: expected str, got {value.__class__.__name__}")
    note = _format(note, args)
    if type not in _VALID_TYPES:
        # Quoted as the core/v1 recorder quotes it (Go's %q), so both recorders word the error alike.
        got = json.dumps(type) if isinstance(type, str) else repr(type)
        raise ValueError(f'type: must be "Normal" or "Warning", got {got}')
    return (None if annotations is None else dict(annotations)), note


class EventsRecorder:
    """Records events.k8s.io/v1 events for one reporting controller and instance.

    Made by ``EventsBroadcaster.new_recorder``; ``eventf`` never blocks.
    """

    def __init__(self, broadcaster: EventsBroadcaster, reporting_controller: str, reporting_instance: str) -> None:
        self._broadcaster = broadcaster
        self.reporting_controller = reporting_controller
        self.reporting_instance = reporting_instance

    def eventf(self, regarding: Any, related: Any, type: str, reason: str, action: str, note: str, *args: Any) -> None:
        """Records an event about ``regarding`` (and optionally ``related``): ``note % args`` when args are given."""
        self.annotated_eventf(regarding, related, None, type, reason, action, note, *args)

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
        annotations, note = _checked_args(type, reason, action, annotations, note, args)
        self._broadcaster._record(
            regarding, related, annotations, type, reason, action, note, self.reporting_controller,
            self.reporting_instance,
        )


def _left(deadline: float | None) -> float | None:
    """Seconds until ``deadline`` (a ``time.monotonic()`` value), or None for no deadline."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


class _Watcher:
    """A callback fed from its own queue on its own thread (a watch.Broadcaster watcher, drop if full).

    Closing it never waits (a full queue included): the thread delivers what is queued, then ends."""

    def __init__(self, callback: Callable[[EventV1], object], name: str) -> None:
        self._callback = callback
        self._events: deque[EventV1] = deque()
        self._ready = threading.Condition(threading.Lock())
        self._closed = False
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def offer(self, event: EventV1) -> None:
        with self._ready:
            if self._closed:
                return
            if len(self._events) >= _WATCHER_QUEUE:
                self.dropped += 1
                return
            self._events.append(event)
            self._ready.notify()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._events and not self._closed:
                    self._ready.wait()
                if not self._events:
                    return
                event = self._events.popleft()
            try:
                self._callback(event)
            except Exception:
                _logger.exception("event watcher callback failed")

    def close(self) -> None:
        """Takes no more events; ``dropped`` is final from now on."""
        with self._ready:
            self._closed = True
            self._ready.notify()

    def join(self, timeout: float | None) -> bool:
        """Waits up to ``timeout`` seconds for the thread to end; whether it has. On that very thread (a callback
        shutting down) it does not wait for itself."""
        if threading.current_thread() is self._thread:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def pending(self) -> int:
        """Events queued and not delivered yet."""
        return len(self._events)


# The live broadcasters, for kubevents.metrics (a broadcaster collected by the GC leaves by itself).
_live: weakref.WeakSet[EventsBroadcaster] = weakref.WeakSet()
_unnamed = itertools.count(1)


class EventsBroadcaster:
    """client-go's ``tools/events`` ``EventBroadcaster`` writing to ``sink``.

    ``sink`` is a sink of ``kubevents.sinks`` (``MemorySink``), ``EventsV1Sink``/``AsyncEventsV1Sink``, or
    any object with ``create(event)`` and ``patch(event, patch_bytes)``, plain or ``async def`` (these run
    on the asyncio loop running when ``start_recording_to_sink`` is called; shut down with ``await aclose()``
    or ``async with`` there). Exceptions are classified as for ``kubevents.sinks``; in addition, as in
    client-go, a 404 on a series patch turns into a create, and a 409 on the create of a series is retried.
    Retries are at most ``max_tries`` attempts in all, ``sleep_duration`` seconds (jittered up to +25 %)
    apart on ``clock``. ``cache_size`` bounds the series cache, which grows as series arrive (a large bound
    costs nothing until used). A ``KeyboardInterrupt`` or ``SystemExit`` raised in the sink abandons that event
    and is raised again by the next ``shutdown()`` or ``wait_idle()``.

    A broadcaster that is recording or has watchers and is not shut down is flushed at exit (see
    ``kubevents.set_exit_timeout``). One created before ``os.fork()`` raises ``RuntimeError`` in the child.

    ``name`` labels its metrics (``kubevents.metrics``); by default ``EventsBroadcaster-<n>``, n counting the
    unnamed ones made in this process.
    """

    def __init__(
        self,
        sink: Any,
        *,
        clock: Any = None,
        sleep_duration: float = 10.0,
        max_tries: int = 12,
        cache_size: int = DEFAULT_EVENTS_V1_CACHE_SIZE,
        name: str | None = None,
    ) -> None:
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name: expected str, got {type(name).__name__}")
        self._engine = EventsV1Engine(
            sink, clock=clock, sleep_duration=sleep_duration, max_tries=max_tries, cache_size=cache_size
        )
        if name is None:
            name = f"EventsBroadcaster-{next(_unnamed)}"
        self._name = name
        self._lock = threading.Lock()
        self._watchers: list[_Watcher] = []
        # Watchers closed by shutdown: every caller of shutdown() waits for them.
        self._closed: list[_Watcher] = []
        self._stopped_watcher_drops = 0
        self._stopped = False
        _live.add(self)

    @property
    def name(self) -> str:
        """The name that labels this broadcaster's metrics (``kubevents.metrics``)."""
        return self._name

    def new_recorder(self, reporting_controller: str, reporting_instance: str | None = None) -> EventsRecorder:
        """A recorder for ``reporting_controller``; the instance defaults to ``<controller>-<hostname>``."""
        self._engine.check()
        if not isinstance(reporting_controller, str):
            raise TypeError(f"reporting_controller: expected str, got {type(reporting_controller).__name__}")
        if reporting_instance is None:
            reporting_instance = f"{reporting_controller}-{socket.gethostname()}"
        return EventsRecorder(self, reporting_controller, reporting_instance)

    def _record(
        self,
        regarding: Any,
        related: Any,
        annotations: dict[str, str] | None,
        type: str,
        reason: str,
        action: str,
        note: str,
        reporting_controller: str,
        reporting_instance: str,
    ) -> None:
        watchers = self._watchers
        event = self._engine.record(
            regarding, related, annotations, type, reason, action, note, reporting_controller, reporting_instance,
            want_event=bool(watchers),
        )
        if event is not None:
            for w in watchers:
                w.offer(event)

    def start_recording_to_sink(self) -> None:
        """Starts writing events to the sink, and the 6- and 30-minute rounds on the clock."""
        self._engine.start()
        _lifecycle.track(self)

    def start_event_watcher(self, callback: Callable[[EventV1], object]) -> Callable[[], None]:
        """Calls ``callback`` with every event recorded from now on, on a thread of its own (at most 1000
        waiting; more are dropped). Returns a function that stops the watcher."""
        if not callable(callback):
            raise TypeError("callback must be callable")
        self._engine.check()
        with self._lock:
            if self._stopped:
                raise RuntimeError("the broadcaster is shut down")
            w = _Watcher(callback, "kubevents-events-v1-watcher")
            self._watchers = [*self._watchers, w]
        _lifecycle.track(self)

        def stop() -> None:
            self._engine.check()
            with self._lock:
                if w not in self._watchers:
                    return
                self._watchers = [x for x in self._watchers if x is not w]
                w.close()
                self._stopped_watcher_drops += w.dropped
            w.join(None)

        return stop

    def start_logging(self, logger: logging.Logger | None = None) -> Callable[[], None]:
        """Logs every event at INFO ("Event occurred") to ``logger`` (default: the ``kubevents`` logger)."""
        log = logger or _logger

        def emit(e: EventV1) -> None:
            r = e.get("regarding", {})
            log.info(
                "Event occurred: object=%s/%s kind=%s apiVersion=%s type=%s reason=%s action=%s note=%s",
                r.get("namespace", ""), r.get("name", ""), r.get("kind", ""), r.get("apiVersion", ""),
                e.get("type", ""), e.get("reason", ""), e.get("action", ""), e.get("note", ""),
            )

        return self.start_event_watcher(emit)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Waits until every event recorded so far and everything due at the clock's present time (retries,
        rounds) has been handled. With a FakeClock: step the clock, then ``wait_idle()``. False on timeout.

        Ctrl-C interrupts the wait; a ``KeyboardInterrupt`` or ``SystemExit`` raised in the sink is raised
        here. ``RuntimeError`` on the asyncio loop of an async sink, which the wait would stall."""
        return self._engine.wait_idle(timeout)

    def shutdown(self, timeout: float | timedelta | None = None) -> dict[str, Any]:
        """Stops recording: queued events are written, every pending retry gets one last attempt, every live
        series its final count; watchers get their queued events. Returns the final ``stats()``, or raises
        ``TimeoutError`` if ``timeout`` seconds ran out first (the rest then finishes in the background).

        Idempotent; callers on several threads each wait for the end (or their own timeout). Ctrl-C
        interrupts the wait; a ``KeyboardInterrupt`` or ``SystemExit`` raised in the sink is raised here.
        On the asyncio loop of an async sink it raises ``RuntimeError``: use ``await aclose()`` there."""
        self._engine.check("shutdown")
        start = time.monotonic()
        watchers = self._close_watchers()
        done = self._engine.shutdown(timeout)
        # One deadline for all: the engine checked the timeout.
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        deadline = None if seconds is None else start + float(seconds)
        for w in watchers:
            done = w.join(_left(deadline)) and done
        if not done:
            raise TimeoutError(f"the broadcaster did not finish writing within {timeout} s")
        return self.stats()

    async def aclose(self, timeout: float | timedelta | None = None) -> dict[str, Any]:
        """``shutdown()`` for a coroutine: runs it on a worker thread, so that this loop goes on running the
        async sink's last writes. Returns the final ``stats()``.

        Example: ``stats = await broadcaster.aclose(timeout=10)``."""
        self._engine.check()
        return await asyncio.to_thread(self.shutdown, timeout)

    def _close_watchers(self) -> list[_Watcher]:
        """Stops feeding the watchers (they deliver what they hold, then end); returns every watcher closed so,
        for each caller of shutdown to wait for."""
        with self._lock:
            self._stopped = True
            for w in self._watchers:
                w.close()
                self._stopped_watcher_drops += w.dropped
            self._closed += self._watchers
            self._watchers = []
            return list(self._closed)

    def _exit_flush(self, timeout: float) -> tuple[str, int]:
        """For the exit hook (``kubevents._lifecycle``, which forgets what it tracked at a fork): shuts down
        within ``timeout`` seconds without raising; returns how many events were left undelivered."""
        deadline = time.monotonic() + timeout
        watchers = self._close_watchers()
        undelivered = self._engine._exit_flush(timeout)
        for w in watchers:
            w.join(_left(deadline))
        return "EventsBroadcaster", undelivered + sum(w.pending for w in watchers)

    def __enter__(self) -> EventsBroadcaster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    async def __aenter__(self) -> EventsBroadcaster:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def stats(self) -> dict[str, Any]:
        """Counters: events received, series decisions, sink writes and errors (also by verb:
        ``sink_creates``, ``sink_patches`` and their ``_errors``), retries, drops (``dropped`` of the engine's
        queue, ``dropped_after_shutdown`` the part dropped while stopping, ``dropped_watchers`` of the
        watchers' queues), truncated notes, cache size. Never waits for a sink call: the engine's counters are
        as of its last write."""
        out: dict[str, Any] = dict(self._engine.stats())
        with self._lock:
            out["dropped_watchers"] = self._stopped_watcher_drops + sum(w.dropped for w in self._watchers)
        return out


def _plain(api: Any, obj: Any) -> Any:
    """An answer of the official clients as a JSON-shaped dict."""
    if obj is None or isinstance(obj, dict):
        return obj
    return api.api_client.sanitize_for_serialization(obj)


_EVENTS_PATH = "/apis/events.k8s.io/v1/namespaces/{namespace}/events"


def _path(event: EventV1, verb: str) -> tuple[str, str]:
    """The namespace of the event and, for a patch, its name: checked as the request path they go into."""
    meta = event.get("metadata") or {}
    ns = meta.get("namespace")
    if not ns:
        raise ValueError(f"can't {verb} an event with empty namespace")
    ns = _check_path_segment(str(ns), "namespace")
    if verb == "create":
        return ns, ""
    name = meta.get("name")
    if not name:
        raise ValueError("resource name may not be empty")
    return ns, _check_path_segment(str(name), "resource name")


class EventsV1Sink:
    """Writes events.k8s.io/v1 events with the official client: ``EventsV1Sink(kubernetes.client.EventsV1Api())``.

    Creates with a POST of the event and patches with a strategic merge patch; an event without a namespace
    raises ``ValueError`` (client-go: a plain error, retried), as do a namespace or a patch's name that cannot
    be a path segment (``"."``, ``".."``, or containing ``"/"`` or ``"%"``; client-go's REST client refuses
    them too). With the pydantic-based clients (kubernetes >= 35) the event is sent as it is, through the
    client's ``param_serialize``/``call_api``: their ``create_namespaced_event`` re-serializes ``eventTime``
    without microseconds when they are zero, which the API server's MicroTime parser rejects.

    ``request_timeout`` (seconds, default ``kubevents.sinks.DEFAULT_REQUEST_TIMEOUT``, 30) bounds each request
    (the client has no timeout of its own); a request that times out is retried by the broadcaster.
    """

    def __init__(self, events_v1_api: Any, request_timeout: float = DEFAULT_REQUEST_TIMEOUT) -> None:
        self.api = events_v1_api
        self.request_timeout = _request_timeout_arg(request_timeout)

    def _raw(self, method: str, path: str, path_params: dict[str, str], body: Any, content_type: str) -> Any:
        c = self.api.api_client
        params = c.param_serialize(
            method=method,
            resource_path=path,
            path_params=path_params,
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
        )
        response = c.call_api(*params, _request_timeout=self.request_timeout)
        response.read()
        types = {"200": "object", "201": "object", "202": "object"}
        return c.response_deserialize(response_data=response, response_types_map=types).data

    def create(self, event: EventV1) -> Any:
        """POSTs the event to its namespace; returns the stored event."""
        ns, _ = _path(event, "create")
        if hasattr(self.api.api_client, "param_serialize"):
            return self._raw("POST", _EVENTS_PATH, {"namespace": ns}, event, "application/json")
        return _plain(self.api, self.api.create_namespaced_event(ns, event, _request_timeout=self.request_timeout))

    def patch(self, event: EventV1, patch: bytes) -> Any:
        """PATCHes the named event with a strategic merge patch; returns the stored event."""
        ns, name = _path(event, "patch")
        body = json.loads(patch)
        if hasattr(self.api.api_client, "param_serialize"):
            path = _EVENTS_PATH + "/{name}"
            return self._raw("PATCH", path, {"namespace": ns, "name": name}, body, _STRATEGIC_MERGE)
        out = self.api.patch_namespaced_event(
            name, ns, body, _content_type=_STRATEGIC_MERGE, _request_timeout=self.request_timeout
        )
        return _plain(self.api, out)


class AsyncEventsV1Sink:
    """``EventsV1Sink`` for ``kubernetes_asyncio``: ``AsyncEventsV1Sink(kubernetes_asyncio.client.EventsV1Api())``.

    Start recording to it from a coroutine: its calls run on that coroutine's event loop, which must keep
    running while the broadcaster records; shut the broadcaster down with ``await broadcaster.aclose()`` (or
    ``async with``) so that the loop stays free for the last writes. Writes made once that loop has stopped
    are given up (``write_errors``).
    ``request_timeout`` and the checks of the namespace and name are those of ``EventsV1Sink``.
    """

    def __init__(self, events_v1_api: Any, request_timeout: float = DEFAULT_REQUEST_TIMEOUT) -> None:
        self.api = events_v1_api
        self.request_timeout = _request_timeout_arg(request_timeout)

    async def create(self, event: EventV1) -> Any:
        """POSTs the event to its namespace; returns the stored event."""
        ns, _ = _path(event, "create")
        return _plain(self.api,
                      await self.api.create_namespaced_event(ns, event, _request_timeout=self.request_timeout))

    async def patch(self, event: EventV1, patch: bytes) -> Any:
        """PATCHes the named event with a strategic merge patch; returns the stored event."""
        ns, name = _path(event, "patch")
        out = await self.api.patch_namespaced_event(
            name, ns, json.loads(patch), _content_type=_STRATEGIC_MERGE, _request_timeout=self.request_timeout
        )
        return _plain(self.api, out)
