"""Fakes shared by the PLEG tests: a scripted runtime and helpers for event lists."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubevents.pleg import PodLifecycleEvent


def C(cid: str, state: str) -> dict[str, str]:
    return {"id": cid, "state": state}


def pod(pid: str, containers=(), sandboxes=(), name: str = "", namespace: str = "") -> dict[str, Any]:
    return {
        "id": pid,
        "name": name,
        "namespace": namespace,
        "containers": list(containers),
        "sandboxes": list(sandboxes),
    }


def E(pid: str, kind: str, data: str | None = None) -> PodLifecycleEvent:
    return PodLifecycleEvent(pid, kind, data)


def key(e: PodLifecycleEvent) -> tuple[str, str]:
    return (e.id, e.data or "")


def by_id_data(events) -> list[PodLifecycleEvent]:
    """Go's tests sort by (ID, Data) with a stable sort."""
    return sorted(events, key=key)


class FakeRuntime:
    """``get_pods()`` returns ``pods``; ``get_pod_status`` answers from ``statuses`` (a value, an exception to
    raise, or a callable of the pod), else ``{"id": ...}``; every call is recorded."""

    def __init__(self, pods=None) -> None:
        self.pods: Any = pods or []
        self.statuses: dict[str, Any] = {}
        self.calls: list[str] = []
        self.list_error: BaseException | None = None

    def get_pods(self):
        if self.list_error is not None:
            raise self.list_error
        return self.pods

    def get_pod_status(self, pod):
        self.calls.append(pod["id"])
        s = self.statuses.get(pod["id"])
        if s is None:
            return {"id": pod["id"]}
        if isinstance(s, BaseException):
            raise s
        if callable(s):
            return s(pod)
        return s


def wait_for(pred: Callable[[], bool], what: str, limit: float = 10.0) -> None:
    """Waits (real time, generously) for a background thread to get somewhere; asserts only that it did."""
    end = time.monotonic() + limit
    while not pred():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)
