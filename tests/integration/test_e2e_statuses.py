"""The status code and ``Status`` body of every refusal the other integration tests meet, for both event APIs:
what a real API server answers, and what the fake server and ``MemorySink`` answer in its place.

The expected bodies are written out as the Kubernetes source builds them: ``NewAlreadyExists``,
``NewNotFound``, ``NewUnauthorized``, ``NewForbidden`` and ``NewInvalid`` in apimachinery's
``pkg/api/errors/errors.go``; the forbidden message of ``endpoints/handlers/responsewriters/errors.go``; the
``namespaces "x" not found`` of the NamespaceLifecycle admission plugin (its GET of the namespace); the note
limit and the namespace of an event about a cluster-scoped object (``legacyValidateEvent``: ``default``, or
with an ``eventTime`` also ``kube-system``) of ``pkg/apis/core/validation/events.go``. Errors on
events.k8s.io/v1 name the resource the request used (``events.events.k8s.io``), the store's
``qualifiedResourceFromContext``.
"""

from __future__ import annotations

import json
from typing import Any

import kubernetes.client as k8s
import pytest

import kubevents
from e2e_support import CORE_V1, EVENTS_V1, list_events, service_account_token, unique_name
from kubevents.sinks import CoreV1Sink, MemorySink

T0 = 1_700_000_000


def core_event(namespace: str) -> dict[str, Any]:
    pod = {"kind": "Pod", "namespace": namespace, "name": "web-0", "uid": "u-web-0", "apiVersion": "v1"}
    return kubevents.make_event(pod, "Warning", "BackOff", "Back-off restarting failed container", source="kubevents-e2e",
                                clock=kubevents.FakeClock(T0))


def v1_event(namespace: str, note: str = "Back-off restarting failed container") -> dict[str, Any]:
    return {"metadata": {"name": f"web-0.{T0 * 10**9:x}", "namespace": namespace},
            "eventTime": "2023-11-14T22:13:20.000000Z", "reportingController": "kubevents.io/e2e",
            "reportingInstance": "kubevents-e2e-1", "action": "Restart", "reason": "BackOff",
            "regarding": {"kind": "Pod", "namespace": namespace, "name": "web-0", "uid": "u-web-0", "apiVersion": "v1"},
            "note": note, "type": "Warning"}


NODE = {"kind": "Node", "name": "kubevents-e2e-node", "uid": "u-node", "apiVersion": "v1"}


def node_event(api: str, namespace: str) -> dict[str, Any]:
    """An event about a cluster-scoped object (a Node), put in ``namespace`` instead of ``default``."""
    if api == CORE_V1:
        event = kubevents.make_event(NODE, "Normal", "Rebooted", "Node rebooted", source="kubevents-e2e",
                                     clock=kubevents.FakeClock(T0))
        assert event["metadata"]["namespace"] == "default"  # where client-go's makeEvent puts it
        event["metadata"]["namespace"] = namespace
        return event
    return dict(v1_event(namespace), regarding=NODE)


EVENT = {CORE_V1: core_event, EVENTS_V1: v1_event}
PATCH = {CORE_V1: b'{"count":2,"lastTimestamp":"2023-11-14T22:13:21Z","message":"again"}',
         EVENTS_V1: b'{"series":{"count":2,"lastObservedTime":"2023-11-14T22:13:21.000000Z"}}'}


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "details": details, "code": code}
    return {k: v for k, v in body.items() if v is not None}


def expected(api: str, case: str, namespace: str, user: str = "") -> list[dict[str, Any]]:
    name = EVENT[api](namespace)["metadata"]["name"]
    group = "" if api == CORE_V1 else "events.k8s.io"
    resource = "events" if api == CORE_V1 else "events.events.k8s.io"
    details = {"name": name, "group": group, "kind": "events"} if group else {"name": name, "kind": "events"}
    if case == "already-exists":
        return [status(409, "AlreadyExists", f'{resource} "{name}" already exists', details)]
    if case == "patch-missing":
        return [status(404, "NotFound", f'{resource} "{name}" not found', details)]
    if case == "missing-namespace":
        return [status(404, "NotFound", f'namespaces "{namespace}" not found', {"name": namespace, "kind": "namespaces"})]
    if case == "note-too-long":
        why = 'Invalid value: "": can have at most 1024 characters'
        return [status(422, "Invalid", f'Event "{name}" is invalid: message: {why}',
                       {"name": name, "kind": "Event",
                        "causes": [{"reason": "FieldValueInvalid", "message": why, "field": "message"}]})]
    if case == "cluster-scoped-elsewhere":
        why = 'Invalid value: "": does not match event.namespace'
        name = node_event(api, namespace)["metadata"]["name"]
        cause = {"reason": "FieldValueInvalid", "message": why, "field": "involvedObject.namespace"}
        return [status(422, "Invalid", f'Event "{name}" is invalid: involvedObject.namespace: {why}',
                       {"name": name, "kind": "Event", "causes": [cause]})]
    if case == "unauthorized":
        return [status(401, "Unauthorized", "Unauthorized")]
    assert case == "forbidden"
    who = f'User "{user}" cannot %s resource "events" in API group "{group}" in the namespace "{namespace}"'
    return [status(403, "Forbidden", f"{resource} is forbidden: {who % 'create'}",
                   {"group": group, "kind": "events"} if group else {"kind": "events"}),
            status(403, "Forbidden", f'{resource} "{name}" is forbidden: {who % "patch"}', details)]


def refusals(sink: Any, api: str, case: str, namespace: str) -> list[dict[str, Any]]:
    """Makes the writes of ``case`` through ``sink``; the status code and body of each refusal."""
    event = EVENT[api](namespace)
    out = []

    def refused(call) -> None:
        try:
            call()
        except Exception as e:
            if getattr(e, "status", None) is None:
                raise
            body = json.loads(e.body)
            assert body["code"] == e.status
            out.append(body)
        else:
            pytest.fail(f"{case}: the write was accepted")

    if case == "already-exists":
        sink.create(event)
        refused(lambda: sink.create(event))
    elif case in ("patch-missing", "forbidden"):
        if case == "forbidden":
            refused(lambda: sink.create(event))
        refused(lambda: sink.patch(event, PATCH[api]))
    elif case == "note-too-long":
        refused(lambda: sink.create(v1_event(namespace, note="x" * 1025)))
    elif case == "cluster-scoped-elsewhere":
        refused(lambda: sink.create(node_event(api, namespace)))
    else:
        refused(lambda: sink.create(event))
    return out


def client_sink(api_client: Any, api: str) -> Any:
    return CoreV1Sink(k8s.CoreV1Api(api_client)) if api == CORE_V1 else kubevents.EventsV1Sink(k8s.EventsV1Api(api_client))


SERVER_CASES = [(CORE_V1, c) for c in ("already-exists", "patch-missing", "missing-namespace",
                                      "cluster-scoped-elsewhere", "unauthorized", "forbidden")] \
    + [(EVENTS_V1, c) for c in ("already-exists", "patch-missing", "missing-namespace", "note-too-long",
                                "cluster-scoped-elsewhere", "unauthorized", "forbidden")]
MEMORY_CASES = [(api, case) for api, case in SERVER_CASES if case not in ("unauthorized", "forbidden")]


@pytest.mark.parametrize("api, case", SERVER_CASES)
def test_the_server_answers_each_refusal_so(server, api, case):
    namespace, token, user = server.namespace, None, ""
    if case == "missing-namespace":
        namespace = unique_name()
    elif case == "unauthorized":
        token = "kubevents-e2e-not-a-token"
    elif case == "forbidden":
        with server.api_client() as admin:
            user, token = service_account_token(admin, namespace)
    with server.api_client(token) as client:
        got = refusals(client_sink(client, api), api, case, namespace)
    assert got == expected(api, case, namespace, user)
    if case != "already-exists":
        with server.api_client() as admin:
            assert list_events(admin, namespace, api) == []


@pytest.mark.parametrize("api, case", MEMORY_CASES)
def test_memory_sink_answers_each_refusal_as_the_server(api, case):
    sink = MemorySink(namespaces={"web"})
    got = refusals(sink, api, case, "gone" if case == "missing-namespace" else "web")
    assert got == expected(api, case, "gone" if case == "missing-namespace" else "web")
