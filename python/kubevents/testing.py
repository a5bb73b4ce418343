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
        self._write(obj, None, type, reason, fmt % args if args else fmt)

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
        self._write(obj, annotations, type, reason, fmt % args if args else fmt)

    def past_eventf(
        self, obj: Any, timestamp: Any, type: str, reason: str, fmt: str, *args: Any, field_path: str | None = None
    ) -> None:
        """``eventf``; the timestamp is not part of the recorded string."""
        self._write(obj, None, type, reason, fmt % args if args else fmt)
