"""Event sinks: where a ``Broadcaster`` writes the events it records.

A sink is any object with ``create(event) -> dict`` and ``patch(event, patch: bytes) -> dict`` (plain or
``async def``), taking and returning core/v1 Events as dicts of the Kubernetes JSON shape. A method that
raises tells the broadcaster what to do by the exception: one with an HTTP ``status`` (the official clients'
``ApiException``, or ``ApiError``) is retried for 429 and 5xx and abandoned for any other status, a 404
on a patch turns into a create; ``TypeError`` and ``ValueError`` abandon the event; anything else (connection
errors, timeouts) is retried. A method may return None to mean "written as sent".

* ``CoreV1Sink`` writes through the official ``kubernetes`` client's ``CoreV1Api``;
* ``AsyncCoreV1Sink`` through ``kubernetes_asyncio``'s (it runs on the asyncio loop that is running when
  the broadcaster starts recording to it);
* ``EventsV1Sink`` and ``AsyncEventsV1Sink`` do the same for ``EventsBroadcaster``'s
  events.k8s.io/v1 events, through ``EventsV1Api``;
* ``MemorySink`` keeps what the API server would hold (of either API), for tests and notebooks.

Neither client is imported by this module: the sinks use the API object they are given. Neither client has a
request timeout of its own, so the client sinks pass one on every call: ``request_timeout`` (seconds or a
timedelta, more than 0 and at most ``MAX_REQUEST_TIMEOUT``), ``DEFAULT_REQUEST_TIMEOUT`` unless given.
A request that times out raises the client's timeout error (urllib3's ``ReadTimeoutError``, or ``TimeoutError``
from aiohttp), which the broadcaster retries.

A namespace, or a name that goes into the URL (a patch's), of ``"."`` or ``".."`` or containing ``"/"`` or
``"%"`` raises ``ValueError``, so the event is abandoned: the clients would send it to another path, and client-go's
REST client refuses it (``IsValidPathSegmentName``).
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from kubevents import _apistatus
from kubevents._native import DEFAULT_REQUEST_TIMEOUT, MAX_REQUEST_TIMEOUT, _request_timeout

__all__ = ["DEFAULT_REQUEST_TIMEOUT", "MAX_REQUEST_TIMEOUT", "STRATEGIC_MERGE_PATCH", "ApiError", "AsyncCoreV1Sink",
           "AsyncEventsV1Sink", "CoreV1Sink", "EventsV1Sink", "MemorySink"]

#: The content type of the patches the broadcaster sends (client-go's ``types.StrategicMergePatchType``).
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

# ``request_timeout`` checked by the core, in seconds: for every sink that takes one.


class ApiError(Exception):
    """An error answered by an API server: its HTTP ``status``, ``reason`` (``NotFound`` ...), and ``body``, the
    ``Status`` object the server sends, as JSON text (as in the official clients' ``ApiException``).

    ``details`` is the Status' ``details`` (``{"name": ..., "kind": "events"}``), if any."""

    def __init__(self, status: int, reason: str, message: str = "", details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {reason}" + (f": {message}" if message else ""))
        self.status = status
        self.reason = reason
        self.body = _apistatus.to_json(_apistatus.status(status, reason, message, details))

    @classmethod
    def _from_status(cls, body: dict[str, Any]) -> ApiError:
        return cls(body["code"], body["reason"], body["message"], body.get("details"))


def _path_segment_errors(value: str) -> list[str]:
    """What is wrong with ``value`` as a path segment of a URL (apimachinery's ``IsValidPathSegmentName``)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


def _check_path_segment(value: str, what: str) -> str:
    """``value`` if it can be a path segment, else client-go's request error (``invalid namespace "..":
    [may not be '..']``) as a ``ValueError``."""
    errors = _path_segment_errors(value)
    if errors:
        raise ValueError(f"invalid {what} {json.dumps(value, ensure_ascii=False)}: [{' '.join(errors)}]")
    return value


def _namespace(event: dict[str, Any]) -> str:
    ns = (event.get("metadata") or {}).get("namespace") or "default"
    return _check_path_segment(str(ns), "namespace")


def _name(event: dict[str, Any]) -> str:
    name = (event.get("metadata") or {}).get("name")
    if not name:
        raise ValueError("event has no metadata.name")
    return str(name)


def _path_key(event: dict[str, Any]) -> tuple[str, str]:
    """The namespace and name of the event a patch goes to, checked as the clients' request paths are."""
    namespace = _namespace(event)
    return namespace, _check_path_segment(_name(event), "resource name")


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    # The count patch only sets scalar fields and merges maps, where strategic merge is a plain merge.
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


# The API server's limit on a note (events.k8s.io/v1), or the message of an event with an eventTime, in bytes.
_NOTE_LIMIT = 1024


def _group(event: dict[str, Any]) -> str:
    """The API group an event is written to: core/v1 events refer to their object as ``involvedObject``."""
    return "" if "involvedObject" in event else "events.k8s.io"


# The namespaces an event about a cluster-scoped object may be stored in (``legacyValidateEvent``): "default"
# (or none, which a namespaced request cannot give) without an ``eventTime``; with one, "default" or "kube-system".
_CLUSTER_SCOPED_EVENT_NAMESPACES = {False: ("", "default"), True: ("default", "kube-system")}


def _validation_errors(event: dict[str, Any], namespace: str, name: str) -> list[tuple[str, str, str]]:
    """What the API server's validation of an event created in ``namespace`` finds, as ``(field, value,
    detail)``, in its order (``legacyValidateEvent``, then the name as a path segment): the event's namespace
    against its object's (the same one; "default" for a cluster-scoped object, or "kube-system" for one with an
    ``eventTime``); the note limit for events with an ``eventTime``."""
    errors = []
    timed = bool(event.get("eventTime"))
    ref_namespace = str((event.get("regarding" if _group(event) else "involvedObject") or {}).get("namespace") or "")
    if ref_namespace:
        mismatch = not timed and namespace != ref_namespace  # with an eventTime, the server does not compare them
    else:
        mismatch = namespace not in _CLUSTER_SCOPED_EVENT_NAMESPACES[timed]
    if mismatch:
        errors.append(("involvedObject.namespace", ref_namespace, "does not match event.namespace"))
    if timed:
        text = event.get("note" if _group(event) else "message") or ""
        if len(str(text).encode()) > _NOTE_LIMIT:
            errors.append(("message", "", f"can have at most {_NOTE_LIMIT} characters"))
    return errors + [("metadata.name", name, why) for why in _path_segment_errors(name)]


class MemorySink:
    """Keeps events as an API server would, and refuses what it would refuse with the same status and
    ``Status`` body (``ApiError``, its ``body``):

    * a create in a namespace that does not exist: 404 ``namespaces "x" not found`` (only if ``namespaces`` is
      given: the namespaces that exist; by default every namespace does);
    * a create the server's validation refuses: 422 ``Invalid`` (a name that cannot be a path segment; a note,
      or the message of an event with an ``eventTime``, over 1024 bytes; an event in another namespace than its
      object's, or, for a cluster-scoped object, in another than ``default``, which ``make_event`` chooses);
    * a create of a name that is stored already: 409 ``AlreadyExists``;
    * a patch of an event that is not stored: 404 ``NotFound``.

    An event without ``involvedObject`` is taken as an events.k8s.io/v1 one: its errors name the resource
    ``events.events.k8s.io``, as the server's answers on that API do. Every write gets a new
    ``resourceVersion``. A namespace, or a patch's name, that the client sinks refuse raises the same
    ``ValueError``. Thread-safe.

    ``events()`` lists what is stored; ``writes`` lists every successful call as ``("create" | "patch",
    event)``.
    """

    def __init__(self, namespaces: Iterable[str] | None = None) -> None:
        self._lock = threading.Lock()
        self._store: dict[tuple[str, str], dict[str, Any]] = {}
        self._versions = itertools.count(1)
        self.namespaces = None if namespaces is None else set(namespaces)
        self.writes: list[tuple[str, dict[str, Any]]] = []

    def create(self, event: dict[str, Any]) -> dict[str, Any]:
        key = (_namespace(event), _name(event))
        # The server's order: the namespace (admission), validation, then the store.
        if self.namespaces is not None and key[0] not in self.namespaces:
            raise ApiError._from_status(_apistatus.not_found("", "namespaces", key[0]))
        errors = _validation_errors(event, *key)
        if errors:
            raise ApiError._from_status(_apistatus.invalid("Event", key[1], errors))
        with self._lock:
            if key in self._store:
                raise ApiError._from_status(_apistatus.already_exists(_group(event), "events", key[1]))
            stored = copy.deepcopy(event)
            stored["metadata"]["namespace"] = key[0]
            stored["metadata"]["resourceVersion"] = str(next(self._versions))
            self._store[key] = stored
            self.writes.append(("create", copy.deepcopy(stored)))
            return copy.deepcopy(stored)

    def patch(self, event: dict[str, Any], patch: bytes) -> dict[str, Any]:
        key = _path_key(event)
        changes = json.loads(patch)
        with self._lock:
            stored = self._store.get(key)
            if stored is None:
                raise ApiError._from_status(_apistatus.not_found(_group(event), "events", key[1]))
            _merge(stored, changes)
            stored["metadata"]["resourceVersion"] = str(next(self._versions))
            self.writes.append(("patch", copy.deepcopy(stored)))
            return copy.deepcopy(stored)

    def events(self) -> list[dict[str, Any]]:
        """The stored events, in the order they were created."""
        with self._lock:
            return [copy.deepcopy(e) for e in self._store.values()]

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored event ``namespace/name``, or None."""
        with self._lock:
            e = self._store.get((namespace, name))
            return copy.deepcopy(e) if e is not None else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._store)


class _CoreV1Client:
    """What both core/v1 sinks keep of the client: the API object, the request timeout, and its answers as
    dicts."""

    def __init__(self, core_v1_api: Any, request_timeout: float | timedelta = DEFAULT_REQUEST_TIMEOUT) -> None:
        self.api = core_v1_api
        self.request_timeout = _request_timeout(request_timeout)

    def _as_dict(self, obj: Any) -> dict[str, Any]:
        out = self.api.api_client.sanitize_for_serialization(obj)
        if not isinstance(out, dict):
            raise TypeError(f"the API answered {type(obj).__name__}, expected an Event")
        return out


class CoreV1Sink(_CoreV1Client):
    """Writes events with the official ``kubernetes`` client: ``CoreV1Sink(kubernetes.client.CoreV1Api())``.

    Creates in the event's namespace (POST ``/api/v1/namespaces/<ns>/events``) and patches with content type
    ``application/strategic-merge-patch+json`` (PATCH ``.../events/<name>``), as client-go's
    ``EventSinkImpl``; returns the server's event as a dict. Unlike client-go's REST client, the Python
    client does not retry 429 and 5xx answers itself; the broadcaster does (see the module docs).

    ``request_timeout`` (seconds or a timedelta, default ``DEFAULT_REQUEST_TIMEOUT``) bounds each
    request; a request that times out is retried by the broadcaster.
    """

    def create(self, event: dict[str, Any]) -> dict[str, Any]:
        """POSTs the event to its namespace; returns the stored event."""
        out = self.api.create_namespaced_event(_namespace(event), event, _request_timeout=self.request_timeout)
        return self._as_dict(out)

    def patch(self, event: dict[str, Any], patch: bytes) -> dict[str, Any]:
        """PATCHes the named event with a strategic merge patch; returns the stored event."""
        namespace, name = _path_key(event)
        out = self.api.patch_namespaced_event(
            name, namespace, json.loads(patch), _content_type=STRATEGIC_MERGE_PATCH,
            _request_timeout=self.request_timeout,
        )
        return self._as_dict(out)


class AsyncCoreV1Sink(_CoreV1Client):
    """``CoreV1Sink`` for ``kubernetes_asyncio``: ``AsyncCoreV1Sink(kubernetes_asyncio.client.CoreV1Api())``.

    Start recording to it from a coroutine: its calls run on that coroutine's event loop. ``request_timeout``
    (seconds or a timedelta, default ``DEFAULT_REQUEST_TIMEOUT``) bounds each request, as for
    ``CoreV1Sink``.
    """

    async def create(self, event: dict[str, Any]) -> dict[str, Any]:
        """POSTs the event to its namespace; returns the stored event."""
        out = await self.api.create_namespaced_event(_namespace(event), event, _request_timeout=self.request_timeout)
        return self._as_dict(out)

    async def patch(self, event: dict[str, Any], patch: bytes) -> dict[str, Any]:
        """PATCHes the named event with a strategic merge patch; returns the stored event."""
        namespace, name = _path_key(event)
        out = await self.api.patch_namespaced_event(
            name, namespace, json.loads(patch), _content_type=STRATEGIC_MERGE_PATCH,
            _request_timeout=self.request_timeout,
        )
        return self._as_dict(out)


# -- events.k8s.io/v1 sinks --

def _plain_v1(api: Any, obj: Any) -> Any:
    """An answer of the official clients as a JSON-shaped dict."""
    if obj is None or isinstance(obj, dict):
        return obj
    return api.api_client.sanitize_for_serialization(obj)


_EVENTS_PATH = "/apis/events.k8s.io/v1/namespaces/{namespace}/events"


def _v1_path(event: dict[str, Any], verb: str) -> tuple[str, str]:
    """The namespace of an events.k8s.io/v1 event and, for a patch, its name: checked as the request path they
    go into."""
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

    ``request_timeout`` (seconds or a timedelta, default ``DEFAULT_REQUEST_TIMEOUT``) bounds each request (the
    client has no timeout of its own); a request that times out is retried by the broadcaster.
    """

    def __init__(self, events_v1_api: Any, request_timeout: float | timedelta = DEFAULT_REQUEST_TIMEOUT) -> None:
        self.api = events_v1_api
        self.request_timeout = _request_timeout(request_timeout)

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

    def create(self, event: dict[str, Any]) -> Any:
        """POSTs the event to its namespace; returns the stored event."""
        ns, _ = _v1_path(event, "create")
        if hasattr(self.api.api_client, "param_serialize"):
            return self._raw("POST", _EVENTS_PATH, {"namespace": ns}, event, "application/json")
        return _plain_v1(self.api, self.api.create_namespaced_event(ns, event, _request_timeout=self.request_timeout))

    def patch(self, event: dict[str, Any], patch: bytes) -> Any:
        """PATCHes the named event with a strategic merge patch; returns the stored event."""
        ns, name = _v1_path(event, "patch")
        body = json.loads(patch)
        if hasattr(self.api.api_client, "param_serialize"):
            path = _EVENTS_PATH + "/{name}"
            return self._raw("PATCH", path, {"namespace": ns, "name": name}, body, STRATEGIC_MERGE_PATCH)
        out = self.api.patch_namespaced_event(
            name, ns, body, _content_type=STRATEGIC_MERGE_PATCH, _request_timeout=self.request_timeout
        )
        return _plain_v1(self.api, out)


class AsyncEventsV1Sink:
    """``EventsV1Sink`` for ``kubernetes_asyncio``: ``AsyncEventsV1Sink(kubernetes_asyncio.client.EventsV1Api())``.

    Start recording to it from a coroutine: its calls run on that coroutine's event loop, which must keep
    running while the broadcaster records; shut the broadcaster down with ``await broadcaster.aclose()`` (or
    ``async with``) so that the loop stays free for the last writes. Writes made once that loop has stopped
    are given up (``write_errors``).
    ``request_timeout`` and the checks of the namespace and name are those of ``EventsV1Sink``.
    """

    def __init__(self, events_v1_api: Any, request_timeout: float | timedelta = DEFAULT_REQUEST_TIMEOUT) -> None:
        self.api = events_v1_api
        self.request_timeout = _request_timeout(request_timeout)

    async def create(self, event: dict[str, Any]) -> Any:
        """POSTs the event to its namespace; returns the stored event."""
        ns, _ = _v1_path(event, "create")
        return _plain_v1(self.api,
                      await self.api.create_namespaced_event(ns, event, _request_timeout=self.request_timeout))

    async def patch(self, event: dict[str, Any], patch: bytes) -> Any:
        """PATCHes the named event with a strategic merge patch; returns the stored event."""
        ns, name = _v1_path(event, "patch")
        out = await self.api.patch_namespaced_event(
            name, ns, json.loads(patch), _content_type=STRATEGIC_MERGE_PATCH, _request_timeout=self.request_timeout
        )
        return _plain_v1(self.api, out)
