"""Prometheus metrics of every live ``Broadcaster``, ``EventsBroadcaster``, ``GenericPLEG`` and ``EventedPLEG``
(needs ``prometheus_client``: ``pip install 'kubevents[metrics]'``).

The collector reads the counters each component keeps anyway (its ``stats()``) when it is scraped: recording
an event costs nothing more. A component collected by the garbage collector leaves the metrics. Every series
is labelled ``component`` (the class: ``Broadcaster``, ``EventsBroadcaster``, ``GenericPLEG``,
``EventedPLEG``) and ``name`` (a broadcaster's ``name=``; ``<class>-<n>`` otherwise). The PLEGs use the
kubelet's metric names, help and buckets. docs/guides/metrics.md lists every metric.

    >>> from prometheus_client import CollectorRegistry, generate_latest
    >>> import kubevents, kubevents.metrics
    >>> registry = CollectorRegistry()
    >>> collector = kubevents.metrics.register(registry)
    >>> b = kubevents.Broadcaster(name="doc")
    >>> 'kubevents_events_received_total{component="Broadcaster",name="doc"} 0.0' in generate_latest(registry).decode()
    True
    >>> _ = b.shutdown()
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

try:
    from prometheus_client import REGISTRY, CollectorRegistry
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
    from prometheus_client.registry import Collector
except ImportError as e:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "kubevents.metrics needs prometheus_client: pip install 'kubevents[metrics]'"
    ) from e

from kubevents._native import _live_components

__all__ = ["KubeventsCollector", "register"]

_LABELS = ["component", "name"]

# Name, help, and for each kind of component the key of its stats() that gives the value.
_COUNTERS: list[tuple[str, str, dict[str, str]]] = [
    ("kubevents_events_received", "Events recorded (every recorder call, refused ones included).",
     {"Broadcaster": "received", "EventsBroadcaster": "received"}),
    ("kubevents_retries", "Failed sink writes scheduled for another try.",
     {"Broadcaster": "retries", "EventsBroadcaster": "retries"}),
    ("kubevents_abandoned", "Events given up on after failed writes.",
     {"Broadcaster": "abandoned", "EventsBroadcaster": "abandoned"}),
    ("kubevents_aggregated", "Events the correlator's aggregator combined into an aggregate event.",
     {"Broadcaster": "aggregated"}),
    ("kubevents_deduplicated", "Events written as a repeat (count > 1) of an earlier one.",
     {"Broadcaster": "deduplicated"}),
    ("kubevents_spam_filtered", "Events the correlator's spam filter dropped.", {"Broadcaster": "skipped"}),
    ("kubevents_handler_errors", "Exceptions raised by event watchers, loggers and key functions.",
     {"Broadcaster": "handler_errors", "EventsBroadcaster": "handler_errors"}),
    ("kubevents_recorder_waits", "Recorder calls that waited for fast watchers to catch up.",
     {"Broadcaster": "recorder_waits", "EventsBroadcaster": "recorder_waits"}),
    ("kubevents_notes_truncated", "Notes cut to the API server's 1024-byte limit.",
     {"EventsBroadcaster": "truncated_notes"}),
    ("kubevents_series_observed", "Events that reached the series cache.", {"EventsBroadcaster": "observed"}),
    ("kubevents_series_first_occurrences", "First occurrences, created as plain events.",
     {"EventsBroadcaster": "first_occurrences"}),
    ("kubevents_series_started", "Second occurrences, which start a series.",
     {"EventsBroadcaster": "series_started"}),
    ("kubevents_series_counted", "Later occurrences, counted in the cache until a round writes them.",
     {"EventsBroadcaster": "counted"}),
    ("kubevents_series_forgotten", "Singletons dropped by the 6-minute finish round.",
     {"EventsBroadcaster": "forgotten"}),
    ("kubevents_series_evicted", "Cache entries pushed out by the cache's size bound.",
     {"EventsBroadcaster": "evicted"}),
    ("kubelet_pleg_discard_events", "The number of discard events in PLEG.", {"GenericPLEG": "events_dropped"}),
    ("kubevents_pleg_relists", "Global relists run.", {"GenericPLEG": "relists"}),
    ("kubevents_pleg_relist_failures", "Global relists whose listing failed.", {"GenericPLEG": "relist_failures"}),
    ("kubevents_pleg_events_sent", "Pod lifecycle events sent on the channel.",
     {"GenericPLEG": "events_sent", "EventedPLEG": "events_sent"}),
    ("kubevents_evented_pleg_events_received", "CRI container events received.",
     {"EventedPLEG": "events_received"}),
    ("kubelet_evented_pleg_connection_success_count",
     "The number of times a streaming client was obtained to receive CRI Events.",
     {"EventedPLEG": "stream_connections"}),
    ("kubelet_evented_pleg_connection_error_count",
     "The number of errors encountered during the establishment of streaming connection with the CRI runtime.",
     {"EventedPLEG": "stream_failures"}),
]

_GAUGES: list[tuple[str, str, dict[str, str]]] = [
    ("kubevents_queue_length", "Events queued or under way, waiting for a retry included.",
     {"Broadcaster": "pending", "EventsBroadcaster": "pending"}),
    ("kubevents_pending_retries", "Events waiting for a retry.", {"EventsBroadcaster": "pending_retries"}),
    ("kubevents_series_cache_length", "Entries in the series cache.", {"EventsBroadcaster": "cache_len"}),
    ("kubelet_pleg_last_seen_seconds", "Timestamp in seconds when PLEG was last seen active.",
     {"GenericPLEG": "last_seen"}),
    ("kubelet_running_pods", "Number of pods that have a running pod sandbox", {"GenericPLEG": "running_pods"}),
    ("kubevents_pleg_relist_requests_queued", "On-demand relist requests waiting for the relist loop.",
     {"GenericPLEG": "relist_requests_queued"}),
]

_HISTOGRAMS: list[tuple[str, str, dict[str, str]]] = [
    ("kubelet_pleg_relist_duration_seconds", "Duration in seconds for relisting pods in PLEG.",
     {"GenericPLEG": "relist_duration_seconds"}),
    ("kubelet_pleg_relist_interval_seconds", "Interval in seconds between relisting in PLEG.",
     {"GenericPLEG": "relist_interval_seconds"}),
    ("kubelet_evented_pleg_connection_latency_seconds",
     "The latency of streaming connection with the CRI runtime, measured in seconds.",
     {"EventedPLEG": "connection_latency_seconds"}),
]


_BROADCASTERS = ("Broadcaster", "EventsBroadcaster")

# (reason, value) for both broadcasters: the drops of `kubevents_events_dropped_total`.
_DROPS: list[tuple[str, Callable[[Mapping[str, Any]], int]]] = [
    ("incoming", lambda s: s["dropped_incoming"]),
    ("watcher", lambda s: sum(s["dropped_watchers"].values())),
    ("after_shutdown", lambda s: s["dropped_after_shutdown"]),
]

# (verb, result, stats key) for both broadcasters: `kubevents_sink_writes_total`.
_WRITES = [
    ("create", "success", "created"), ("create", "error", "create_errors"),
    ("patch", "success", "patched"), ("patch", "error", "patch_errors"),
]


def _epoch(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339).timestamp()

_SERIES_WRITES = [("refresh", "refresh_writes"), ("finish", "finish_writes"), ("evicted", "evicted_writes"),
                  ("shutdown", "shutdown_writes")]
_ROUNDS = [("finish", "finish_rounds"), ("refresh", "refresh_rounds")]


def _histogram_buckets(h: Mapping[str, Any]) -> list[tuple[str, float]]:
    # repr() writes the bounds (0.005 ... 10.0) as prometheus_client writes its own.
    return [(repr(float(le)), n) for le, n in h["buckets"]] + [("+Inf", h["count"])]


def _families(components: Iterable[tuple[str, str, Mapping[str, Any]]]) -> list[Metric]:
    """The metric families of ``components``, each ``(kind, name, stats)``."""
    components = list(components)
    out: list[Metric] = []
    for metric, doc, by_kind in _COUNTERS:
        c = CounterMetricFamily(metric, doc, labels=_LABELS)
        for kind, name, s in components:
            if kind in by_kind:
                c.add_metric([kind, name], s[by_kind[kind]])
        out.append(c)
    for metric, doc, by_kind in _GAUGES:
        g = GaugeMetricFamily(metric, doc, labels=_LABELS)
        for kind, name, s in components:
            if kind in by_kind and (v := s[by_kind[kind]]) is not None:
                g.add_metric([kind, name], v)
        out.append(g)
    for metric, doc, by_kind in _HISTOGRAMS:
        h = HistogramMetricFamily(metric, doc, labels=_LABELS)
        for kind, name, s in components:
            if kind in by_kind:
                snapshot = s[by_kind[kind]]
                h.add_metric([kind, name], _histogram_buckets(snapshot), snapshot["sum"])
        out.append(h)

    dropped = CounterMetricFamily("kubevents_events_dropped", "Events dropped, by where: the incoming queue, "
                                  "a watcher's queue, or a call after shutdown.", labels=[*_LABELS, "reason"])
    writes = CounterMetricFamily("kubevents_sink_writes", "Sink calls, by verb and result (a patch that finds no "
                                 "event and the create that follows are two calls).",
                                 labels=[*_LABELS, "verb", "result"])
    series_writes = CounterMetricFamily("kubevents_series_writes", "Series written by a round, an eviction or "
                                        "shutdown.", labels=[*_LABELS, "cause"])
    rounds = CounterMetricFamily("kubevents_series_rounds", "The 6-minute finish and 30-minute refresh rounds run.",
                                 labels=[*_LABELS, "round"])
    containers = GaugeMetricFamily("kubelet_running_containers", "Number of containers currently running",
                                   labels=[*_LABELS, "container_state"])
    sink_labels = [*_LABELS, "sink"]
    sink_up = GaugeMetricFamily("kubevents_sink_up", "1 while the sink's last write succeeded (or none was made "
                                "yet), 0 while it fails.", labels=sink_labels)
    last_success = GaugeMetricFamily("kubevents_sink_last_success_timestamp_seconds", "When the sink's last "
                                     "successful write ended, on the broadcaster's clock.", labels=sink_labels)
    given_up = CounterMetricFamily("kubevents_sink_given_up", "Events the sink gave up, by reason.",
                                   labels=[*sink_labels, "reason"])
    for kind, name, s in components:
        if kind in _BROADCASTERS:
            for reason, f in _DROPS:
                dropped.add_metric([kind, name, reason], f(s))
            for verb, result, key in _WRITES:
                writes.add_metric([kind, name, verb, result], s[key])
            for sink, h in s["sinks"].items():
                sink_up.add_metric([kind, name, sink], 1 if h["up"] else 0)
                if h["last_success"] is not None:
                    last_success.add_metric([kind, name, sink], _epoch(h["last_success"]))
                for reason, n in h["given_up"].items():
                    given_up.add_metric([kind, name, sink, reason], n)
        if kind == "EventsBroadcaster":
            for cause, key in _SERIES_WRITES:
                series_writes.add_metric([kind, name, cause], s[key])
            for round_, key in _ROUNDS:
                rounds.add_metric([kind, name, round_], s[key])
        if kind == "GenericPLEG":
            for state, n in s["running_containers"].items():
                containers.add_metric([kind, name, state], n)
    return [*out, dropped, writes, series_writes, rounds, containers, sink_up, last_success, given_up]


def _components() -> list[tuple[str, str, Mapping[str, Any]]]:
    """Every live component as ``(kind, name, stats)``."""
    return [(c["kind"], c["name"], c["stats"]) for c in _live_components()]


class KubeventsCollector(Collector):
    """A ``prometheus_client`` collector of every live kubevents component, read at scrape time."""

    def collect(self) -> Iterator[Metric]:
        return iter(_families(_components()))

    def describe(self) -> Iterator[Metric]:
        # The names, for the registry's check of duplicate series; no component is read.
        return iter(_families([]))


_registered: weakref.WeakKeyDictionary[CollectorRegistry, KubeventsCollector] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def register(registry: CollectorRegistry | None = None) -> KubeventsCollector:
    """Registers the collector with ``registry`` (default ``prometheus_client.REGISTRY``) and returns it.
    Idempotent: a second call with the same registry returns the collector registered by the first.

    Exposing the metrics on a port::

        from prometheus_client import start_http_server
        kubevents.metrics.register()
        start_http_server(8000)
    """
    registry = REGISTRY if registry is None else registry
    with _lock:
        collector = _registered.get(registry)
        if collector is None:
            collector = KubeventsCollector()
            registry.register(collector)
            _registered[registry] = collector
        return collector
