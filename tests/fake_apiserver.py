"""A local HTTP server that plays the API server's events endpoints, for testing sinks with the real clients.

``FakeApiServer`` keeps events per namespace and name under a path prefix (``/api/v1`` for core/v1 Events,
``/apis/events.k8s.io/v1`` for events.k8s.io) and answers POST (create), PATCH (merge of the patch into the
stored event) and GET (list) as the API server does, with its status codes and ``Status`` bodies
(``kubevents._apistatus``): 409 on a create of a stored name, 404 on a patch of a missing event, 422 for a note
over 1 KiB, 400 for a MicroTime without its six digits; stored timestamps are written back at the server's
precision (seconds for ``Time``, microseconds for ``MicroTime``). It records every request: method, path,
content type and the decoded JSON body. ``fail_next(status, times)`` makes the next requests fail with an
error Status; ``hang_next(times)`` makes the next requests go unanswered until ``release()`` (serve them from
a threaded ``HTTPServer``, so that other requests are answered meanwhile).

``FakeCluster`` puts both event APIs behind the rest of what the integration tests use of a real cluster:
bearer tokens (401 for an unknown one), an admin who may do anything and service accounts who may do nothing
(403, as RBAC without bindings), namespaces (a create in a missing one is 404 ``namespaces "x" not found``),
service accounts and their tokens (TokenRequest), and the discovery of events.k8s.io/v1.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import secrets
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from kubevents import _apistatus
from kubevents.sinks import _merge, _validation_errors  # as MemorySink applies and validates them

_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
            422: "Invalid", 429: "TooManyRequests", 503: "ServiceUnavailable", 504: "Timeout"}

# Where events carry a timestamp, and whether it is a MicroTime (RFC 3339 with exactly six digits, stored and
# served so) rather than a Time (RFC 3339, stored and served in whole seconds: its protobuf form keeps no more).
_TIMES = {"firstTimestamp": False, "lastTimestamp": False, "deprecatedFirstTimestamp": False,
          "deprecatedLastTimestamp": False, "eventTime": True, "series.lastObservedTime": True}
# What Go's time.Parse takes with the RFC3339 and RFC3339Micro layouts.
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
_MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)")


@dataclass
class SeenRequest:
    method: str
    path: str
    content_type: str | None
    body: Any


def json_response(body: Any, status: int) -> Response:
    return Response(_apistatus.to_json(body), status=status, content_type="application/json")


class _BadTime(ValueError):
    pass


def _server_times(event: dict[str, Any]) -> None:
    """Writes the event's timestamps as the server stores and serves them, in UTC. Raises ``_BadTime`` for a
    value its decoder refuses."""
    for path, micro in _TIMES.items():
        *parents, leaf = path.split(".")
        holder = event
        for p in parents:
            holder = holder.get(p) or {}
        value = holder.get(leaf)
        if value is None:
            continue
        if not isinstance(value, str) or not (_MICRO_TIME if micro else _TIME).fullmatch(value):
            raise _BadTime(str(value), micro)
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(timezone.utc)
        holder[leaf] = parsed.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def _bad_request(kind: str, version: str, error: _BadTime) -> dict[str, Any]:
    """The decoder's refusal (``transformDecodeError`` around Go's ``time.Parse`` error, worded for a MicroTime
    whose fraction is missing or short, and for a Time that is no timestamp at all)."""
    value, micro = error.args
    layout, rest, element = ("2006-01-02T15:04:05.000000Z07:00", value[19:], ".000000") if micro \
        else ("2006-01-02T15:04:05Z07:00", value, "2006")
    return _apistatus.status(400, "BadRequest", f"{kind} in version {json.dumps(version)} cannot be handled as a "
                             f"{kind}: parsing time {json.dumps(value)} as {json.dumps(layout)}: cannot parse "
                             f"{json.dumps(rest)} as {json.dumps(element)}")


class FakeApiServer:
    def __init__(self, server: HTTPServer, prefix: str = "/api/v1", kind: str = "Event", api_version: str = "v1",
                 cluster: FakeCluster | None = None):
        self.server = server
        self.prefix = prefix
        self.kind = kind
        self.api_version = api_version
        # "/apis/<group>/<version>"; the core group is "".
        self.group = prefix.split("/")[2] if prefix.startswith("/apis/") else ""
        self.cluster = cluster
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
        return self._status(503, "released")

    def _status(self, code: int, message: str) -> Response:
        return json_response(_apistatus.status(code, _REASONS.get(code, "InternalError"), message), code)

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
                return self._status(code, f"injected {code}")
            verb = {"POST": "create", "PATCH": "patch", "GET": "get" if name else "list"}.get(request.method, "")
            if self.cluster is not None:
                refused = self.cluster.refusal(request, verb, self.group, "events", namespace, name or "")
                if refused is not None:
                    return refused
            if verb == "create" and name is None:
                return self._create(namespace, body)
            if verb == "patch" and name is not None:
                return self._patch(namespace, name, body)
            if verb == "list":
                items = [e for (ns, _), e in self.events.items() if ns == namespace]
                return json_response({"kind": f"{self.kind}List", "apiVersion": self.api_version,
                                      "metadata": {"resourceVersion": str(next(self._versions))}, "items": items}, 200)
        return self._status(405, f"{request.method} {request.path}")

    def _create(self, namespace: str, body: dict[str, Any]) -> Response:
        # The server's order: admission (the namespace), decoding, validation, then the store.
        if self.cluster is not None and namespace not in self.cluster.namespaces:
            return json_response(_apistatus.not_found("", "namespaces", namespace), 404)
        stored = copy.deepcopy(body)
        try:
            _server_times(stored)
        except _BadTime as e:
            return json_response(_bad_request(self.kind, self.api_version.split("/")[-1], e), 400)
        name = stored["metadata"]["name"]
        errors = _validation_errors(stored, name)
        if errors:
            return json_response(_apistatus.invalid("Event", name, errors), 422)
        key = (namespace, name)
        if key in self.events:
            return json_response(_apistatus.already_exists(self.group, "events", name), 409)
        stored.setdefault("kind", self.kind)
        stored.setdefault("apiVersion", self.api_version)
        stored["metadata"]["namespace"] = namespace
        stored["metadata"]["resourceVersion"] = str(next(self._versions))
        self.events[key] = stored
        return json_response(stored, 201)

    def _patch(self, namespace: str, name: str, body: dict[str, Any]) -> Response:
        stored = self.events.get((namespace, name))
        if stored is None:
            return json_response(_apistatus.not_found(self.group, "events", name), 404)
        patched = copy.deepcopy(stored)
        _merge(patched, body)
        try:
            _server_times(patched)
        except _BadTime as e:
            return json_response(_bad_request(self.kind, self.api_version.split("/")[-1], e), 400)
        patched["metadata"]["resourceVersion"] = str(next(self._versions))
        self.events[(namespace, name)] = patched
        return json_response(patched, 200)


EVENTS_V1 = "/apis/events.k8s.io/v1"

# What the server lists for events.k8s.io/v1 (GET /apis/events.k8s.io/v1).
EVENTS_V1_DISCOVERY = {
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "events.k8s.io/v1",
    "resources": [{"name": "events", "singularName": "event", "namespaced": True, "kind": "Event",
                   "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                   "shortNames": ["ev"]}],
}


class FakeCluster:
    """The API server of a cluster, as far as the integration tests use one (see the module docs).

    ``ADMIN_TOKEN`` authenticates as a user who may do anything; a TokenRequest for a service account returns
    a token of ``system:serviceaccount:<namespace>:<name>``, who may do nothing else (no RBAC bindings). A
    request without a token is ``system:anonymous``'s. ``serves_events_v1=False`` plays a server without
    events.k8s.io/v1, which answers its paths 404 ``404 page not found`` (Go's ``http.NotFound``).
    """

    ADMIN = "kubernetes-admin"
    ADMIN_TOKEN = "kubevents-fake-admin-token"

    def __init__(self, server: HTTPServer, serves_events_v1: bool = True):
        self.server = server
        self.serves_events_v1 = serves_events_v1
        self.namespaces = {"default", "kube-system", "kube-public"}
        self.service_accounts: set[tuple[str, str]] = set()
        self.tokens = {self.ADMIN_TOKEN: self.ADMIN}
        self.core_v1 = FakeApiServer(server, cluster=self)
        self.events_v1 = FakeApiServer(server, prefix=EVENTS_V1, api_version="events.k8s.io/v1", cluster=self) \
            if serves_events_v1 else None
        self._lock = threading.Lock()
        server.expect_request(re.compile(r"^/api/v1/namespaces(/[^/]+)?$")).respond_with_handler(self._namespaces)
        server.expect_request(re.compile(r"^/api/v1/namespaces/[^/]+/serviceaccounts(/[^/]+/token)?$")) \
            .respond_with_handler(self._service_accounts)
        server.expect_request(re.compile(r"^/apis/events\.k8s\.io/v1/?$")).respond_with_handler(self._discovery)
        if not serves_events_v1:
            server.expect_request(re.compile(r"^/apis/events\.k8s\.io/.*")).respond_with_data(
                "404 page not found\n", status=404, content_type="text/plain; charset=utf-8")

    @property
    def host(self) -> str:
        return self.server.url_for("/").rstrip("/")

    def _user(self, request: Request) -> str | None:
        """The authenticated user, or None for credentials that are not valid."""
        header = request.headers.get("Authorization")
        if header is None:
            return "system:anonymous"
        scheme, _, token = header.partition(" ")
        return self.tokens.get(token) if scheme.lower() == "bearer" else None

    def refusal(self, request: Request, verb: str, group: str, resource: str, namespace: str, name: str = "") \
            -> Response | None:
        """The answer of the authentication and authorization filters, or None if the request may go on."""
        user = self._user(request)
        if user is None:
            return json_response(_apistatus.unauthorized(), 401)
        if user != self.ADMIN:
            return json_response(_apistatus.forbidden(user, verb, group, resource, namespace, name), 403)
        return None

    def _namespaces(self, request: Request) -> Response:
        name = request.path.rsplit("/", 1)[-1] if request.path.count("/") == 4 else ""
        verb = {"POST": "create", "DELETE": "delete", "GET": "get" if name else "list"}.get(request.method, "")
        refused = self.refusal(request, verb, "", "namespaces", "", name)
        if refused is not None:
            return refused
        with self._lock:
            if verb == "create" and not name:
                name = json.loads(request.get_data())["metadata"]["name"]
                if name in self.namespaces:
                    return json_response(_apistatus.already_exists("", "namespaces", name), 409)
                self.namespaces.add(name)
                return json_response(_namespace(name, "Active"), 201)
            if verb in ("get", "delete") and name:
                if name not in self.namespaces:
                    return json_response(_apistatus.not_found("", "namespaces", name), 404)
                if verb == "get":
                    return json_response(_namespace(name, "Active"), 200)
                # The server deletes the namespace's content in the background; here at once.
                self.namespaces.discard(name)
                for api in (self.core_v1, self.events_v1):
                    if api is not None:
                        for key in [k for k in api.events if k[0] == name]:
                            del api.events[key]
                return json_response(_namespace(name, "Terminating"), 200)
        return json_response(_apistatus.status(405, "MethodNotAllowed", f"{request.method} {request.path}"), 405)

    def _service_accounts(self, request: Request) -> Response:
        parts = request.path.split("/")  # "", api, v1, namespaces, <ns>, serviceaccounts[, <name>, token]
        namespace, name = parts[4], (parts[6] if len(parts) > 6 else "")
        resource = "serviceaccounts/token" if name else "serviceaccounts"
        refused = self.refusal(request, "create", "", resource, namespace, name)
        if refused is not None or request.method != "POST":
            return refused or json_response(_apistatus.status(405, "MethodNotAllowed", request.method), 405)
        with self._lock:
            if namespace not in self.namespaces:
                return json_response(_apistatus.not_found("", "namespaces", namespace), 404)
            if not name:
                name = json.loads(request.get_data())["metadata"]["name"]
                if (namespace, name) in self.service_accounts:
                    return json_response(_apistatus.already_exists("", "serviceaccounts", name), 409)
                self.service_accounts.add((namespace, name))
                return json_response({"kind": "ServiceAccount", "apiVersion": "v1",
                                      "metadata": {"name": name, "namespace": namespace}}, 201)
            if (namespace, name) not in self.service_accounts:
                return json_response(_apistatus.not_found("", "serviceaccounts", name), 404)
            token = secrets.token_urlsafe(24)
            self.tokens[token] = f"system:serviceaccount:{namespace}:{name}"
            spec = json.loads(request.get_data()).get("spec") or {}
            return json_response({"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                                  "metadata": {"name": name, "namespace": namespace},
                                  "spec": {"audiences": spec.get("audiences") or ["https://kubernetes.default.svc"],
                                           "expirationSeconds": spec.get("expirationSeconds", 3600)},
                                  "status": {"token": token, "expirationTimestamp": "2099-01-01T00:00:00Z"}}, 201)

    def _discovery(self, request: Request) -> Response:
        if self._user(request) is None:
            return json_response(_apistatus.unauthorized(), 401)
        if not self.serves_events_v1:
            return Response("404 page not found\n", status=404, content_type="text/plain; charset=utf-8")
        return json_response(EVENTS_V1_DISCOVERY, 200)


def _namespace(name: str, phase: str) -> dict[str, Any]:
    return {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": name}, "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": phase}}
