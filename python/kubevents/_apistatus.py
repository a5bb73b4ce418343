"""The error answers of a Kubernetes API server, built as apimachinery builds them
(``staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go``), for ``MemorySink`` and the tests' fake server.

Each function returns the ``Status`` object the server sends, as a dict with Go's field order: the same
``kind``, ``message``, ``reason``, ``details`` (empty fields left out, as ``omitempty`` does) and ``code``.
"""

from __future__ import annotations

import json
from typing import Any


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A failure ``Status`` (``metav1.Status`` as ``ErrorToAPIStatus`` completes it)."""
    out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    if message:
        out["message"] = message
    if reason:
        out["reason"] = reason
    if details:
        out["details"] = details
    out["code"] = code
    return out


def _details(
    name: str = "", group: str = "", kind: str = "", causes: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    pairs = (("name", name), ("group", group), ("kind", kind), ("causes", causes))
    return {k: v for k, v in pairs if v}


def _qualified(group: str, resource: str) -> str:
    """``schema.GroupResource.String()``: ``events`` or ``events.events.k8s.io``."""
    return f"{resource}.{group}" if group else resource


def _quote(value: str) -> str:
    """Go's ``%q`` for the strings these messages carry."""
    return json.dumps(value, ensure_ascii=False)


def not_found(group: str, resource: str, name: str) -> dict[str, Any]:
    """``NewNotFound``: ``events "x" not found`` (a patch of a missing event), ``namespaces "x" not found``
    (a create in a missing namespace, from the NamespaceLifecycle admission plugin)."""
    return status(404, "NotFound", f"{_qualified(group, resource)} {_quote(name)} not found",
                  _details(name, group, resource))


def already_exists(group: str, resource: str, name: str) -> dict[str, Any]:
    """``NewAlreadyExists``: ``events "x" already exists``."""
    return status(409, "AlreadyExists", f"{_qualified(group, resource)} {_quote(name)} already exists",
                  _details(name, group, resource))


def unauthorized() -> dict[str, Any]:
    """What the authentication filter answers a request whose credentials are not valid."""
    return status(401, "Unauthorized", "Unauthorized")


def forbidden(user: str, verb: str, group: str, resource: str, namespace: str, name: str = "") -> dict[str, Any]:
    """What the authorization filter answers when no authorizer allows the request (``responsewriters.Forbidden``
    through ``NewForbidden``), with no reason from the authorizers (RBAC gives none when nothing matches)."""
    scope = f"in the namespace {_quote(namespace)}" if namespace else "at the cluster scope"
    why = f"User {_quote(user)} cannot {verb} resource {_quote(resource)} in API group {_quote(group)} {scope}"
    subject = _qualified(group, resource) + (f" {_quote(name)}" if name else "")
    return status(403, "Forbidden", f"{subject} is forbidden: {why}", _details(name, group, resource))


def invalid(kind: str, name: str, errors: list[tuple[str, str, str]]) -> dict[str, Any]:
    """``NewInvalid`` for ``field.Invalid`` errors given as ``(field, bad value, detail)``: ``Event "x" is
    invalid: message: Invalid value: "": can have at most 1024 characters``."""
    bodies = [(f, f"Invalid value: {_quote(value)}: {detail}") for f, value, detail in errors]
    causes = [{"reason": "FieldValueInvalid", "message": body, "field": f} for f, body in bodies]
    messages = [f"{f}: {body}" for f, body in bodies]
    aggregate = messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"
    return status(422, "Invalid", f"{kind} {_quote(name)} is invalid: {aggregate}", _details(name, "", kind, causes))


def to_json(body: dict[str, Any]) -> str:
    """The body as the server writes it (compact, UTF-8)."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)
