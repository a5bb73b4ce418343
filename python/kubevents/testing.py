"""Helpers for tests of code that records events.

``IntervalClock(start, interval)`` is client-go's ``SimpleIntervalClock``: every ``now()`` first advances by
``interval``, so each clock read in the correlator gets its own instant.
"""

from kubevents._native import FakeClock, IntervalClock

__all__ = ["FakeClock", "IntervalClock"]

# -- recording pipeline: FakeRecorder --

import threading
from collections.abc import Mapping
from typing import Any

from kubevents._native import object_reference
from kubevents.events_v1 import _format

__all__ += ["FakeRecorder"]


class FakeRecorder:
    """client-go's ``record.FakeRecorder``: records each call as the string ``"<type> <reason> <message>"``
    in ``events``, with `` involvedObject{kind=<kind>,apiVersion=<apiVersion>}`` appended when
    ``include_object`` is set and `` map[k:v ...]`` (sorted, as Go prints maps) when there are annotations.

    It has the methods of ``kubevents.Recorder``. Unlike client-go's, it never blocks (``events`` is a list,
    not a channel), ``%`` in the type and reason is not interpreted, and the kind and apiVersion of
    ``include_object`` come from ``kubevents.object_reference`` (so typed objects print theirs).
    """

    def __init__(self, *, include_object: bool = False) -> None:
        self.include_object = include_object
        self.events: list[str] = []
        self._lock = threading.Lock()

    def _write(self, obj: Any, annotations: Mapping[str, str] | None, type: str, reason: str, message: str) -> None:
        line = f"{type} {reason} {message}"
        if self.include_object:
            try:
                ref = object_reference(obj)
            except ValueError:
                ref = {}
            line += f" involvedObject{{kind={ref.get('kind', '')},apiVersion={ref.get('apiVersion', '')}}}"
        if annotations:
            line += " map[" + " ".join(f"{k}:{v}" for k, v in sorted(annotations.items())) + "]"
        with self._lock:
            self.events.append(line)

    def event(self, obj: Any, type: str, reason: str, message: str, *, field_path: str | None = None) -> None:
        """Records ``message`` as given."""
        self._write(obj, None, type, reason, message)

    def eventf(self, obj: Any, type: str, reason: str, fmt: str, *args: Any, field_path: str | None = None) -> None:
        """Records ``fmt % args`` (``fmt`` as it is without args)."""
        self._write(obj, None, type, reason, _format(fmt, args, "fmt"))

    def annotated_eventf(
        self,
        obj: Any,
        annotations: Mapping[str, str] | None,
        type: str,
        reason: str,
        fmt: str,
        *args: Any,
        field_path: str | None = None,
    ) -> None:
        """``eventf`` with annotations."""
        self._write(obj, annotations, type, reason, _format(fmt, args, "fmt"))

    def past_eventf(
        self, obj: Any, timestamp: Any, type: str, reason: str, fmt: str, *args: Any, field_path: str | None = None
    ) -> None:
        """``eventf``; the timestamp is not part of the recorded string."""
        self._write(obj, None, type, reason, _format(fmt, args, "fmt"))

# -- events.k8s.io/v1 recording: FakeEventsRecorder --

__all__ += ["FakeEventsRecorder"]


def _gvk_string(obj: Any) -> str:
    if obj is None:
        return ""
    try:
        ref = object_reference(obj)
    except (TypeError, ValueError):
        return ""
    if not ref.get("kind") and not ref.get("apiVersion"):
        return ""
    return f" {{kind={ref.get('kind', '')},apiVersion={ref.get('apiVersion', '')}}}"


class FakeEventsRecorder:
    """client-go's ``events.FakeRecorder``: records each call as ``"<type> <reason> <note>"`` in ``events``;
    with ``verbose``, as ``"<type> <reason> <action> <note>"`` followed by `` {kind=...,apiVersion=...}`` for
    ``regarding`` and ``related`` (when they have a kind or apiVersion) and `` map[k:v ...]`` for annotations.

    It has the methods of ``kubevents.EventsRecorder``. Unlike client-go's, it never blocks (``events`` is a
    list, not a channel) and ``%`` in the type and reason is not interpreted.
    """

    def __init__(self, *, verbose: bool = False) -> None:
        self.verbose = verbose
        self.events: list[str] = []
        self._lock = threading.Lock()

    def eventf(self, regarding: Any, related: Any, type: str, reason: str, action: str, note: str, *args: Any) -> None:
        """Records ``note % args`` (``note`` as it is without args)."""
        self.annotated_eventf(regarding, related, None, type, reason, action, note, *args)

    def annotated_eventf(
        self,
        regarding: Any,
        related: Any,
        annotations: Mapping[str, str] | None,
        type: str,
        reason: str,
        action: str,
        note: str,
        *args: Any,
    ) -> None:
        """``eventf`` with annotations (shown only when ``verbose``, as in client-go)."""
        message = _format(note, args)
        if not self.verbose:
            line = f"{type} {reason} {message}"
        else:
            line = f"{type} {reason} {action} {message}" + _gvk_string(regarding) + _gvk_string(related)
            if annotations:
                line += " map[" + " ".join(f"{k}:{v}" for k, v in sorted(annotations.items())) + "]"
        with self._lock:
            self.events.append(line)
