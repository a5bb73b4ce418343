r"""A controller that warns about crash-looping containers: it watches pods with the official ``kubernetes``
client and records a Warning event ``CrashLoopBackOff`` on a pod each time one of its containers is found
waiting in restart back-off, through a kubevents ``Broadcaster``, so that the repeats are counted on one event
(and aggregated and rate-limited) as client-go would do it.

Run it against your cluster with your kubeconfig (``pip install kubevents kubernetes``)::

    python examples/crashloop_controller.py                   # every namespace
    python examples/crashloop_controller.py --namespace demo  # one namespace

make a pod that crash-loops, and watch its event count go up with each restart::

    kubectl run crashy --image=busybox:1.36 -- sh -c 'sleep 2; exit 1'
    kubectl get events --field-selector involvedObject.name=crashy,reason=CrashLoopBackOff \
        -o custom-columns=COUNT:.count,SOURCE:.source.component,MESSAGE:.message --watch

In a cluster it runs as ``examples/deploy/deployment.yaml``, with the rights of ``examples/deploy/rbac.yaml``.

Ctrl-C or SIGTERM (what Kubernetes sends to stop a pod) stops the watch, then ``broadcaster.shutdown``
writes what is still queued (within ``SHUTDOWN_TIMEOUT`` seconds, inside a pod's 30 s grace period) and the
controller exits 0. ``crashloop_controller_async.py`` is the same controller on asyncio.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from types import FrameType
from typing import Any

import kubernetes

import kubevents
from kubevents.sinks import CoreV1Sink

COMPONENT = "crashloop-controller"
SHUTDOWN_TIMEOUT = 10  # seconds for the final flush
WATCH_TIMEOUT = 300  # seconds before the server ends a watch, and the controller opens the next one
REQUEST_TIMEOUT = (10, WATCH_TIMEOUT + 30)  # connect, read: no wait without end on a dead connection

log = logging.getLogger(COMPONENT)


class Stop(Exception):
    """A signal asked the controller to stop."""


def crash_looping(pod: Any) -> list[tuple[str, int]]:
    """``(container, restart count)`` of each container of ``pod`` (a ``V1Pod``) that waits in
    CrashLoopBackOff."""
    statuses = (pod.status and pod.status.container_statuses) or []
    return [(s.name, s.restart_count) for s in statuses
            if s.state and s.state.waiting and s.state.waiting.reason == "CrashLoopBackOff"]


class Controller:
    """Records one event per restart of a crash-looping container: the kubelet updates the pod's status
    several times per restart, and a new watch lists every pod again."""

    def __init__(self, recorder: kubevents.Recorder) -> None:
        self.recorder = recorder
        self.warned: dict[tuple[str, str], int] = {}  # (pod uid, container): the restart count warned about

    def handle(self, pod: Any) -> None:
        for container, restarts in crash_looping(pod):
            key = (pod.metadata.uid, container)
            if self.warned.get(key) == restarts:
                continue
            self.warned[key] = restarts
            self.recorder.eventf(pod, "Warning", "CrashLoopBackOff", "Container %s keeps crashing; back-off "
                                 "restarting it", container, field_path=f"spec.containers{{{container}}}")

    def forget(self, pod: Any) -> None:
        for key in [k for k in self.warned if k[0] == pod.metadata.uid]:
            del self.warned[key]


def load_config() -> None:
    """The pod's service account in a cluster, else the kubeconfig ($KUBECONFIG or ~/.kube/config)."""
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()


def watch_pods(core: Any, namespace: str | None, controller: Controller) -> None:
    """Watches the pods until a signal raises ``Stop``. Each watch starts with every pod (``ADDED``), so no
    resourceVersion is kept and a watch that expires (410 Gone) costs nothing."""
    # The list call itself (not a wrapper): the watch reads from it what to make of the objects (V1Pod).
    call, args = (core.list_namespaced_pod, (namespace,)) if namespace else (core.list_pod_for_all_namespaces, ())
    watch = kubernetes.watch.Watch()
    while True:
        for change in watch.stream(call, *args, timeout_seconds=WATCH_TIMEOUT, _request_timeout=REQUEST_TIMEOUT):
            if change["type"] in ("ADDED", "MODIFIED"):
                controller.handle(change["object"])
            elif change["type"] == "DELETED":
                controller.forget(change["object"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record a Warning event for every restart of a crash-looping "
                                                 "container, through kubevents.")
    parser.add_argument("--namespace", help="watch the pods of this namespace only (default: every namespace)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    load_config()
    core = kubernetes.client.CoreV1Api()

    def stop(signum: int, frame: FrameType | None) -> None:
        signal.signal(signum, signal.SIG_DFL)  # a second one ends the process at once
        raise Stop(signal.Signals(signum).name)

    broadcaster = kubevents.Broadcaster()
    broadcaster.start_recording_to_sink(CoreV1Sink(core))
    controller = Controller(broadcaster.new_recorder(COMPONENT))
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("watching pods in %s", f"namespace {args.namespace}" if args.namespace else "every namespace")
    try:
        watch_pods(core, args.namespace, controller)
    except Stop as e:
        log.info("%s: stopping; writing what is still queued", e)
    finally:
        flushed = flush(broadcaster)
    return 0 if flushed else 1


def flush(broadcaster: kubevents.Broadcaster) -> bool:
    """Shuts the broadcaster down, writing what is queued; False if that took longer than
    ``SHUTDOWN_TIMEOUT``."""
    try:
        stats = broadcaster.shutdown(timeout=SHUTDOWN_TIMEOUT)
    except TimeoutError as e:
        log.error("%s", e)
        return False
    log.info("stopped: events written: %d created, %d patched; %d skipped by the spam filter, %d abandoned",
             stats["created"], stats["patched"], stats["skipped"], stats["abandoned"])
    return True


if __name__ == "__main__":
    sys.exit(main())
