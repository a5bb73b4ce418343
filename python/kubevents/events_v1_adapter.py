"""client-go's ``NewEventBroadcasterAdapter``: record through events.k8s.io/v1 when the server serves it,
else through core/v1 Events.

Example (with the official client)::

    import kubernetes
    kubernetes.config.load_kube_config()
    adapter = kubevents.new_event_broadcaster_adapter(kubernetes.client.ApiClient())
    adapter.start_recording_to_sink()  # logs which API it records to
    recorder = adapter.new_recorder("my-controller")
    recorder.eventf(pod, None, "Normal", "Synced", "Sync", "synced %s", name)
    adapter.shutdown()
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kubevents._native import Broadcaster, EventsBroadcaster, EventsRecorder, Recorder, _request_timeout
from kubevents.sinks import DEFAULT_REQUEST_TIMEOUT, CoreV1Sink, EventsV1Sink

_logger = logging.getLogger("kubevents")

__all__ = ["EventBroadcasterAdapter", "new_event_broadcaster_adapter"]


class _LegacyRecorderAdapter:
    """client-go's ``record.EventRecorderAdapter``: the events.k8s.io/v1 recorder interface over a core/v1
    recorder. As in client-go, ``related`` and ``action`` are dropped (core/v1 events made by the old
    recorder have neither)."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    def eventf(self, regarding: Any, related: Any, type: str, reason: str, action: str, note: str, *args: Any) -> None:
        """``Recorder.eventf(regarding, type, reason, note, *args)``."""
        self._recorder.eventf(regarding, type, reason, note, *args)

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
        """``Recorder.annotated_eventf(regarding, annotations, type, reason, note, *args)``."""
        self._recorder.annotated_eventf(regarding, annotations, type, reason, note, *args)


class EventBroadcasterAdapter:
    """Both broadcasters of client-go's adapter: an ``EventsBroadcaster`` over ``EventsV1Sink`` when the
    discovery request for ``events.k8s.io/v1`` succeeded, and always a core/v1 ``Broadcaster`` over
    ``CoreV1Sink``. As in client-go, any discovery error (a transient one too) selects core/v1 for the life
    of the adapter. ``request_timeout`` bounds the discovery request and each write of the sinks (seconds,
    default ``kubevents.sinks.DEFAULT_REQUEST_TIMEOUT``, 30); a discovery request that times out is an error.
    """

    def __init__(self, api_client: Any, *, clock: Any = None, request_timeout: float = DEFAULT_REQUEST_TIMEOUT) -> None:
        import kubernetes.client as k8s

        self._request_timeout = _request_timeout(request_timeout)
        self.events_v1: EventsBroadcaster | None = None
        self._events_v1_sink: EventsV1Sink | None = None
        try:
            k8s.EventsV1Api(api_client).get_api_resources(_request_timeout=self._request_timeout)
        except Exception as e:
            # client-go logs this at V(2); the fallback changes where an operator finds the events.
            _logger.info(
                "kubevents: the API server does not serve events.k8s.io/v1 (%s: %s); recording core/v1 Events",
                type(e).__name__, e,
            )
        else:
            self._events_v1_sink = EventsV1Sink(k8s.EventsV1Api(api_client), request_timeout=self._request_timeout)
            self.events_v1 = EventsBroadcaster(clock=clock)
        self._core_api = k8s.CoreV1Api(api_client)
        self.core = Broadcaster(clock=clock)

    def start_recording_to_sink(self) -> None:
        """Starts both broadcasters writing to the server."""
        if self.events_v1 is not None and self._events_v1_sink is not None:
            self.events_v1.start_recording_to_sink(self._events_v1_sink)
        self.core.start_recording_to_sink(CoreV1Sink(self._core_api, request_timeout=self._request_timeout))

    def new_recorder(self, name: str) -> EventsRecorder | _LegacyRecorderAdapter:
        """An events.k8s.io/v1 recorder for controller ``name`` if the server serves that API, else the
        same interface over a core/v1 recorder with source ``name``."""
        if self.events_v1 is not None:
            return self.events_v1.new_recorder(name)
        return _LegacyRecorderAdapter(self.deprecated_new_legacy_recorder(name))

    def deprecated_new_legacy_recorder(self, name: str) -> Recorder:
        """A core/v1 recorder with source component ``name``."""
        return self.core.new_recorder(name)

    def shutdown(self, timeout: float | None = None) -> None:
        """Shuts down core/v1, then events.k8s.io/v1."""
        self.core.shutdown(timeout)
        if self.events_v1 is not None:
            self.events_v1.shutdown(timeout)


def new_event_broadcaster_adapter(
    api_client: Any, *, clock: Any = None, request_timeout: float = DEFAULT_REQUEST_TIMEOUT
) -> EventBroadcasterAdapter:
    """client-go's ``NewEventBroadcasterAdapter`` for an official ``kubernetes.client.ApiClient``."""
    return EventBroadcasterAdapter(api_client, clock=clock, request_timeout=request_timeout)
