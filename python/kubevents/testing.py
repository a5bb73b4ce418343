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

from kubevents._native import EventsRecorderCheck, RecorderCheck

__all__ += ["FakeRecorder"]

_RECORDER_CHECK = RecorderCheck()
_EVENTS_RECORDER_CHECK = EventsRecorderCheck()


def _annotations_text(annotations: Mapping[str, str] | None) -> str:
    if not annotations:
        return ""
    return " map[" + " ".join(f"{k}:{v}" for k, v in sorted(annotations.items())) + "]"


class FakeRecorder:
    """client-go's ``record.FakeRecorder``: records each call as the string ``"<type> <reason> <message>"``
    in ``events``, with `` involvedObject{kind=<kind>,apiVersion=<apiVersion>}`` appended when
    ``include_object`` is set and `` map[k:v ...]`` (sorted, as Go prints maps) when there are annotations.

    It has the methods of ``kubevents.Recorder`` and checks their arguments as ``Recorder`` does, raising the
    same exceptions (an event type other than Normal/Warning, an object without a reference, a reason or format
    that is not a str, a bad timestamp ...), so code that passes its tests against it does not fail against
    the real recorder. Unlike client-go's, it never blocks (``events`` is a list, not a channel), ``%`` in the
    type and reason is not interpreted, and the kind and apiVersion of ``include_object`` are those of
    ``kubevents.object_reference`` (so typed objects print theirs).
    """

    def __init__(self, *, include_object: bool = False) -> None:
        self.include_object = include_object
        self.events: list[str] = []
        self._lock = threading.Lock()

    def _write(
        self, checked: tuple[str, dict[str, str]], annotations: Mapping[str, str] | None, type: str, reason: str
    ) -> None:
        message, ref = checked
        line = f"{type} {reason} {message}"
        if self.include_object:
            line += f" involvedObject{{kind={ref.get('kind', '')},apiVersion={ref.get('apiVersion', '')}}}"
        line += _annotations_text(annotations)
        with self._lock:
            self.events.append(line)

    def event(self, obj: Any, type: str, reason: str, message: str, *, field_path: str | None = None) -> None:
        """Records ``message`` as given."""
        checked = _RECORDER_CHECK.event(obj, type, reason, message, field_path=field_path)
        self._write(checked, None, type, reason)

    def eventf(self, obj: Any, type: str, reason: str, fmt: str, *args: Any, field_path: str | None = None) -> None:
        """Records ``fmt % args`` (``fmt`` as it is without args)."""
        checked = _RECORDER_CHECK.eventf(obj, type, reason, fmt, *args, field_path=field_path)
        self._write(checked, None, type, reason)

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
        checked = _RECORDER_CHECK.annotated_eventf(obj, annotations, type, reason, fmt, *args, field_path=field_path)
        self._write(checked, annotations, type, reason)

    def past_eventf(
        self, obj: Any, timestamp: Any, type: str, reason: str, fmt: str, *args: Any, field_path: str | None = None
    ) -> None:
        """``eventf``; the timestamp is checked but is not part of the recorded string."""
        checked = _RECORDER_CHECK.past_eventf(obj, timestamp, type, reason, fmt, *args, field_path=field_path)
        self._write(checked, None, type, reason)

# -- events.k8s.io/v1 recording: FakeEventsRecorder --

__all__ += ["FakeEventsRecorder"]


def _gvk_string(ref: dict[str, Any] | None) -> str:
    if not ref or (not ref.get("kind") and not ref.get("apiVersion")):
        return ""
    return f" {{kind={ref.get('kind', '')},apiVersion={ref.get('apiVersion', '')}}}"


class FakeEventsRecorder:
    """client-go's ``events.FakeRecorder``: records each call as ``"<type> <reason> <note>"`` in ``events``;
    with ``verbose``, as ``"<type> <reason> <action> <note>"`` followed by `` {kind=...,apiVersion=...}`` for
    ``regarding`` and ``related`` (when they have a kind or apiVersion) and `` map[k:v ...]`` for annotations.

    It has the methods of ``kubevents.EventsRecorder`` and checks their arguments with the real recorder's code,
    raising the same exceptions. Unlike client-go's, it never blocks (``events`` is a list, not a channel) and
    ``%`` in the type and reason is not interpreted.
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
        message, event = _EVENTS_RECORDER_CHECK.annotated_eventf(
            regarding, related, annotations, type, reason, action, note, *args
        )
        if not self.verbose:
            line = f"{type} {reason} {message}"
        else:
            line = f"{type} {reason} {action} {message}" + _gvk_string(event["regarding"])
            line += _gvk_string(event.get("related")) + _annotations_text(annotations)
        with self._lock:
            self.events.append(line)
