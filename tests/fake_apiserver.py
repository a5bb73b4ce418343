"""A local HTTP server that plays the API server's events endpoints, for testing sinks with the real clients.

It keeps events per namespace and name, answers POST (create, 409 if the name exists) and PATCH (merge of the
patch into the stored event, 404 if there is none) under a path prefix (``/api/v1`` for core/v1 Events,
``/apis/events.k8s.io/v1`` for events.k8s.io), and records every request: method, path, content type and the
decoded JSON body. ``fail_next(status, times)`` makes the next requests fail with an error Status;
``hang_next(times)`` makes the next requests go unanswered until ``release()`` (serve them from a threaded
``HTTPServer``, so that other requests are answered meanwhile).
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
from dataclasses import dataclass
from typing import Any

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from kubevents.sinks import _merge  # the strategic merge of a count patch, as MemorySink applies it


@dataclass
class SeenRequest:
    method: str
    path: str
    content_type: str | None
    body: Any


class FakeApiServer:
    def __init__(self, server: HTTPServer, prefix: str = "/api/v1", kind: str = "Event", api_version: str = "v1"):
        self.server = server
        self.prefix = prefix
        self.kind = kind
        self.api_version = api_version
        self.events: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[SeenRequest] = []
        self._failures: list[int] = []
        self._hangs = 0
        self._released = threading.Event()
        self._versions = itertools.count(1)
        self._suffixes = itertools.count(1)
        self._lock = threading.Lock()
        pattern = re.compile("^" + re.escape(prefix) + r"/namespaces/([^/]+)/events(?:/([^/]+))?$")
        self._pattern = pattern
        server.expect_request(pattern).respond_with_handler(self._handle)

    @property
    def host(self) -> str:
        return self.server.url_for("/").rstrip("/")

    def fail_next(self, status: int, times: int = 1) -> None:
        with self._lock:
            self._failures.extend([status] * times)

    def hang_next(self, times: int = 1) -> None:
        with self._lock:
            self._hangs += times

    def release(self) -> None:
        """Ends the hung requests (their clients have given up by then)."""
        self._released.set()

    def hung(self, request: Request) -> Response:
        """A handler that answers only after ``release()``."""
        self._released.wait(300)
        return self._status(503, "ServiceUnavailable", "released")

    def _status(self, code: int, reason: str, message: str) -> Response:
        body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason, "code": code}
        return Response(json.dumps(body), status=code, content_type="application/json")

    def _handle(self, request: Request) -> Response:
        m = self._pattern.match(request.path)
        assert m is not None
        namespace, name = m.group(1), m.group(2)
        raw = request.get_data()
        body = json.loads(raw) if raw else None
        with self._lock:
            self.requests.append(SeenRequest(request.method, request.path, request.headers.get("Content-Type"), body))
            hang = self._hangs > 0
            self._hangs -= hang
        if hang:
            return self.hung(request)
        if request.method == "POST" and body and "name" not in body["metadata"] and "generateName" in body["metadata"]:
            # The API server makes the name (a random 5-character suffix; a counter here, to be predictable).
            body = copy.deepcopy(body)
            body["metadata"]["name"] = f'{body["metadata"]["generateName"]}{next(self._suffixes):05d}'
        with self._lock:
            if self._failures:
                code = self._failures.pop(0)
                return self._status(code, "InternalError" if code >= 500 else "Invalid", f"injected {code}")
            if request.method == "POST" and name is None:
                key = (namespace, body["metadata"]["name"])
                if key in self.events:
                    return self._status(409, "AlreadyExists", f'events "{key[1]}" already exists')
                stored = copy.deepcopy(body)
                stored.setdefault("kind", self.kind)
                stored.setdefault("apiVersion", self.api_version)
                stored["metadata"]["namespace"] = namespace
                stored["metadata"]["resourceVersion"] = str(next(self._versions))
                self.events[key] = stored
                return Response(json.dumps(stored), status=201, content_type="application/json")
            if request.method == "PATCH" and name is not None:
                stored = self.events.get((namespace, name))
                if stored is None:
                    return self._status(404, "NotFound", f'events "{name}" not found')
                _merge(stored, body)
                stored["metadata"]["resourceVersion"] = str(next(self._versions))
                return Response(json.dumps(stored), status=200, content_type="application/json")
        return self._status(405, "MethodNotAllowed", f"{request.method} {request.path}")
