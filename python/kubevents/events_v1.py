"""events.k8s.io/v1 recording: client-go's ``tools/events`` broadcaster, recorder and series.

``EventsBroadcaster`` is a peer of the core/v1 ``Broadcaster``, built the same way (as client-go's both embed
apimachinery's ``watch.Broadcaster``): recorders queue events without blocking, and watchers take them:
``start_recording_to_sink(sink)``, ``start_event_watcher(callback)``, ``start_structured_logging()``. Its sinks
(``kubevents.sinks.EventsV1Sink``, ``AsyncEventsV1Sink``, ``MemorySink``) fail, retry and are reported as
core/v1's are, and its ``stats()`` have the same counters where client-go's two packages agree.

Events of one kind about one object (same type, action, reason, reporting controller and instance,
``regarding`` including its resourceVersion, and ``related``; not the note) form a series: the first
occurrence is created, the second patches the first event with ``series {count: 2, lastObservedTime}``,
later ones only count in a cache. Every 30 minutes each live series is written; every 6 minutes series
quiet for 6 minutes are written a last time and forgotten, as are single events older than 6 minutes.

Example::

    >>> import kubevents
    >>> from kubevents.sinks import MemorySink
    >>> clock = kubevents.FakeClock(1_700_000_000)
    >>> sink = MemorySink()
    >>> b = kubevents.EventsBroadcaster(clock=clock)
    >>> watcher = b.start_recording_to_sink(sink)
    >>> rec = b.new_recorder("my-controller", "my-controller-1")
    >>> pod = {"kind": "Pod", "namespace": "web", "name": "api-0", "uid": "u1", "apiVersion": "v1"}
    >>> for _ in range(3):
    ...     rec.eventf(pod, None, "Warning", "BackOff", "Restarting", "Back-off restarting %s", "api")
    >>> b.wait_idle()
    True
    >>> [(verb, e.get("series")) for verb, e in sink.writes]  # the third occurrence is only counted
    [('create', None), ('patch', {'count': 2, 'lastObservedTime': '2023-11-14T22:13:20.000000Z'})]
    >>> b.shutdown()["shutdown_writes"]  # the final count
    1
    >>> sink.writes[-1][1]["series"]["count"]
    3

Where kubevents deliberately differs from client-go (released 1.36-level ``tools/events``):

* The series cache is an LRU of ``cache_size`` entries (client-go: an unbounded map). A live series pushed
  out is written first if its count has changed since its last write.
* ``shutdown`` writes the final count of every live series whose count the server has not seen, after one
  last attempt for each event waiting for a retry (client-go writes nothing on shutdown).
* Timers, retry sleeps and ``eventTime`` all read the broadcaster's clock (client-go reads the wall clock
  for several of them); retries wait on that clock without holding up other events. A series'
  ``lastObservedTime`` is the ``eventTime`` of its latest occurrence (client-go: the time its goroutine
  got to it).
* A note longer than the API's 1024-byte limit is cut at a UTF-8 boundary with a ``" ..."`` suffix and
  counted in ``stats()["truncated_notes"]`` (client-go sends it and the server rejects the event).
* One thread records all events to the sink (client-go: a goroutine per event); a recorder never blocks, and
  events beyond ``queue_length`` (1000) waiting for a watcher are dropped and counted.
* An invalid event type or an object that has no reference raises ``ValueError``/``TypeError`` (client-go
  logs and drops the event); ``note`` is %-formatted only when arguments are given.
* As for core/v1 in kubevents, 429 and 5xx answers are retried (client-go's REST client retries them below
  ``recordEvent``; the Python clients do not).
* A failing sink is reported as core/v1's sinks are (see "What an operator sees in an outage" in the
  README), not with a line per failed attempt.
"""

from __future__ import annotations

from kubevents._native import EventsBroadcaster, EventsRecorder
from kubevents.sinks import AsyncEventsV1Sink, EventsV1Sink

__all__ = ["AsyncEventsV1Sink", "EventsBroadcaster", "EventsRecorder", "EventsV1Sink"]
