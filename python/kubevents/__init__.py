"""kubevents: client-go's Kubernetes event machinery for Python, with a Rust core.

The correlator decides, event for event, what client-go's ``tools/record`` ``EventCorrelator`` decides:
similar events are aggregated, identical ones counted (with the strategic merge patch the API server
expects), and a token bucket per source and object filters spam. Everything time-dependent takes a clock,
so tests and replays run on virtual time.

Example::

    >>> import kubevents
    >>> clock = kubevents.FakeClock(1_700_000_000)
    >>> c = kubevents.Correlator(clock=clock)
    >>> pod = {"kind": "Pod", "namespace": "web", "name": "api-0", "uid": "u1", "apiVersion": "v1"}
    >>> ev = kubevents.make_event(pod, "Warning", "BackOff", "Back-off restarting", source="kubelet", clock=clock)
    >>> c.correlate(ev).event["count"]
    1
    >>> clock.step(10)  # doctest: +ELLIPSIS
    datetime.datetime(...)
    >>> ev = kubevents.make_event(pod, "Warning", "BackOff", "Back-off restarting", source="kubelet", clock=clock)
    >>> c.correlate(ev).patch
    b'{"count":2,"lastTimestamp":"2023-11-14T22:13:30Z","message":"Back-off restarting"}'

Where kubevents deliberately differs from client-go:

* When aggregation has to drop a message from a group's set, it drops the oldest one inserted; Go drops an
  arbitrary one (``PopAny``, random in practice), so which messages keep their own events is random there.
* ``simulate`` names events that fall back to a UUID from a seeded generator, so replays repeat exactly.
* Negative option values raise ``ValueError``; client-go passes them on (a negative burst filters every
  event). As in client-go, a zero option selects the default, and ``qps`` is stored as a float32.
"""

# First: the exit and fork hooks must be in place before anything starts a thread.
from kubevents._lifecycle import DEFAULT_EXIT_TIMEOUT, get_exit_timeout, set_exit_timeout
from kubevents._native import (
    DEFAULT_QPS,
    CorrelateResult,
    Correlator,
    Decisions,
    FakeClock,
    IntervalClock,
    RealClock,
    Simulation,
    __version__,
    make_event,
)
from kubevents.lab import simulate

# Each feature keeps its own block of imports (merges stay local); isort would fold them into one.
# isort: split
# -- recording pipeline --
from kubevents._native import Broadcaster, Recorder, Watcher, object_reference, register_kind

# -- end recording pipeline --

__all__ = [
    "__version__",
    "DEFAULT_EXIT_TIMEOUT",
    "DEFAULT_QPS",
    "CorrelateResult",
    "Correlator",
    "Decisions",
    "FakeClock",
    "IntervalClock",
    "RealClock",
    "Simulation",
    "get_exit_timeout",
    "make_event",
    "set_exit_timeout",
    "simulate",
    # -- recording pipeline --
    "Broadcaster",
    "Recorder",
    "Watcher",
    "object_reference",
    "register_kind",
]

# -- events.k8s.io/v1 recording --
from kubevents.events_v1 import AsyncEventsV1Sink, EventsBroadcaster, EventsRecorder, EventsV1Sink  # noqa: E402
from kubevents.events_v1_adapter import EventBroadcasterAdapter, new_event_broadcaster_adapter  # noqa: E402

__all__ += [
    "AsyncEventsV1Sink",
    "EventBroadcasterAdapter",
    "EventsBroadcaster",
    "EventsRecorder",
    "EventsV1Sink",
    "new_event_broadcaster_adapter",
]
# -- end events.k8s.io/v1 recording --
# --- Tuning lab: parameter sweeps over replays (kubevents.lab) ----------------------------------------------
from kubevents.lab import SweepResult, sweep  # noqa: E402

__all__ += ["SweepResult", "sweep"]
