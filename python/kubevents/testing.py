"""Helpers for tests of code that records events.

``IntervalClock(start, interval)`` is client-go's ``SimpleIntervalClock``: every ``now()`` first advances by
``interval``, so each clock read in the correlator gets its own instant.
"""

from kubevents._native import FakeClock, IntervalClock

__all__ = ["FakeClock", "IntervalClock"]
