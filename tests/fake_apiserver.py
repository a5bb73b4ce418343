"""A local HTTP server that plays the API server's events endpoints, for testing sinks with the real clients.

``FakeApiServer`` keeps events per namespace and name under a path prefix (``/api/v1`` for core/v1 Events,
``/apis/events.k8s.io/v1`` for events.k8s.io) and answers POST (create), PATCH (merge of the patch into the
stored event), DELETE and GET (list, and watch) as the API server does, with its status codes and ``Status``
bodies (``kubevents._apistatus``): 409 on a create of a stored name, 404 on a patch of a missing event, 422 for
a note over 1 KiB or an event in another namespace than its object's, 400 for a MicroTime without its six
digits; stored timestamps are written back at the server's precision (seconds for ``Time``, microseconds for
``MicroTime``). Lists and watches, in a namespace or across all of them (``<prefix>/events``), are served by a
:class:`WatchLog`: pages of ``limit`` items with a ``continue`` token, and streams of the changes after a
``resourceVersion`` (410 ``Expired`` once it is too old). It records every request: method, path, content
type and the decoded JSON body. ``fail_next(status, times)`` makes the next requests fail with an error Status;
``hang_next(times)`` makes the next requests go unanswered until ``release()`` (serve them from a threaded
``HTTPServer``, so that other requests are answered meanwhile); ``close_gate()`` holds them until
``open_gate()``, then answers them.

``FakeCluster`` puts both event APIs behind the rest of what the integration tests use of a real cluster:
bearer tokens (401 for an unknown one), an admin who may do anything and service accounts who may do nothing
(403, as RBAC without bindings) but what ``grant`` allows, namespaces (a create in a missing one is 404
``namespaces "x" not found``),
service accounts and their tokens (TokenRequest), the discovery of events.k8s.io/v1, and pods
(:class:`FakePods`: create, get, list and watch, with a stand-in for the kubelet's status writes).

Serve a fake whose watches a test opens from a threaded ``HTTPServer``, and ``close()`` it before the server
stops: a watch stream holds its request open.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import secrets
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
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


def _go_bool(value: str | None) -> bool:
    """A query parameter as Go's ``strconv.ParseBool`` reads it (unparsable: false)."""
    return (value or "") in ("1", "t", "T", "TRUE", "true", "True")


def _query_int(request: Request, name: str) -> int | None:
    value = request.args.get(name)
    return int(value) if value else None


def _verb(request: Request, name: str | None) -> str:
    """The request's verb as RBAC names it."""
    verb = {"POST": "create", "PATCH": "patch", "DELETE": "delete", "GET": "get" if name else "list"}.get(
        request.method, "")
    return "watch" if verb == "list" and _go_bool(request.args.get("watch")) else verb


def _delete_namespace(objects: dict[tuple[str, str], dict[str, Any]], namespace: str, versions: Iterator[int],
                      watch: WatchLog) -> None:
    """Deletes the namespace's objects, as the namespace controller does once the namespace is deleted."""
    for key in [k for k in objects if k[0] == namespace]:
        gone = objects.pop(key)
        gone["metadata"]["resourceVersion"] = str(next(versions))
        watch.changed("DELETED", gone)


class WatchLog:
    """The changes of one resource, kept as the API server keeps them to serve lists and watches.

    The store calls ``changed(type, object)`` for every create, update and delete, with the object's new
    ``resourceVersion`` set. ``list_response`` answers a list (``limit`` and ``continue``: pages of a snapshot
    taken at the first page, as etcd serves them), ``watch_response`` a watch: the changes after the
    ``resourceVersion`` asked for, each a line ``{"type": ..., "object": ...}``; without one, ``ADDED`` for each
    current object first. A stream ends after ``timeoutSeconds``, at ``end_watches()`` and ``expire()``, and at
    ``close()``. After ``expire()`` (an API server restarting with a fresh watch cache), a watch from a
    ``resourceVersion`` handed out before gets the ``ERROR`` event of a real server, a 410 ``Expired`` Status,
    and ends; the client lists again. ``pause()`` holds new watch requests until ``resume()``.
    """

    # How often a watch stream looks for changes and for its end.
    POLL = 0.05

    def __init__(self, list_kind: str, api_version: str) -> None:
        self.list_kind = list_kind
        self.api_version = api_version
        self._cond = threading.Condition()
        self._log: list[tuple[int, str, str, dict[str, Any]]] = []  # (resourceVersion, type, namespace, object)
        self._compacted = 0  # a watch from a resourceVersion below this one is 410 Expired
        self._generation = 0  # end_watches() ends the streams of earlier generations
        self._closed = False
        self._paused = False
        self._pages: dict[str, list[dict[str, Any]]] = {}
        self._tokens = itertools.count(1)
        self.watches = 0  # watch streams opened

    def changed(self, change: str, obj: dict[str, Any]) -> None:
        with self._cond:
            self._log.append((int(obj["metadata"]["resourceVersion"]), change,
                              obj["metadata"].get("namespace", ""), copy.deepcopy(obj)))
            self._cond.notify_all()

    def expire(self) -> None:
        """Ends the open watch streams and makes every resourceVersion handed out so far too old to watch from
        (410 Expired), as when an API server restarts and its watch cache starts over."""
        with self._cond:
            self._compacted = (self._log[-1][0] if self._log else self._compacted) + 1
            self._log.clear()
            self._generation += 1
            self._cond.notify_all()

    def pause(self) -> None:
        """Holds every later watch request until ``resume()`` (a server slow to answer them)."""
        with self._cond:
            self._paused = True

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def end_watches(self) -> None:
        """Ends the open watch streams, as an API server does when it restarts."""
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    def close(self) -> None:
        """Ends every watch stream, now and later (before the HTTP server stops)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def serve(self, request: Request, namespace: str | None, objects: dict[tuple[str, str], dict[str, Any]],
              versions: Iterator[int]) -> Response:
        """A list or a watch (``watch=true``) of the objects of ``namespace`` (None: all), keyed by namespace and
        name; a list is at the next of ``versions``."""
        items = [o for (ns, _), o in objects.items() if namespace in (None, ns)]
        if _go_bool(request.args.get("watch")):
            return self.watch_response(request, namespace, items)
        return self.list_response(request, items, next(versions))

    def list_response(self, request: Request, items: Iterable[dict[str, Any]], version: int) -> Response:
        """A page of ``items`` (the objects at ``version``, sorted by namespace and name), or the next page of
        the snapshot a ``continue`` token names."""
        token = request.args.get("continue")
        with self._cond:
            if token:
                rest = self._pages.pop(token, None)
                if rest is None:
                    return json_response(_apistatus.status(
                        410, "Expired", "The provided continue parameter is too old to display a consistent list "
                        "result. You can start a new list without the continue parameter."), 410)
                version = int(token.split(":", 1)[0])
            else:
                rest = sorted((copy.deepcopy(i) for i in items),
                              key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
            limit = _query_int(request, "limit")
            page, rest = (rest[:limit], rest[limit:]) if limit else (rest, [])
            metadata: dict[str, Any] = {"resourceVersion": str(version)}
            if rest:
                metadata["continue"] = f"{version}:{next(self._tokens)}"
                self._pages[metadata["continue"]] = rest
        return json_response({"kind": self.list_kind, "apiVersion": self.api_version, "metadata": metadata,
                              "items": page}, 200)

    def watch_response(self, request: Request, namespace: str | None, items: Iterable[dict[str, Any]]) -> Response:
        """The watch stream of the changes in ``namespace`` (None: all); ``items`` are the current objects, sent
        as ``ADDED`` first when the request names no resourceVersion."""
        since = int(request.args.get("resourceVersion") or 0)
        timeout = _query_int(request, "timeoutSeconds")
        with self._cond:
            self.watches += 1
            generation = self._generation
            start = [] if since else [("ADDED", copy.deepcopy(o)) for o in items]
            if not since:
                since = self._log[-1][0] if self._log else self._compacted
        deadline = None if timeout is None else time.monotonic() + timeout
        return Response(self._stream(namespace, since, start, generation, deadline), content_type="application/json",
                        direct_passthrough=True)

    def _stream(self, namespace: str | None, since: int, start: list[tuple[str, dict[str, Any]]], generation: int,
                deadline: float | None) -> Iterator[bytes]:
        with self._cond:
            while self._paused and not self._closed:
                self._cond.wait()
        yield b""  # the server sends the headers at once (werkzeug sends them with the first write)
        if since < self._compacted:
            expired = _apistatus.status(410, "Expired", f"too old resource version: {since} ({self._compacted})")
            yield _watch_line("ERROR", expired)
            return
        for change, obj in start:
            yield _watch_line(change, obj)
        sent = since
        while True:
            with self._cond:
                if self._closed or self._generation != generation:
                    return
                if deadline is not None and time.monotonic() >= deadline:
                    return
                new = [(v, c, o) for v, c, ns, o in self._log if v > sent and namespace in (None, ns)]
                if not new:
                    self._cond.wait(self.POLL)
                    continue
            for version, change, obj in new:
                sent = version
                yield _watch_line(change, obj)


def _watch_line(change: str, obj: dict[str, Any]) -> bytes:
    return _apistatus.to_json({"type": change, "object": obj}).encode() + b"\n"


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
        self._open = threading.Event()
        self._open.set()
        self.held = 0  # requests held by the gate now
        self.watch = WatchLog(f"{kind}List", api_version)
        # The namespace's events, or (list and watch only) those of every namespace.
        pattern = re.compile("^" + re.escape(prefix) + r"(?:/namespaces/([^/]+))?/events(?:/([^/]+))?$")
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

    def close_gate(self) -> None:
        """Holds every later request until ``open_gate()`` (a server that is slow to answer), then answers it."""
        self._open.clear()

    def open_gate(self) -> None:
        self._open.set()

    def close(self) -> None:
        """Ends the watch streams and opens the gate (before the HTTP server stops)."""
        self.watch.close()
        self._open.set()

    def delete_namespace(self, namespace: str) -> None:
        with self._lock:
            _delete_namespace(self.events, namespace, self._versions, self.watch)

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
        if not self._open.is_set():
            with self._lock:
                self.held += 1
            try:
                if not self._open.wait(60):
                    return self._status(503, "the gate stayed closed")
            finally:
                with self._lock:
                    self.held -= 1
        if request.method == "POST" and body and "name" not in body["metadata"] and "generateName" in body["metadata"]:
            # The API server makes the name (a random 5-character suffix; a counter here, to be predictable).
            body = copy.deepcopy(body)
            body["metadata"]["name"] = f'{body["metadata"]["generateName"]}{next(self._suffixes):05d}'
        with self._lock:
            if self._failures:
                code = self._failures.pop(0)
                return self._status(code, f"injected {code}")
            verb = _verb(request, name)
            if self.cluster is not None:
                refused = self.cluster.refusal(request, verb, self.group, "events", namespace or "", name or "")
                if refused is not None:
                    return refused
            if verb in ("list", "watch"):
                return self.watch.serve(request, namespace, self.events, self._versions)
            if namespace is not None and verb == "create" and name is None:
                return self._create(namespace, body)
            if namespace is not None and verb == "patch" and name is not None:
                return self._patch(namespace, name, body)
            if namespace is not None and verb == "delete" and name is not None:
                return self._delete(namespace, name)
        return self._status(405, f"{request.method} {request.path}")

    def _delete(self, namespace: str, name: str) -> Response:
        gone = self.events.pop((namespace, name), None)
        if gone is None:
            return json_response(_apistatus.not_found(self.group, "events", name), 404)
        gone["metadata"]["resourceVersion"] = str(next(self._versions))
        self.watch.changed("DELETED", gone)
        details = {"name": name, "group": self.group, "kind": "events"}
        if not self.group:
            del details["group"]  # omitempty
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                              "details": details}, 200)

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
        errors = _validation_errors(stored, namespace, name)
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
        self.watch.changed("ADDED", stored)
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
        self.watch.changed("MODIFIED", patched)
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
    a token of ``system:serviceaccount:<namespace>:<name>``, who may do nothing else (no RBAC bindings) but
    what ``grant`` binds to it. A
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
        self.grants: list[tuple[str, str | None, list[dict[str, Any]]]] = []  # (user, namespace or None, rules)
        self.core_v1 = FakeApiServer(server, cluster=self)
        self.events_v1 = FakeApiServer(server, prefix=EVENTS_V1, api_version="events.k8s.io/v1", cluster=self) \
            if serves_events_v1 else None
        self.pods = FakePods(server, self)
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

    def close(self) -> None:
        """Ends the watch streams and opens the gates (before the HTTP server stops)."""
        for store in (self.core_v1, self.events_v1, self.pods):
            if store is not None:
                store.close()

    def api_client(self, token: str = ADMIN_TOKEN) -> Any:
        """An official ``kubernetes`` client of this server, authenticated with ``token`` (the admin's by
        default)."""
        import kubernetes.client

        cfg = kubernetes.client.Configuration(host=self.host)
        # "BearerToken" for the current clients, "authorization" for kubernetes < 35.
        cfg.api_key = {"BearerToken": f"Bearer {token}", "authorization": f"Bearer {token}"}
        return kubernetes.client.ApiClient(cfg)

    def kubeconfig(self, path: str, token: str = ADMIN_TOKEN) -> str:
        """Writes a kubeconfig for this server and ``token`` (the admin's by default) to ``path``; returns it."""
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.host}}],
            "users": [{"name": "admin", "user": {"token": token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "admin"}}],
        }
        with open(path, "w", encoding="utf-8") as f:
            json.dump(config, f)  # JSON is YAML
        return path

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
        if user != self.ADMIN and not self._allowed(user, verb, group, resource, namespace):
            return json_response(_apistatus.forbidden(user, verb, group, resource, namespace, name), 403)
        return None

    def grant(self, user: str, rules: list[dict[str, Any]], namespace: str | None = None) -> None:
        """Binds ``rules`` (the ``rules`` of a ClusterRole or Role manifest) to ``user``: in every namespace, as a
        ClusterRoleBinding does, or in ``namespace`` alone, as a RoleBinding."""
        with self._lock:
            self.grants.append((user, namespace, copy.deepcopy(rules)))

    def _allowed(self, user: str, verb: str, group: str, resource: str, namespace: str) -> bool:
        """RBAC: some rule bound to the user names the verb, the group and the resource (or "*")."""
        with self._lock:
            grants = list(self.grants)

        def matches(rule: dict[str, Any]) -> bool:
            wanted = (("verbs", verb), ("apiGroups", group), ("resources", resource))
            return all(set(rule.get(field) or []) & {value, "*"} for field, value in wanted)

        return any(who == user and where in (None, namespace) and matches(r) for who, where, rules in grants
                   for r in rules)

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
                for store in (self.core_v1, self.events_v1, self.pods):
                    if store is not None:
                        store.delete_namespace(name)
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


class FakePods:
    """Pods as the API server keeps them, for controllers that watch them: create (in a namespace that exists),
    get, list and watch (in a namespace or across all, through :class:`WatchLog`), with the cluster's
    authentication and authorization. No field validation, no scheduling, no kubelet: ``crash_loop`` writes the
    status a kubelet writes for a container in restart back-off, and watchers see it ``MODIFIED``.
    """

    def __init__(self, server: HTTPServer, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.watch = WatchLog("PodList", "v1")
        self._versions = itertools.count(1)
        self._lock = threading.Lock()
        self._pattern = re.compile(r"^/api/v1(?:/namespaces/([^/]+))?/pods(?:/([^/]+))?$")
        server.expect_request(self._pattern).respond_with_handler(self._handle)

    def close(self) -> None:
        self.watch.close()

    def delete_namespace(self, namespace: str) -> None:
        with self._lock:
            _delete_namespace(self.pods, namespace, self._versions, self.watch)

    def crash_loop(self, namespace: str, name: str, restarts: int, container: str = "app") -> dict[str, Any]:
        """Writes the status of a pod whose container exited and waits in restart back-off, after ``restarts``
        restarts, as the kubelet does; returns the pod."""
        with self._lock:
            pod = self.pods[(namespace, name)]
            uid = pod["metadata"]["uid"]
            delay = min(10 * 2 ** max(restarts - 1, 0), 300)
            pod["status"] = {
                "phase": "Running",
                "containerStatuses": [{
                    "name": container, "ready": False, "started": False, "restartCount": restarts,
                    "image": "busybox:1.36", "imageID": "docker.io/library/busybox@sha256:0",
                    "containerID": f"containerd://{restarts:064x}",
                    "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                                                 "startedAt": "2024-01-01T00:00:00Z",
                                                 "finishedAt": "2024-01-01T00:00:01Z"}},
                    "state": {"waiting": {"reason": "CrashLoopBackOff",
                                          "message": f"back-off {delay}s restarting failed container={container} "
                                                     f"pod={name}_{namespace}({uid})"}},
                }],
            }
            pod["metadata"]["resourceVersion"] = str(next(self._versions))
            self.watch.changed("MODIFIED", pod)
            return copy.deepcopy(pod)

    def _handle(self, request: Request) -> Response:
        m = self._pattern.match(request.path)
        assert m is not None
        namespace, name = m.group(1), m.group(2)
        verb = _verb(request, name)
        refused = self.cluster.refusal(request, verb, "", "pods", namespace or "", name or "")
        if refused is not None:
            return refused
        with self._lock:
            if verb in ("list", "watch"):
                return self.watch.serve(request, namespace, self.pods, self._versions)
            if namespace is not None and verb == "get" and name is not None:
                pod = self.pods.get((namespace, name))
                if pod is None:
                    return json_response(_apistatus.not_found("", "pods", name), 404)
                return json_response(pod, 200)
            if namespace is not None and verb == "create" and name is None:
                return self._create(namespace, json.loads(request.get_data()))
        return json_response(_apistatus.status(405, "MethodNotAllowed", f"{request.method} {request.path}"), 405)

    def _create(self, namespace: str, body: dict[str, Any]) -> Response:
        if namespace not in self.cluster.namespaces:
            return json_response(_apistatus.not_found("", "namespaces", namespace), 404)
        pod = copy.deepcopy(body)
        name = pod["metadata"]["name"]
        if (namespace, name) in self.pods:
            return json_response(_apistatus.already_exists("", "pods", name), 409)
        pod.update(kind="Pod", apiVersion="v1")
        pod["metadata"].update(namespace=namespace, uid=str(uuid.uuid4()), resourceVersion=str(next(self._versions)),
                               creationTimestamp=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
        pod["status"] = {"phase": "Pending"}
        self.pods[(namespace, name)] = pod
        self.watch.changed("ADDED", pod)
        return json_response(pod, 201)
