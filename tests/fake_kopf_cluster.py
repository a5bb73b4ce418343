"""A fake API server that a real kopf operator runs against, in-process: just what kopf needs for ConfigMaps.

``FakeKopfCluster(server)`` answers discovery (``/api``, ``/api/v1``, ``/apis``), lists and watches the
namespaces (``default`` and ``ns``, which never change), lists, watches (a stream of ``ADDED``/``MODIFIED``
changes newer than the ``resourceVersion`` asked for) and merge-patches ConfigMaps (kopf's annotations and
finalizers), and plays the core/v1 events endpoints with :class:`fake_apiserver.FakeApiServer`
(``cluster.events``). ``create(namespace, name)`` makes a ConfigMap as ``kubectl create`` would. Serve it
from a threaded ``HTTPServer``: a watch holds its request open until ``close()``. ``gate_events()`` holds every
events request until ``open_events()``.

Only the fields kopf reads are kept: no field validation, no deletion, no status subresource (a ConfigMap has
none, so a ``status`` in a patch is dropped, as the API server drops unknown fields of a built-in kind).
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
import uuid
from collections.abc import Iterator
from typing import Any

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from fake_apiserver import FakeApiServer
from kubevents.sinks import _merge  # a JSON merge patch (RFC 7386) is the same plain merge

_CONFIGMAPS = {
    "name": "configmaps", "singularName": "configmap", "namespaced": True, "kind": "ConfigMap",
    "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"], "shortNames": ["cm"],
}
_NAMESPACES = {
    "name": "namespaces", "singularName": "namespace", "namespaced": False, "kind": "Namespace",
    "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"], "shortNames": ["ns"],
}
_EVENTS = {
    "name": "events", "singularName": "event", "namespaced": True, "kind": "Event",
    "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"], "shortNames": ["ev"],
}
# How often a watch stream looks for changes and for close().
_WATCH_POLL = 0.05


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status=status, content_type="application/json")


def _status(code: int, reason: str, message: str) -> Response:
    return _json({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                  "reason": reason, "code": code}, code)


class FakeKopfCluster:
    """Just enough of an API server for a kopf operator of ConfigMaps (see the module docs)."""

    def __init__(self, server: HTTPServer):
        self.server = server
        self._events_open = threading.Event()
        self._events_open.set()
        # Registered first, so it takes the events requests from the FakeApiServer's handler and passes them on.
        events_path = re.compile(r"^/api/v1/namespaces/[^/]+/events(?:/[^/]+)?$")
        server.expect_request(events_path).respond_with_handler(self._gated)
        self.events = FakeApiServer(server)
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._changes: list[tuple[int, str, dict[str, Any]]] = []  # (resourceVersion, type, object)
        self._versions = itertools.count(1)
        self._lock = threading.Condition()
        self._closed = False
        self.events_waiting = 0  # events requests held by the gate now
        self.watches = 0  # ConfigMap watch streams opened (kopf is up once it watches)
        server.expect_request("/api").respond_with_json({"kind": "APIVersions", "versions": ["v1"]})
        server.expect_request("/apis").respond_with_json({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
        server.expect_request("/api/v1").respond_with_json(
            {"kind": "APIResourceList", "groupVersion": "v1", "resources": [_CONFIGMAPS, _NAMESPACES, _EVENTS]}
        )
        server.expect_request("/api/v1/namespaces").respond_with_handler(self._namespaces)
        self._pattern = re.compile(r"^/api/v1/(?:namespaces/([^/]+)/)?configmaps(?:/([^/]+))?$")
        server.expect_request(self._pattern).respond_with_handler(self._handle)

    @property
    def url(self) -> str:
        return self.server.url_for("/").rstrip("/")

    def close(self) -> None:
        """Ends the watch streams (before the HTTP server stops) and opens the events gate."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        self._events_open.set()

    # -- the events gate --

    def gate_events(self) -> None:
        """Holds every later events request until ``open_events()``."""
        self._events_open.clear()

    def open_events(self) -> None:
        self._events_open.set()

    def _gated(self, request: Request) -> Response:
        if not self._events_open.is_set():
            with self._lock:
                self.events_waiting += 1
            try:
                if not self._events_open.wait(60):
                    return _status(503, "ServiceUnavailable", "the events gate stayed closed")
            finally:
                with self._lock:
                    self.events_waiting -= 1
        return self.events._handle(request)

    # -- ConfigMaps --

    def create(self, namespace: str, name: str) -> dict[str, Any]:
        """Creates a ConfigMap as ``kubectl create configmap`` would; the watches see it ``ADDED``."""
        obj = {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4()),
                         "creationTimestamp": "2024-01-01T00:00:00Z"},
        }
        with self._lock:
            self._store("ADDED", obj)
        return copy.deepcopy(obj)

    def _store(self, change: str, obj: dict[str, Any]) -> None:
        version = next(self._versions)
        obj["metadata"]["resourceVersion"] = str(version)
        self.objects[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj
        self._changes.append((version, change, copy.deepcopy(obj)))
        self._lock.notify_all()

    def _namespaces(self, request: Request) -> Response:
        # kopf lists the namespaces to match its --namespace patterns.
        if request.args.get("watch") in ("true", "1"):
            return Response(self._idle(), content_type="application/json", direct_passthrough=True)
        items = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in ("default", "ns")]
        return _json({"kind": "NamespaceList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items})

    def _handle(self, request: Request) -> Response:
        m = self._pattern.match(request.path)
        assert m is not None
        namespace, name = m.group(1), m.group(2)
        if request.method == "GET" and name is None:
            if request.args.get("watch") in ("true", "1"):
                since = int(request.args.get("resourceVersion") or 0)
                with self._lock:
                    self.watches += 1
                return Response(self._watch(namespace, since), content_type="application/json", direct_passthrough=True)
            with self._lock:
                items = [copy.deepcopy(o) for (ns, _), o in self.objects.items() if namespace in (None, ns)]
                version = str(self._changes[-1][0]) if self._changes else "0"
            return _json({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": version},
                          "items": items})
        if namespace is None or name is None:
            return _status(405, "MethodNotAllowed", f"{request.method} {request.path}")
        with self._lock:
            obj = self.objects.get((namespace, name))
            if obj is None:
                return _status(404, "NotFound", f'configmaps "{name}" not found')
            if request.method == "PATCH":
                patch = json.loads(request.get_data())
                patch.pop("status", None)  # a ConfigMap has none
                _merge(obj, patch)
                self._store("MODIFIED", obj)
                return _json(obj)
        return _status(405, "MethodNotAllowed", f"{request.method} {request.path}")

    def _watch(self, namespace: str | None, since: int) -> Iterator[bytes]:
        sent = since
        while True:
            with self._lock:
                if self._closed:
                    return
                new = [(v, t, o) for v, t, o in self._changes
                       if v > sent and namespace in (None, o["metadata"]["namespace"])]
                if not new:
                    self._lock.wait(_WATCH_POLL)
                    continue
            for version, change, obj in new:
                sent = version
                yield json.dumps({"type": change, "object": obj}).encode() + b"\n"

    def _idle(self) -> Iterator[bytes]:
        with self._lock:
            while not self._closed:
                self._lock.wait(_WATCH_POLL)
        yield from ()
