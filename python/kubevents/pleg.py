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

Where kubevents deliberately differs from the kubelet:

* Pods are handled, and their events sent, in pod UID order; Go walks a map in random order.
* A container is identified by its id string alone; Go's lookups also compare the runtime type prefix.
* An unknown container state raises ``ValueError``; Go panics.
* When IPs are carried over from the cache, the cache stores a shallow copy of the status dict with the old
  ``ips``; Go overwrites the field of the status it was given.
* A status without ``timestamp`` is stored at the inspection's clock time even when the evented rule is on
  (the kubelet's runtime stamps ``time.Now()`` on such statuses since kubernetes#127195).
* ``relist()`` raises what ``get_pods()`` raised (Go logs it); nothing changes either way. Malformed statuses
  and failing watch conditions are raised after the relist finished.
* ``EventedPLEG`` counts a stream that ends without an error as a failure (as the kubelet does since
  kubernetes#139262); Go's v1.32–v1.35 code retried it uncounted, spinning if the runtime keeps closing it.
* The health check needs a successful relist, not a non-zero relist time: a relist at the Unix epoch counts.

Beyond the kubelet (options): ``inspect_concurrency=N`` runs the inspections of one relist on up to N threads
(results are still applied in pod UID order); ``inspect_timeout`` (wall-clock seconds) gives up on an
inspection that has not returned, stores a ``TimeoutError`` for the pod and reinspects it later, so one hung
call (kubernetes#94829) does not stall the relist; ``stats()`` counts relists, durations, dropped events,
inspections, timeouts and reinspections.

Era C (Kubernetes v1.36+), as options: ``GenericPLEG(..., pod_sync_on_reinspect=True)`` makes
``request_reinspect(uid)`` behave as ``RequestReinspect``: the request waits until the pod is reconciled,
and a reinspection that finds no container event sends ``PodSync``. Watch conditions keep working in that
mode (Era C removed them).

``on_demand_relist=True`` (which needs ``pod_sync_on_reinspect=True`` and a runtime with ``get_pod(uid)``)
adds Era C's on-demand per-pod relist, the ``PLEGOnDemandRelist`` gate (GA in v1.37):

* ``request_relist(uid)`` is ``RequestRelist``: it queues the pod with the clock's time. The queue holds 200
  requests; one more is dropped and counted in ``stats()["relist_requests_dropped"]`` (the kubelet logs it).
  With the option off it does nothing (returns False), as with the gate off.
* The loop ``start()`` runs is the kubelet's worker loop: stop first, then the global relist when its timer
  is due (``relist_period`` after the last one ended), then one queued request. A request not made after the
  last successful global relist started is skipped: that relist served it.
* A request relists its pod alone (``relistPod``): ``get_pod(uid)`` returns the pod as ``get_pods()`` would
  list it (None for a pod the runtime has nothing of: a pod without containers), its record is reconciled
  as in a relist (events, reinspection, inspection into the cache, ``PodSync``), and the cache marks the pod
  observed at the listing's time with ``PodCache.set_observed_time``. It leaves the relist time, the cache's
  global timestamp and the running gauges alone, and shares the relist lock. A ``get_pod`` error changes
  nothing (the next global relist covers the pod); the loop keeps it in ``last_error``.
* ``loop_iteration()`` runs one pass of that loop on the calling thread without its wait (the loop must not
  be started): the way to step it on a fake clock, as Go's test calls ``workerLoopIteration``.

``set_observed_time(uid, t)`` had no Go source to follow (only its callers and tests). It is a per-pod
``update_time``: a waiter on that pod asking for a time at or before ``t`` is woken (``>=``, as ``set`` and
``update_time`` notify), and a later ``get_newer_than(uid, m)`` returns at once when ``t`` is strictly after
``m`` (as for the global timestamp). So the pod answers its waiters exactly as a global relist at ``t``
would, which is what TestWorkerLoop expects; the stored status is untouched. The observed time only moves
forward, and ``delete`` clears it.

Differences of the on-demand relist from the kubelet: requests are stamped with the PLEG's clock (Go uses
``time.Now()`` against a relist time read from its clock, the same clock in a kubelet); the listing's time
(Go's ``pod.Timestamp``, set by the runtime) is the clock just before ``get_pod``; a ``get_pod`` answer for
another pod raises ``ValueError`` (Go would file it under that pod).

Exit, fork and interrupts (see also ``kubevents._lifecycle``):

* A PLEG left running at exit is stopped by the exit hook, which waits for a runtime call in progress
  within ``kubevents.set_exit_timeout``'s limit. Its threads then stop touching Python, and the interpreter
  exits cleanly around them.
* ``GenericPLEG.stop(timeout=None)`` waits for the relist in progress; after ``timeout`` seconds it raises
  ``TimeoutError`` and the loop ends when the runtime call returns. Until then ``start()`` raises
  ``RuntimeError``. Ctrl-C interrupts ``stop()``, ``relist()`` waiting for the loop's relist or for
  inspection threads, ``EventChannel.recv`` and iteration, and ``PodCache.get_newer_than``.
* Only an ``Exception`` raised by ``get_pod_status`` is the pod's inspection error. A ``KeyboardInterrupt``
  or ``SystemExit`` raised by the runtime (``get_pods``, ``get_pod_status``, ``get_pod``) or a watch condition
  stops the relist where it is; the pods not reached keep their changes for the next relist. ``relist()`` and
  ``loop_iteration()`` raise it. In the loop started by ``start()`` it ends the loop, is logged at ERROR on
  the ``kubevents`` logger, and the next ``stop()`` or ``healthy()`` raises it, once. In the CRI event stream
  it stops the ``EventedPLEG`` (without a fall-back), whose ``stop()`` or ``healthy()`` raises it.
* After ``os.fork()`` the child has none of the parent's threads, and locks they held stay held: a
  ``GenericPLEG``, ``EventedPLEG``, ``PodCache`` or ``EventChannel`` made before the fork raises
  ``RuntimeError`` on every use in the child (its ``repr`` says so), and dropping it there leaves it be.
"""

from collections.abc import Callable, Mapping
from typing import Any

from kubevents._native import (
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

#: The kubelet's defaults: relist period and health threshold (seconds), event channel capacity.
RELIST_PERIOD = 1.0
RELIST_THRESHOLD = 180.0
CHANNEL_CAPACITY = 1000
#: While EventedPLEG is in use (seconds), and its stream retries before falling back.
EVENTED_RELIST_PERIOD = 300.0
EVENTED_RELIST_THRESHOLD = 600.0
EVENTED_MAX_STREAM_RETRIES = 5


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
    "EVENTED_MAX_STREAM_RETRIES",
    "EVENTED_RELIST_PERIOD",
    "EVENTED_RELIST_THRESHOLD",
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
