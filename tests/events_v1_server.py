"""A minimal events.k8s.io/v1 API server on localhost for the official-client sink tests.

It stores events (core/v1 and events.k8s.io/v1 apart) by namespace and name, answers create conflicts with 409 AlreadyExists and patches of
missing events with 404 NotFound (as Status objects), applies a strategic merge patch's series, serves the
discovery document of events.k8s.io/v1 (unless told not to), and logs every request.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# events.k8s.io/v1 and core/v1 events, stored apart by the path's prefix.
_EVENTS = re.compile(r"^(/api/v1|/apis/events\.k8s\.io/v1)/namespaces/([^/]+)/events(?:/([^/?]+))?(?:\?.*)?$")


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason, "code": code}


class FakeApiServer:
    def __init__(self, serve_events_v1: bool = True) -> None:
        self.serve_events_v1 = serve_events_v1
        # (path prefix, namespace, name) -> event
        self.events: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.requests: list[tuple[str, str, str, Any]] = []
        self._rv = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> Any:
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n)) if n else None

            def do_GET(self) -> None:
                server.requests.append(("GET", self.path, "", None))
                if self.path.rstrip("/") == "/apis/events.k8s.io/v1" and server.serve_events_v1:
                    self._send(200, {
                        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "events.k8s.io/v1",
                        "resources": [{"name": "events", "singularName": "event", "namespaced": True, "kind": "Event",
                                       "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}],
                    })
                else:
                    self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))

            def do_POST(self) -> None:
                body = self._body()
                server.requests.append(("POST", self.path, self.headers.get("Content-Type", ""), body))
                m = _EVENTS.match(self.path)
                if not m:
                    self._send(404, _status(404, "NotFound", self.path))
                    return
                ns, name = m.group(2), body["metadata"]["name"]
                key = (m.group(1), ns, name)
                with server._lock:
                    if key in server.events:
                        self._send(409, _status(409, "AlreadyExists", f'events.events.k8s.io "{name}" already exists'))
                        return
                    server._rv += 1
                    stored = dict(body, metadata=dict(body["metadata"], resourceVersion=str(server._rv)))
                    server.events[key] = stored
                self._send(201, stored)

            def do_PATCH(self) -> None:
                body = self._body()
                server.requests.append(("PATCH", self.path, self.headers.get("Content-Type", ""), body))
                m = _EVENTS.match(self.path)
                if not m or not m.group(3):
                    self._send(404, _status(404, "NotFound", self.path))
                    return
                if self.headers.get("Content-Type") != "application/strategic-merge-patch+json":
                    self._send(415, _status(415, "UnsupportedMediaType", self.headers.get("Content-Type", "")))
                    return
                key = (m.group(1), m.group(2), m.group(3))
                with server._lock:
                    if key not in server.events:
                        self._send(404, _status(404, "NotFound", f'events "{key[2]}" not found'))
                        return
                    server._rv += 1
                    stored = server.events[key]
                    stored.update(body)
                    stored["metadata"]["resourceVersion"] = str(server._rv)
                self._send(200, stored)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.01,), daemon=True)

    def __enter__(self) -> FakeApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
