"""The kubelet's pod lifecycle event generator (PLEG) and pod status cache, decision for decision.

``GenericPLEG`` relists a container runtime, diffs every pod against its last committed listing and sends
``PodLifecycleEvent``\\ s on a bounded channel; the pods that changed are inspected into a ``PodCache``
that workers wait on with ``get_newer_than``. ``EventedPLEG`` feeds CRI container events into the same
cache and channel. This is the kubelet of v1.32–v1.35 (watch conditions, ``ConditionMet``).

Runtime pods are dicts (``id``, ``name``, ``namespace``, ``containers``, ``sandboxes``; containers are
``{"id", "state"}`` with state ``created``/``running``/``exited``/``unknown``), ``Pod`` objects, or tuples
``(id, name, namespace, [(cid, state), ...], [(sid, state), ...])``. ``get_pods()`` may return a list of
these or a ``PodList`` (the whole listing converted in one call, the fast form for large nodes). Pod statuses
are dicts; the PLEG reads ``ips`` (list of str), ``sandbox_statuses`` (``{"id", "state"}`` with state
``SANDBOX_READY`` or ``SANDBOX_NOTREADY``) and ``timestamp`` (datetime or epoch seconds), and keeps the rest
(``container_statuses`` and anything else) for the caller. ``get_pod_status(pod)`` gets the pod as a dict and
returns a status, or raises (the cache then stores ``(None, exception)``), or returns ``(status, exception)``
to store a partial status with the error as Go's runtime can.

Example::

    >>> from kubevents import FakeClock
    >>> from kubevents.pleg import GenericPLEG, PodCache
    >>> class Runtime:
    ...     pods = [{"id": "p1", "containers": [{"id": "c1", "state": "running"}]}]
    ...     def get_pods(self): return self.pods
    ...     def get_pod_status(self, pod): return {"id": pod["id"], "ips": ["10.0.0.7"]}
    >>> pleg = GenericPLEG(Runtime(), cache=PodCache(), clock=FakeClock(0))
    >>> pleg.relist()
    >>> pleg.watch().drain()
    [PodLifecycleEvent(id="p1", type="ContainerStarted", data="c1")]
    >>> pleg.cache.get("p1")
    ({'id': 'p1', 'ips': ['10.0.0.7']}, None)
    >>> pleg.healthy()
    (True, None)

Options beyond the kubelet: ``inspect_concurrency=N`` runs the inspections of one relist on up to N threads;
``inspect_timeout`` (wall-clock seconds) gives up on an inspection that has not returned, stores a
``TimeoutError`` for the pod and reinspects it later; ``stats()`` counts relists, durations, dropped events,
inspections, timeouts and reinspections.

Era C (Kubernetes v1.36+), as options:

* ``pod_sync_on_reinspect=True``: ``request_reinspect(uid)`` is ``RequestReinspect`` (the request waits until
  the pod is reconciled; a reinspection that finds no container event sends ``PodSync``).
* ``on_demand_relist=True`` (needs ``pod_sync_on_reinspect=True`` and a runtime with ``get_pod(uid)``): the
  ``PLEGOnDemandRelist`` gate. ``request_relist(uid)`` queues the pod with the clock's time (200 requests at
  most; more are dropped and counted in ``stats()["relist_requests_dropped"]``; with the option off it returns
  False). The loop ``start()`` runs relists globally when its timer is due (``relist_period`` after the last
  relist ended), else serves one request, skipping a request not made after the last global relist started.
  A request relists its pod alone: ``get_pod(uid)`` returns the pod as ``get_pods()`` would list it (None
  for a pod without containers), its record is reconciled as in a relist, and the cache marks it observed
  (``PodCache.set_observed_time``). ``loop_iteration()`` runs one pass of that loop on the calling thread
  (the loop must not be started), to step it on a fake clock.

Exit, fork and interrupts: a PLEG left running at exit is stopped by the exit hook (within
``kubevents.set_exit_timeout``). ``GenericPLEG.stop(timeout=None)`` waits for the relist in progress, then
raises ``TimeoutError``; until the loop ended ``start()`` raises ``RuntimeError``. Ctrl-C interrupts
``stop()``, ``relist()``, ``EventChannel.recv`` and iteration, and ``PodCache.get_newer_than``. A
``KeyboardInterrupt`` or ``SystemExit`` from the runtime or a watch condition stops the relist and is raised
by ``relist()`` and ``loop_iteration()``; in a loop it ends the loop, is logged at ERROR on the ``kubevents``
logger and is raised once by the next ``stop()`` or ``healthy()`` (of the ``EventedPLEG`` for the CRI event
stream). Objects made before ``os.fork()`` raise ``RuntimeError`` on every use in the child.

Design notes and the differences from the kubelet: ``docs/pleg.md``.
"""

from collections.abc import Callable, Mapping
from typing import Any

# The kubelet's defaults, from the core: relist period and health threshold (seconds), event channel capacity,
# inspections at once; while EventedPLEG is in use, the period and threshold (seconds), the stream's retries
# before falling back, and the global cache tick (seconds).
from kubevents._native import (
    CHANNEL_CAPACITY,
    EVENTED_CACHE_UPDATE_PERIOD,
    EVENTED_MAX_STREAM_RETRIES,
    EVENTED_RELIST_PERIOD,
    EVENTED_RELIST_THRESHOLD,
    INSPECT_CONCURRENCY,
    RELIST_PERIOD,
    RELIST_THRESHOLD,
    EventChannel,
    EventedPLEG,
    GenericPLEG,
    Pod,
    PodCache,
    PodLifecycleEvent,
    PodList,
    diff,
)

#: ``PodLifeCycleEventType`` values.
CONTAINER_STARTED = "ContainerStarted"
CONTAINER_DIED = "ContainerDied"
CONTAINER_REMOVED = "ContainerRemoved"
CONTAINER_CHANGED = "ContainerChanged"
POD_SYNC = "PodSync"
CONDITION_MET = "ConditionMet"


def running_container_watch_condition(
    container_name: str, condition: Callable[[Mapping[str, Any]], bool]
) -> Callable[[Mapping[str, Any]], bool]:
    """``RunningContainerWatchCondition``: a pod watch condition on one container's status.

    ``condition(container_status)`` decides while the container (found by ``name`` in the status's
    ``container_statuses``) is running; once it is gone or not running, the condition counts as met so it
    is cleared.
    """

    def check(pod_status: Mapping[str, Any]) -> bool:
        for status in pod_status.get("container_statuses") or ():
            if status.get("name") == container_name:
                if status.get("state") != "running":
                    return True
                return bool(condition(status))
        return True

    return check


__all__ = [
    "CHANNEL_CAPACITY",
    "CONDITION_MET",
    "CONTAINER_CHANGED",
    "CONTAINER_DIED",
    "CONTAINER_REMOVED",
    "CONTAINER_STARTED",
    "EVENTED_CACHE_UPDATE_PERIOD",
    "EVENTED_MAX_STREAM_RETRIES",
    "EVENTED_RELIST_PERIOD",
    "EVENTED_RELIST_THRESHOLD",
    "INSPECT_CONCURRENCY",
    "POD_SYNC",
    "RELIST_PERIOD",
    "RELIST_THRESHOLD",
    "EventChannel",
    "EventedPLEG",
    "GenericPLEG",
    "Pod",
    "PodCache",
    "PodLifecycleEvent",
    "PodList",
    "diff",
    "running_container_watch_condition",
]
