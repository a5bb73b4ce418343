"""kopf on kubevents: a kopf operator's Kubernetes events written through a kubevents ``Broadcaster``.

One line in a startup handler opts in (``pip install 'kubevents[kopf]'``)::

    import kopf
    import kubevents.kopf

    @kopf.on.startup()
    async def startup(settings: kopf.OperatorSettings, **_):
        kubevents.kopf.install(settings)

From then on, the events kopf would post (``kopf.event/info/warn/exception``, and the per-object log messages
that ``settings.posting`` turns into events) are recorded by a kubevents ``Recorder`` instead: client-go's
correlator aggregates similar events and counts identical ones (one event PATCHed with ``count``, not a new
event per call), its spam filter allows a burst of 25 events per object and event type and then one every 5
minutes, failed writes are retried (429, 5xx, connection errors), ``Broadcaster.stats()`` counts everything,
and when the operator stops, kopf's cleanup stage writes what is still queued. kopf posts none of these events
itself any more. ``settings.posting`` still decides *which* events there are (``enabled``, ``level``,
``loggers``); kubevents decides how they are written. The events are written with kopf's own API client and
credentials (``KopfSink``), on kopf's event loop.

As client-go does, an event is a core/v1 Event about the object kopf refers to (kind, apiVersion, namespace,
name, uid), with source component ``component`` (default ``settings.posting.reporting_component``, ``"kopf"``),
named ``<object name>.<hex timestamp>``. Where it differs from kopf's own posting:

* Event types: kopf's ``Error`` (``kopf.exception``, error logs) and ``Fatal`` become ``Warning``, ``Debug``
  becomes ``Normal``; another type is not recorded (logged once per type), as client-go drops invalid types.
* A cluster-scoped object's events go to the ``default`` namespace (client-go's rule; kopf uses the namespace
  of its credentials). Messages are not shortened to 1024 characters (kopf shortens them; client-go does not).
* kopf's per-event ``backoffs`` are not used: the broadcaster's ``max_tries`` and ``sleep_duration`` are.

No public kopf hook replaces the posting of events, so this module relies on these private kopf names (checked
against the kopf versions that the ``kopf`` extra allows):

* ``kopf._core.engines.posting.enqueue``: where ``kopf.event``/``info``/``warn``/``exception`` and the
  per-object log handler (``K8sPoster``) queue every event; ``install`` replaces it with a function that
  records the events of the operators that installed kubevents and passes the others to kopf's own.
  (``settings.posting.enabled = False`` cannot switch kopf's posting off instead: it also stops
  ``kopf.event``/``info``/``exception`` from making events at all.)
* ``kopf._core.engines.posting.settings_var``: the settings of the operator that is posting, to tell operators
  apart.
* ``kopf._cogs.clients.auth``: ``vault_var`` (the operator's credentials), ``authenticated`` (a request with
  them, re-authenticating on 401) and ``APIContext`` (its ``session`` and ``server``), for ``KopfSink``.
* ``kopf._cogs.clients.errors.check_response``: kopf's API errors, which carry the HTTP ``status`` that the
  broadcaster's retry rules read.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack

import aiohttp
import kopf

# Private kopf modules (see the module docs for what is used of each, and why).
from kopf._cogs.clients import auth as _kopf_auth
from kopf._cogs.clients import errors as _kopf_errors
from kopf._core.engines import posting as _kopf_posting

from kubevents._native import DEFAULT_WORKERS, Broadcaster, Recorder, _request_timeout, _seconds_option
from kubevents.sinks import DEFAULT_REQUEST_TIMEOUT, STRATEGIC_MERGE_PATCH, _namespace, _path_key

if TYPE_CHECKING:
    from kubevents._native import _ClockLike, _DurationLike, _Event, _Sink, _Stats

__all__ = ["DEFAULT_FLUSH_TIMEOUT", "BroadcasterOptions", "KopfSink", "install"]

#: Seconds the cleanup stage gives the broadcaster to write what is queued when the operator stops.
DEFAULT_FLUSH_TIMEOUT = 10.0

_logger = logging.getLogger(__name__)

# kopf's event types (log levels among them) as the two that Kubernetes and client-go know.
_EVENT_TYPES = {"Normal": "Normal", "Debug": "Normal", "Warning": "Warning", "Error": "Warning", "Fatal": "Warning"}


class BroadcasterOptions(TypedDict, total=False):
    """The ``kubevents.Broadcaster`` options that ``install`` passes on, all of them: the correlator's
    (``burst``, ``qps``, ``max_events``, ``max_interval``, ``lru_cache_size``, the key functions), the retries
    (``max_tries``, ``sleep_duration``), the queues, the clock and the ``name`` of its metrics. Left out, an
    option keeps the broadcaster's default."""

    clock: _ClockLike | None
    sleep_duration: _DurationLike | None
    max_tries: int
    queue_length: int
    full_channel: Literal["drop", "wait"]
    lru_cache_size: int
    burst: int
    qps: float
    max_events: int
    max_interval: int
    key_func: Callable[[_Event], tuple[str, str]] | None
    message_func: Callable[[_Event], str] | None
    spam_key_func: Callable[[_Event], str] | None
    catch_up_wait: _DurationLike | None
    name: str | None
    log_interval: _DurationLike | None


class KopfSink:
    """An async sink that writes events with the kopf operator's own API client and credentials (those of its
    ``@kopf.on.login`` handlers), so the operator needs no second configuration.

    Creates with POST ``/api/v1/namespaces/<ns>/events`` and patches with a strategic merge patch, as
    ``kubevents.sinks.AsyncCoreV1Sink``; an API error raises kopf's exception, whose HTTP ``status`` the
    broadcaster's retry rules read (a 401 first makes kopf log in again). Make it inside a kopf handler (it
    takes the operator's credentials from there) and record to it on kopf's event loop; ``install``
    does both. ``request_timeout`` (seconds or a timedelta, default
    ``kubevents.sinks.DEFAULT_REQUEST_TIMEOUT``) bounds each request.
    """

    def __init__(self, *, request_timeout: _DurationLike = DEFAULT_REQUEST_TIMEOUT) -> None:
        try:
            self._vault = _kopf_auth.vault_var.get()
        except LookupError:
            raise RuntimeError(
                "KopfSink uses a kopf operator's credentials: make it inside a kopf handler "
                "(e.g. @kopf.on.startup())"
            ) from None
        self._timeout = aiohttp.ClientTimeout(total=_request_timeout(request_timeout))

    async def create(self, event: dict[str, Any]) -> dict[str, Any]:
        """POSTs the event to its namespace; returns the stored event."""
        return await self._send("POST", f"/api/v1/namespaces/{_namespace(event)}/events", event, "application/json")

    async def patch(self, event: dict[str, Any], patch: bytes) -> dict[str, Any]:
        """PATCHes the named event with a strategic merge patch; returns the stored event."""
        namespace, name = _path_key(event)
        path = f"/api/v1/namespaces/{namespace}/events/{name}"
        return await self._send("PATCH", path, json.loads(patch), STRATEGIC_MERGE_PATCH)

    async def _send(self, method: str, path: str, body: object, content_type: str) -> dict[str, Any]:
        # Each sink call runs in a task of its own, made from a broadcaster thread where kopf set nothing.
        _kopf_auth.vault_var.set(self._vault)
        return await _request(method, path, body, content_type, self._timeout)


@_kopf_auth.authenticated
async def _request(
    method: str,
    path: str,
    body: object,
    content_type: str,
    timeout: aiohttp.ClientTimeout,
    *,
    context: _kopf_auth.APIContext | None = None,
) -> dict[str, Any]:
    if context is None:
        raise RuntimeError("kopf did not pass the API context")
    url = context.server.rstrip("/") + path
    headers = {"Content-Type": content_type}
    async with context.session.request(method, url, json=body, headers=headers, timeout=timeout) as response:
        await _kopf_errors.check_response(response)
        answer = await response.json()
    if not isinstance(answer, dict):
        raise TypeError(f"the API answered {type(answer).__name__}, expected an Event")
    return answer


class _Installation:
    """What ``install`` set up for one operator (one ``OperatorSettings``)."""

    def __init__(self, settings: kopf.OperatorSettings, broadcaster: Broadcaster, recorder: Recorder,
                 flush_timeout: float) -> None:
        self.settings = weakref.ref(settings)
        self.broadcaster = broadcaster
        self.recorder = recorder
        self.flush_timeout = flush_timeout
        self.closed = False
        self._unknown_types: set[str] = set()

    def record(self, ref: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        if ref.get("apiVersion") == "v1" and ref.get("kind") == "Event":
            return  # kopf's own rule: no events about events, which would make events without end
        event_type = _EVENT_TYPES.get(type)
        if event_type is None:
            if type not in self._unknown_types:
                self._unknown_types.add(type)
                _logger.warning("kubevents: kopf events of type %r are not recorded (only Normal and Warning, "
                                "and kopf's Debug, Error and Fatal)", type)
            return
        # kopf's per-object log references carry None for what the object lacks (a namespace, a uid).
        obj = {key: value for key, value in ref.items() if value is not None}
        try:
            self.recorder.event(obj, event_type, reason, message)
        except (TypeError, ValueError) as e:
            # As in kopf, an event that cannot be posted never fails the handler that made it.
            _logger.warning("kubevents: a kopf event was not recorded: %s", e)


_lock = threading.Lock()
_installations: dict[int, _Installation] = {}  # by id() of the operator's settings
_flushing_registries: weakref.WeakSet[kopf.OperatorRegistry] = weakref.WeakSet()
_kopf_enqueue: Callable[..., None] = _kopf_posting.enqueue  # kopf's own; install() keeps the one it replaces


def _installation(settings: kopf.OperatorSettings | None) -> _Installation | None:
    if settings is None:
        return None
    installation = _installations.get(id(settings))
    return installation if installation is not None and installation.settings() is settings else None


def _enqueue(ref: Mapping[str, Any], type: str, reason: str, message: str, *args: Any, **kwargs: Any) -> None:
    """Replaces kopf's ``posting.enqueue`` (``(ref, type, reason, message)``, and ``backoffs`` since 1.45)."""
    installation = _installation(_kopf_posting.settings_var.get(None))
    if installation is not None:
        installation.record(ref, type, reason, message)
    else:
        _kopf_enqueue(ref, type, reason, message, *args, **kwargs)


async def _flush(settings: kopf.OperatorSettings, logger: logging.Logger | logging.LoggerAdapter[Any],
                 **_: Any) -> None:
    """The cleanup handler: writes what is queued before kopf stops (and closes its API sessions)."""
    installation = _installation(settings)
    if installation is None or installation.closed:
        return
    installation.closed = True
    try:
        stats: _Stats = await installation.broadcaster.aclose(timeout=installation.flush_timeout)
    except TimeoutError as e:
        logger.warning(f"kubevents: the events queued at exit were not all written in "
                       f"{installation.flush_timeout:g} s: {e}")
    else:
        logger.info(f"kubevents: events written: {stats['created']} created, {stats['patched']} patched; "
                    f"{stats['skipped']} skipped by the spam filter, {stats['abandoned']} abandoned")


def install(
    settings: kopf.OperatorSettings,
    *,
    component: str | None = None,
    host: str | None = None,
    sink: _Sink | None = None,
    workers: int = DEFAULT_WORKERS,
    flush_timeout: _DurationLike = DEFAULT_FLUSH_TIMEOUT,
    registry: kopf.OperatorRegistry | None = None,
    **options: Unpack[BroadcasterOptions],
) -> Broadcaster:
    """Routes the operator's Kubernetes events through a new ``kubevents.Broadcaster`` and returns it.

    Call it once, from an ``async def`` ``@kopf.on.startup()`` handler, with the ``settings`` the handler was
    given: ``kubevents.kopf.install(settings)``. ``component`` and ``host`` are the events' source (default
    ``settings.posting.reporting_component``, ``"kopf"``, and no host); ``options`` go to the broadcaster
    (``burst=50``, ``qps=...``, ``max_events``, ``max_interval``, ``max_tries``, ``clock`` ...; see
    ``BroadcasterOptions``). Events are written to ``sink`` (default ``KopfSink``: kopf's own API
    client and credentials) by ``workers`` concurrent writes, on kopf's event loop. When the operator stops,
    a cleanup handler (registered in ``registry``, default kopf's default registry, which is the one
    ``kopf run`` uses) writes what is queued, for at most ``flush_timeout`` (seconds or a timedelta).

    Raises ``RuntimeError`` outside a startup handler of a running operator, or when kubevents is already
    installed for these settings; ``TypeError``/``ValueError`` for bad options.
    """
    flush_seconds = _seconds_option(flush_timeout, "flush_timeout", positive=True)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError(
            "kubevents.kopf.install() must run on kopf's event loop: call it from an `async def` "
            "@kopf.on.startup() handler"
        ) from None
    if not isinstance(settings, kopf.OperatorSettings):
        raise TypeError(f"settings: expected kopf.OperatorSettings, got {type(settings).__name__}")
    if _kopf_posting.settings_var.get(None) is not settings:
        raise RuntimeError(
            "kubevents.kopf.install(settings) must be called from a @kopf.on.startup() handler of the running "
            "operator, with the settings that handler was given"
        )
    global _kopf_enqueue
    with _lock:
        if _installation(settings) is not None and not _installations[id(settings)].closed:
            raise RuntimeError("kubevents.kopf.install() was already called for this operator: call it once")
        sink = sink if sink is not None else KopfSink()
        broadcaster = Broadcaster(**options)
        try:
            recorder = broadcaster.new_recorder(
                component if component is not None else settings.posting.reporting_component, host
            )
            broadcaster.start_recording_to_sink(sink, workers=workers)
        except BaseException:
            broadcaster.shutdown()  # nothing was recorded, and no sink is attached
            raise
        _installations[id(settings)] = _Installation(settings, broadcaster, recorder, flush_seconds)
        weakref.finalize(settings, _installations.pop, id(settings), None)
        registry = registry if registry is not None else kopf.get_default_registry()
        if registry not in _flushing_registries:
            kopf.on.cleanup(id="kubevents.kopf.flush", registry=registry)(_flush)
            _flushing_registries.add(registry)
        # Once per process: _enqueue passes the events of operators without kubevents on to kopf's own.
        if _kopf_posting.enqueue is not _enqueue:
            _kopf_enqueue = _kopf_posting.enqueue
            _kopf_posting.enqueue = _enqueue
    return broadcaster
